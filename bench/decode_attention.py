#!/usr/bin/env python3
"""Decode attention over a KV cache split across the ranks: tilelink.flash_decode against what a
PyTorch user runs, on the same inputs, samples interleaved, results checked against each other:

    PYTHONPATH=python TILELINK_LIBRARY=build/lib/libtilelink_c.so \\
      torchrun --standalone --nproc-per-node N bench/decode_attention.py [--iters 20]

Each rank holds tokens / N of every sequence's cache ([batch, tokens/N, kv_heads, 128], bf16,
the flash-attention cache layout) and the query of every sequence ([batch, q_heads, 128]).
PyTorch: per rank, scaled_dot_product_attention over its shard (enable_gqa, the cache seen as
[batch, kv_heads, tokens/N, 128]) and the log-sum-exp of its scores, all_gather of both, and the
combine; with one rank, SDPA alone. Printed: ms (median, slowest rank), the speed-up, and each
against the HBM floor of reading the rank's share of the cache (K + V bytes / 4.8 TB/s).
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tilelink
from tilelink.benchmark import time_collective_interleaved

# (batch, q_heads, kv_heads, tokens per sequence in all)
SHAPES = [(1, 32, 8, 32768), (1, 32, 8, 262144), (1, 32, 8, 1048576), (4, 32, 8, 65536), (16, 32, 8, 16384),
          (1, 96, 12, 262144), (8, 96, 12, 65536)]
HBM_BYTES_PER_S = 4.8e12


def torch_decode(q, k, v, world_size):
    """What a PyTorch user writes: SDPA per rank, its lse, all_gather, combine."""
    qq = q.unsqueeze(2)                              # [b, hq, 1, d]
    kk, vv = k.transpose(1, 2), v.transpose(1, 2)    # [b, hkv, s, d] views of the cache
    out = F.scaled_dot_product_attention(qq, kk, vv, enable_gqa=True).squeeze(2)
    if world_size == 1:
        return out
    g = q.shape[1] // k.shape[2]
    scores = torch.einsum("bhgd,bhsd->bhgs", qq.view(q.shape[0], k.shape[2], g, -1).float(), kk.float())
    lse = torch.logsumexp(scores * q.shape[-1] ** -0.5, -1).view(q.shape[0], q.shape[1])
    outs = torch.empty((world_size, *out.shape), dtype=out.dtype, device=out.device)
    lses = torch.empty((world_size, *lse.shape), dtype=lse.dtype, device=lse.device)
    dist.all_gather_into_tensor(outs, out)
    dist.all_gather_into_tensor(lses, lse)
    w = torch.softmax(lses, 0).unsqueeze(-1)
    return (outs.float() * w).sum(0).to(out.dtype)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, size = dist.get_rank(), dist.get_world_size()
    tl = tilelink.init(heap_bytes=1 << 30)
    if rank == 0:
        print(f"# {torch.cuda.get_device_name()}, {size} rank(s), torch {torch.__version__}, bf16, head_dim 128; "
              f"ms, median of {args.iters}, slowest rank")
        print("batch,heads,tokens,torch,tilelink,speed-up,torch %floor,tilelink %floor")
    d = 128
    for b, hq, hkv, tokens in SHAPES:
        local = tokens // size
        g = torch.Generator(device="cuda").manual_seed(1234 + rank)
        q = torch.randn(b, hq, d, device="cuda", dtype=torch.bfloat16)
        dist.broadcast(q, 0)
        k = torch.randn(b, local, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(b, local, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
        want, got = torch_decode(q, k, v, size), tilelink.flash_decode(q, k, v)
        err = (got.float() - want.float()).abs().max().item()
        assert err < 2e-2, f"tilelink and PyTorch disagree by {err:.3e} at {(b, hq, hkv, tokens)}"
        t = time_collective_interleaved({"torch": lambda: torch_decode(q, k, v, size),
                                         "tilelink": lambda: tilelink.flash_decode(q, k, v)}, args.iters)
        floor_ms = 2 * k.numel() * k.element_size() / HBM_BYTES_PER_S * 1e3
        if rank == 0:
            print(f"{b},{hq}/{hkv},{tokens},{t['torch']:.4f},{t['tilelink']:.4f},{t['torch'] / t['tilelink']:.2f},"
                  f"{100 * floor_ms / t['torch']:.1f},{100 * floor_ms / t['tilelink']:.1f}")
        del q, k, v
    tl.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
