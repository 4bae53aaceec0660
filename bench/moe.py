#!/usr/bin/env python3
"""Mixture-of-experts GEMMs: tilelink.ag_moe and tilelink.moe_rs against what a PyTorch user runs,
on the same inputs, samples interleaved, results checked against each other:

    PYTHONPATH=python TILELINK_LIBRARY=build/lib/libtilelink_c.so \\
      torchrun --standalone --nproc-per-node N bench/moe.py [--tokens 1024 8192] [--routing zipf]

Each rank holds M / N tokens, the routing of all M tokens (top-k experts each, uniform or Zipf),
and its slice of every expert's fused gate+up weight ([experts, 2 I / N, hidden], bf16).
PyTorch sequential: all_gather_into_tensor, a stable sort of the routing by expert, the token
rows in that order, torch._grouped_mm, the rows back to token order. Also the grouped GEMM alone
on the same sorted rows: torch._grouped_mm against tilelink.grouped_mm. moe_rs: h [M x topk,
I / N] per rank and the down projection [experts, hidden, I / N]; PyTorch sequential: the sort,
torch._grouped_mm, the rows back, the top-k weighted sum, reduce_scatter_tensor. The layer: both,
with SiLU x up between (tilelink hands ag_moe's sorted rows to moe_rs). Printed: ms (median,
slowest rank) and the ratios (> 1: tilelink faster). --op picks one table.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tilelink
from tilelink.benchmark import time_collective_interleaved

# (model, hidden, intermediate, experts, topk)
MODELS = [("Qwen1.5-MoE-A2.7B", 2048, 1408, 60, 4), ("Mixtral-8x7B", 4096, 14336, 8, 2),
          ("Mixtral-8x22B", 6144, 16384, 8, 2), ("DeepSeek-MoE-16B", 2048, 1408, 64, 6),
          ("DeepSeek-V3", 7168, 2048, 256, 8), ("Qwen3-30B-A3B", 2048, 768, 128, 8)]


def routing(tokens, experts, topk, zipf, gen):
    weight = torch.ones(experts, device="cuda")
    if zipf:
        weight = 1.0 / torch.arange(1, experts + 1, device="cuda", dtype=torch.float32) ** 1.2
    return torch.multinomial(weight.expand(tokens, experts), topk, replacement=False, generator=gen).to(torch.int32)


def sort_by_expert(ids, experts):
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=experts), 0, dtype=torch.int32)
    return order, offs


def torch_ag_moe(x, ids, w, size):
    """all_gather, sort by expert, grouped GEMM, back to token order."""
    if size > 1:
        xg = torch.empty((size * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(xg, x)
    else:
        xg = x
    order, offs = sort_by_expert(ids, w.shape[0])
    ys = torch._grouped_mm(xg[order // ids.shape[1]], w.transpose(-2, -1), offs=offs)
    y = torch.empty_like(ys)
    y[order] = ys
    return y


def torch_moe_rs(h, ids, wts, w, size):
    """Sort, grouped GEMM, rows back, top-k weighted sum, reduce_scatter."""
    tokens, topk = ids.shape
    order, offs = sort_by_expert(ids, w.shape[0])
    ys = torch._grouped_mm(h[order], w.transpose(-2, -1), offs=offs)
    y = torch.empty_like(ys)
    y[order] = ys
    part = (y.view(tokens, topk, -1).float() * wts.unsqueeze(-1)).sum(1).to(h.dtype)
    if size == 1:
        return part
    out = torch.empty((tokens // size, part.shape[1]), dtype=part.dtype, device=part.device)
    dist.reduce_scatter_tensor(out, part)
    return out


def act(y):
    gate, up = y.chunk(2, -1)
    return F.silu(gate) * up


def cases(args, size):
    """Every (model, token count): its shape and a routing of all tokens (uniform or Zipf)."""
    for model, hidden, inter, experts, topk in MODELS:
        for tokens in args.tokens:
            tokens = tokens // size * size
            gen = torch.Generator(device="cuda").manual_seed(4321)
            ids = routing(tokens, experts, topk, args.routing == "zipf", gen)
            yield model, tokens, hidden, inter, experts, topk, ids, gen


def check_close(got, want, bound, what):
    err = ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
    assert err < bound, f"{what}: tilelink and PyTorch disagree by {err:.3e} (relative to the largest value)"


def report(rank, fields, flush=True):
    if rank == 0:
        print(",".join(f"{f:.4f}" if isinstance(f, float) else str(f) for f in fields), flush=flush)


def bench_ag_moe(args, rank, size):
    report(rank, ["# ag_moe, gate+up n = 2I/ranks"])
    report(rank, ["model", "M", "torch_seq", "tilelink", "speed-up", "grouped_mm_torch", "grouped_mm_tilelink",
                  "grouped_ratio"])
    for model, tokens, hidden, inter, experts, topk, ids, _gen in cases(args, size):
        m, n = tokens // size, 2 * inter // size
        x = torch.randn(m, hidden, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(experts, n, hidden, device="cuda", dtype=torch.bfloat16) * hidden ** -0.5
        check_close(tilelink.ag_moe(x, ids, w), torch_ag_moe(x, ids, w, size), 2e-2, f"ag_moe {model} M={tokens}")
        # The grouped GEMM alone, on the sorted rows PyTorch builds (one group per expert).
        xg = torch.empty((size * m, hidden), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(xg, x)
        order, offs = sort_by_expert(ids, experts)
        a = xg[order // topk].contiguous()
        wt = w.transpose(-2, -1)
        check_close(tilelink.grouped_mm(a, w, offs), torch._grouped_mm(a, wt, offs=offs), 2e-2,
                    f"grouped_mm {model} M={tokens}")
        t = time_collective_interleaved({"torch": lambda: torch_ag_moe(x, ids, w, size),
                                         "tilelink": lambda: tilelink.ag_moe(x, ids, w),
                                         "g_torch": lambda: torch._grouped_mm(a, wt, offs=offs),
                                         "g_tilelink": lambda: tilelink.grouped_mm(a, w, offs)}, args.iters)
        report(rank, [model, tokens, t["torch"], t["tilelink"], f"{t['torch'] / t['tilelink']:.2f}", t["g_torch"],
                      t["g_tilelink"], f"{t['g_torch'] / t['g_tilelink']:.2f}"])
        del x, w, a, xg
        torch.cuda.empty_cache()


def bench_moe_rs(args, rank, size):
    report(rank, ["# moe_rs, down projection k_shard = I/ranks"])
    report(rank, ["model", "M", "torch_seq", "tilelink", "speed-up"])
    for model, tokens, hidden, inter, experts, topk, ids, gen in cases(args, size):
        ks = inter // size
        wts = torch.rand(tokens, topk, device="cuda", generator=gen)
        h = torch.randn(tokens * topk, ks, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(experts, hidden, ks, device="cuda", dtype=torch.bfloat16) * ks ** -0.5
        check_close(tilelink.moe_rs(h, ids, wts, w), torch_moe_rs(h, ids, wts, w, size), 3e-2,
                    f"moe_rs {model} M={tokens}")
        t = time_collective_interleaved({"torch": lambda: torch_moe_rs(h, ids, wts, w, size),
                                         "tilelink": lambda: tilelink.moe_rs(h, ids, wts, w)}, args.iters)
        report(rank, [model, tokens, t["torch"], t["tilelink"], f"{t['torch'] / t['tilelink']:.2f}"])
        del h, w
        torch.cuda.empty_cache()


def bench_layer(args, rank, size):
    """The whole MoE block: gate+up, SiLU x up, down. tilelink keeps the expert-sorted rows between
    its two ops (ag_moe sorted_layout, moe_rs h_rows); PyTorch runs both GEMMs sequentially."""
    report(rank, ["# MoE layer: ag_moe -> SiLU x up -> moe_rs"])
    report(rank, ["model", "M", "torch_seq", "tilelink", "speed-up"])
    for model, tokens, hidden, inter, experts, topk, ids, gen in cases(args, size):
        m, n = tokens // size, 2 * inter // size
        wts = torch.rand(tokens, topk, device="cuda", generator=gen)
        x = torch.randn(m, hidden, device="cuda", dtype=torch.bfloat16)
        w1 = torch.randn(experts, n, hidden, device="cuda", dtype=torch.bfloat16) * hidden ** -0.5
        w2 = torch.randn(experts, hidden, n // 2, device="cuda", dtype=torch.bfloat16) * (n // 2) ** -0.5

        def torch_layer():
            return torch_moe_rs(act(torch_ag_moe(x, ids, w1, size)), ids, wts, w2, size)

        def tilelink_layer():
            y, rows = tilelink.ag_moe(x, ids, w1, sorted_layout=True)
            return tilelink.moe_rs(act(y), ids, wts, w2, h_rows=rows)

        check_close(tilelink_layer(), torch_layer(), 3e-2, f"MoE layer {model} M={tokens}")
        t = time_collective_interleaved({"torch": torch_layer, "tilelink": tilelink_layer}, args.iters)
        report(rank, [model, tokens, t["torch"], t["tilelink"], f"{t['torch'] / t['tilelink']:.2f}"])
        del x, w1, w2
        torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, nargs="+", default=[1024, 8192])
    p.add_argument("--routing", choices=["uniform", "zipf"], default="uniform")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--op", choices=["ag_moe", "moe_rs", "layer", "all"], default="all")
    args = p.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, size = dist.get_rank(), dist.get_world_size()
    tl = tilelink.init(heap_bytes=6 << 30)
    report(rank, [f"# {torch.cuda.get_device_name()}, {size} rank(s), torch {torch.__version__}, bf16, "
                  f"{args.routing} routing; ms, median of {args.iters}, slowest rank"])
    for op, bench in (("ag_moe", bench_ag_moe), ("moe_rs", bench_moe_rs), ("layer", bench_layer)):
        if args.op in (op, "all"):
            bench(args, rank, size)
    tl.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
