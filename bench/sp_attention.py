#!/usr/bin/env python3
"""Sequence-parallel attention across the ranks: tilelink.sp_attention against what a PyTorch user
runs, on the same inputs, samples interleaved, results checked against each other:

    PYTHONPATH=python TILELINK_LIBRARY=build/lib/libtilelink_c.so \\
      torchrun --standalone --nproc-per-node N bench/sp_attention.py [--iters 10] [--full]

Each rank holds its shard of every sequence (zig-zag: the sequence in 2N chunks, rank r holding
chunks r and 2N-1-r; 32 q heads, 8 kv heads, head_dim 128, bf16), causal (and with --full, full).
PyTorch:
  gather+SDPA  all_gather_into_tensor of K and V, then per local query chunk SDPA over the keys up
               to it (causal_lower_right bias; the fastest backend PyTorch picks);
  ring         torch.distributed.tensor.experimental.context_parallel (PyTorch's ring attention)
               over the same sequence, load-balanced sharding, SDPA inside the context.
The ring is timed in its own rounds (inside its context every SDPA call is a ring attention);
the others interleaved. Printed: ms (median, slowest rank), tilelink's speed-up over each, and
% of ideal =
max(T_attention, T_gather) / T_op, where T_attention is tilelink.attention of the local queries
over the whole K and V already in place and T_gather NCCL's all-gather of K and V.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

import tilelink
from tilelink.benchmark import time_collective_interleaved

# (batch, total sequence)
SHAPES = [(1, 8192), (4, 8192), (1, 32768), (2, 32768), (1, 131072)]
HQ, HKV, D = 32, 8, 128


def chunks_of(rank, size, local):
    c = local // 2
    return [(rank * c, c), ((2 * size - 1 - rank) * c, c)]  # (first position, length) of each local chunk


def gather_sdpa(q, k, v, rank, size, causal):
    """all_gather K and V ([b, local, h, d] shards), order them by position, SDPA per query chunk."""
    b, local, hkv, d = k.shape
    c = local // 2
    ks, vs = (torch.empty((size, *t.shape), dtype=t.dtype, device=t.device) for t in (k, v))
    dist.all_gather_into_tensor(ks, k)
    dist.all_gather_into_tensor(vs, v)
    order = [s for s in range(size)] + [s for s in reversed(range(size))]  # position chunk -> rank
    halves = [0] * size + [1] * size
    kk = torch.cat([ks[s][:, h * c:(h + 1) * c] for s, h in zip(order, halves)], 1).transpose(1, 2)
    vv = torch.cat([vs[s][:, h * c:(h + 1) * c] for s, h in zip(order, halves)], 1).transpose(1, 2)
    outs = []
    for i, (first, n) in enumerate(chunks_of(rank, size, local)):
        qq = q[:, i * c:(i + 1) * c].transpose(1, 2)
        if causal:
            end = first + n
            outs.append(F.scaled_dot_product_attention(qq, kk[:, :, :end], vv[:, :, :end],
                                                       attn_mask=causal_lower_right(n, end), enable_gqa=True))
        else:
            outs.append(F.scaled_dot_product_attention(qq, kk, vv, enable_gqa=True))
    return torch.cat(outs, 2).transpose(1, 2)


def ring_attention(mesh, q_full, k_full, v_full, causal):
    """PyTorch's context parallelism: returns a function running SDPA inside the context (the
    context shards the full tensors in place, once)."""
    from torch.distributed.tensor.experimental import context_parallel
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q_full, k_full, v_full))
    g = qt.shape[1] // kt.shape[1]
    kt, vt = kt.repeat_interleave(g, 1), vt.repeat_interleave(g, 1)  # ring attention takes equal heads
    ctx = context_parallel(mesh, buffers=[qt, kt, vt], buffer_seq_dims=[2, 2, 2])
    ctx.__enter__()
    return lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), ctx


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--full", action="store_true", help="also the non-causal mask")
    args = p.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, size = dist.get_rank(), dist.get_world_size()
    tilelink.init(heap_bytes=4 << 30)
    mesh = torch.distributed.device_mesh.init_device_mesh("cuda", (size,))
    if rank == 0:
        print(f"# {torch.cuda.get_device_name()}, {size} rank(s), torch {torch.__version__}, bf16, {HQ}/{HKV} heads, "
              f"head_dim {D}, zig-zag shards; ms median of {args.iters}, slowest rank")
        print(f"{'batch':>5s} {'seq':>7s} {'mask':>6s} {'tilelink':>9s} {'gath+SDPA':>9s} {'ring':>9s} "
              f"{'attn':>8s} {'gather':>8s} {'/g+SDPA':>8s} {'/ring':>7s} {'%ideal':>7s} {'maxdiff':>8s}")
    for causal in (True, False) if args.full else (True,):
        for b, total in SHAPES:
            local = total // size
            g = torch.Generator(device="cuda").manual_seed(1234 + total + b)
            q_full, k_full, v_full = (torch.randn(b, total, h, D, generator=g, device="cuda", dtype=torch.bfloat16)
                                      for h in (HQ, HKV, HKV))
            rows = torch.cat([torch.arange(f, f + n) for f, n in chunks_of(rank, size, local)]).cuda()
            q, k, v = (t[:, rows].contiguous() for t in (q_full, k_full, v_full))
            fns = {"tilelink": lambda: tilelink.sp_attention(q, k, v, causal=causal),
                   "gather_sdpa": lambda: gather_sdpa(q, k, v, rank, size, causal)}
            ours = fns["tilelink"]()[0]
            diff = (ours.float() - fns["gather_sdpa"]().float()).abs().max().item()
            # The parts: attention over K and V in place (each local chunk against its keys), and the gather.
            kf, vf = k_full.contiguous(), v_full.contiguous()
            def attention_only():
                c = local // 2
                for i, (first, n) in enumerate(chunks_of(rank, size, local)):
                    tilelink.attention(q[:, i * c:(i + 1) * c], kf[:, :first + n if causal else total],
                                       vf[:, :first + n if causal else total], causal=causal, q_position0=first)
            ks = torch.empty((size, *k.shape), dtype=k.dtype, device="cuda")
            def gather_only():
                dist.all_gather_into_tensor(ks, k)
                dist.all_gather_into_tensor(ks, v)
            parts = time_collective_interleaved({"attn": attention_only, "gather": gather_only}, args.iters)
            ms = time_collective_interleaved(fns, args.iters)
            # Inside context_parallel every SDPA call is a ring attention over DTensors, so the
            # ring is timed on its own (not interleaved with the others).
            ring_ctx = None
            try:
                ring, ring_ctx = ring_attention(mesh, q_full, k_full, v_full, causal)
                ms.update(time_collective_interleaved({"ring": ring}, args.iters))
            except Exception as e:  # noqa: BLE001 - report any refusal of the baseline as a missing column
                if rank == 0:
                    print(f"# ring attention unavailable: {type(e).__name__}: {str(e)[:200]}")
            finally:
                if ring_ctx is not None:
                    ring_ctx.__exit__(None, None, None)
            if rank == 0:
                ideal = max(parts["attn"], parts["gather"] if size > 1 else 0.0)
                ring = f"{ms['ring']:9.3f}" if "ring" in ms else f"{'-':>9s}"
                ring_x = f"{ms['ring'] / ms['tilelink']:6.2f}x" if "ring" in ms else f"{'-':>7s}"
                print(f"{b:5d} {total:7d} {'causal' if causal else 'full':>6s} {ms['tilelink']:9.3f} "
                      f"{ms['gather_sdpa']:9.3f} {ring} {parts['attn']:8.3f} {parts['gather']:8.3f} "
                      f"{ms['gather_sdpa'] / ms['tilelink']:7.2f}x {ring_x} {100 * ideal / ms['tilelink']:6.1f}% "
                      f"{diff:8.1e}", flush=True)
            del q_full, k_full, v_full, q, k, v, kf, vf, ks
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
