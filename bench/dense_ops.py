#!/usr/bin/env python3
"""tilelink's dense tensor-parallel ops against what PyTorch users run, in one table per run:

    PYTHONPATH=python TILELINK_LIBRARY=build/lib/libtilelink_c.so \\
      torchrun --standalone --nproc-per-node 2 bench/dense_ops.py [--iters 20] [--csv FILE] [--tp 8]
      [--m 8192]

For every reference shape (global M, N, K of TP8 Llama/Qwen layers; each rank takes its 1/tp shard
of N for AG-GEMM and of K for GEMM-RS, so the per-rank problem matches the published TP8 numbers
whatever the world size; --m 128,2048,16384 runs every reference N, K at each M), times, with
samples interleaved (tilelink.benchmark):
  gemm      PyTorch's GEMM alone (F.linear: cuBLASLt with its heuristic)
  comm      the NCCL collective alone
  seq       PyTorch sequential: the collective, then F.linear
  async_tp  PyTorch async-TP (torch.ops.symm_mem fused ops), where available
  auto / fused / decomposed   tilelink's op on each path
and prints ms, tilelink auto's ratio to seq and to async-TP, and % of ideal = max(gemm, comm) / t,
then the geomean of auto's ratios per op.
Every output is checked against PyTorch sequential first.
"""
import argparse
import os
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tilelink
from tilelink.benchmark import time_collective_interleaved

AG_SHAPES = [(8192, 11008, 4096), (8192, 14336, 4096), (8192, 28672, 8192), (8192, 53248, 16384),
             (8192, 29568, 8192)]
RS_SHAPES = [(8192, 4096, 11008), (8192, 4096, 14336), (8192, 3584, 14336), (8192, 4608, 36864),
             (8192, 8192, 28672), (8192, 8192, 29568)]
PATHS = ("auto", "fused", "decomposed")


def agree(name, got, want, rank):
    rel = ((got.float() - want.float()).norm() / want.float().norm()).item()
    worst = torch.tensor([rel], device="cuda")
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    if worst.item() > 2e-2:
        raise SystemExit(f"{name}: relative error {worst.item():.2e} against PyTorch sequential")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--tp", type=int, default=8, help="the TP degree whose per-rank shards are measured")
    p.add_argument("--csv", default="")
    p.add_argument("--m", default="8192", help="comma-separated M (tokens, all ranks together) for every shape")
    p.add_argument("--heap-gib", type=int, default=8, help="symmetric heap per rank (large M needs more than the default)")
    args = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD
    tl = tilelink.init(group, heap_bytes=args.heap_gib << 30)
    try:
        from torch.distributed import _symmetric_memory  # noqa: F401  (defines torch.ops.symm_mem)

        have_atp = hasattr(torch.ops.symm_mem, "fused_all_gather_matmul")
    except Exception:  # an older PyTorch: the column stays empty
        have_atp = False
    torch.manual_seed(1000 + rank)
    dt = torch.bfloat16
    rows = []

    def measure(op, shape, cands, check):
        for name, fn in cands.items():
            if name not in ("gemm", "comm"):
                agree(f"{op} {shape} {name}", fn(), check, rank)
        t = time_collective_interleaved(cands, args.iters)
        rows.append((op, *shape, t))

    ms = [int(v) for v in args.m.split(",")]
    if any(m % world for m in ms):
        raise SystemExit(f"every --m must be divisible by the {world} ranks")
    for m, n, k in ((m, n, k) for m in ms for _, n, k in AG_SHAPES):
        n_r = n // args.tp
        a = torch.randn(m // world, k, device="cuda", dtype=dt)
        b = torch.randn(n_r, k, device="cuda", dtype=dt) / k**0.5
        gathered = torch.empty(m, k, device="cuda", dtype=dt)

        def seq():
            dist.all_gather_into_tensor(gathered, a)
            return F.linear(gathered, b)

        cands = {"gemm": lambda: F.linear(gathered, b), "comm": lambda: dist.all_gather_into_tensor(gathered, a),
                 "seq": seq}
        if have_atp:
            cands["async_tp"] = lambda: torch.ops.symm_mem.fused_all_gather_matmul(a, [b.t()], 0, group.group_name)[1][0]
        for path in PATHS:
            cands[path] = lambda path=path: tilelink.ag_gemm(a, b, path=path)
        measure("ag_gemm", (m, n_r, k), cands, seq().clone())

    for m, n, k in ((m, n, k) for m in ms for _, n, k in RS_SHAPES):
        k_r = k // args.tp
        a = torch.randn(m, k_r, device="cuda", dtype=dt)
        b = torch.randn(n, k_r, device="cuda", dtype=dt) / k_r**0.5
        partial = F.linear(a, b)
        out = torch.empty(m // world, n, device="cuda", dtype=dt)

        def seq():
            dist.reduce_scatter_tensor(out, F.linear(a, b))
            return out

        cands = {"gemm": lambda: F.linear(a, b), "comm": lambda: dist.reduce_scatter_tensor(out, partial), "seq": seq}
        if have_atp:
            cands["async_tp"] = lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b.t(), "sum", 0,
                                                                                        group.group_name)
        for path in PATHS:
            cands[path] = lambda path=path: tilelink.gemm_rs(a, b, path=path)
        measure("gemm_rs", (m, n, k_r), cands, seq().clone())

    if rank == 0:
        print(f"# {world} ranks, {torch.cuda.get_device_name()}, torch {torch.__version__}; per-rank TP{args.tp} "
              f"shards; ms (median of {args.iters} interleaved samples, slowest rank); ideal = max(gemm, comm)")
        head = ["op", "M", "N", "K", "gemm", "comm", "seq", "async_tp", *PATHS, "auto/seq", "auto/async_tp",
                "auto %ideal", "async_tp %ideal"]
        print(",".join(head))
        lines = []
        for op, m, n, k, t in rows:
            ideal = max(t["gemm"], t["comm"])
            atp = t.get("async_tp", math.nan)
            cells = [t["gemm"], t["comm"], t["seq"], atp, *(t[p] for p in PATHS), t["seq"] / t["auto"],
                     atp / t["auto"], 100 * ideal / t["auto"], 100 * ideal / atp]
            lines.append(",".join([op, str(m), str(n), str(k)] + [f"{c:.4f}" for c in cells]))
        print("\n".join(lines))
        for op in ("ag_gemm", "gemm_rs"):
            ts = [t for o, *_, t in rows if o == op]
            geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan
            seq_r = [t["seq"] / t["auto"] for t in ts]
            atp_r = [t["async_tp"] / t["auto"] for t in ts if "async_tp" in t]
            print(f"# {op} auto: geomean {geo(seq_r):.3f}x of seq (min {min(seq_r):.3f}), "
                  f"{geo(atp_r):.3f}x of async-TP (min {min(atp_r, default=math.nan):.3f})")
        if args.csv:
            with open(args.csv, "w") as f:
                f.write(",".join(head) + "\n" + "\n".join(lines) + "\n")
    tl.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
