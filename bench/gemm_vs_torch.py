#!/usr/bin/env python3
"""One GPU: PyTorch's F.linear against tilelink's GEMMs on the same inputs, samples interleaved:

    PYTHONPATH=python TILELINK_LIBRARY=build/lib/libtilelink_c.so \\
      torchrun --standalone --nproc-per-node 1 bench/gemm_vs_torch.py [--random N [--seed S]] [--tune]

Per shape: F.linear (cuBLASLt with its heuristic: what a PyTorch user has), tilelink.linear (the
plain GEMM engine, its rule's kernel; with --tune the tuned one), and tilelink's cuBLASLt wrapper
(ag_gemm's decomposed path at world size 1, the GEMM of every decomposed path: it should tie with
F.linear). Each sample times a block of back-to-back calls (at least ~0.3 ms of GPU work) queued
behind a GPU spin, so Python's launch cost is not counted; the inputs stay in L2 where they fit,
for every candidate alike. Without --random or --shapes: the reference tensor-parallel layers per
rank and a decode-sized M; --shapes MxNxK,... the shapes given; --random N draws N shapes (M
log-uniform in --rows, N and K multiples of 8 log-uniform in 256-32768; the seed is printed, and
repeats the shapes here only: tilelink-bench's --sweep-random draws another set from the same
seed). Several shapes end with the geometric mean and the share below 0.90x.
"""
import argparse
import math
import random

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tilelink
from tilelink.benchmark import time_collective_interleaved

SHAPES = [(8192, 6656, 16384), (8192, 3584, 8192), (8192, 1376, 4096), (4096, 14336, 4096), (4096, 4096, 7168),
          (2048, 3584, 8192), (128, 3584, 8192)]


def random_shapes(count, seed, rows):
    rng = random.Random(seed)
    log_uniform = lambda lo, hi: int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))  # noqa: E731
    mult8 = lambda v: max(256, min(32768, v // 8 * 8))  # noqa: E731
    return [(min(rows[1], max(rows[0], log_uniform(*rows))), mult8(log_uniform(256, 32768)),
             mult8(log_uniform(256, 32768))) for _ in range(count)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--random", type=int, default=0, help="this many random shapes instead of the fixed ones")
    p.add_argument("--seed", type=lambda s: int(s, 0), default=None)
    p.add_argument("--rows", default="1:16384", help="LO:HI rows of the random shapes")
    p.add_argument("--shapes", default="", help="MxNxK[,MxNxK...] instead of the fixed shapes")
    p.add_argument("--tune", action="store_true", help="tilelink.linear with tuning on")
    args = p.parse_args()
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    if dist.get_world_size() != 1:
        raise SystemExit("run with one process: --nproc-per-node 1")
    tl = tilelink.init(dist.group.WORLD, heap_bytes=4 << 30)
    tilelink.set_gemm_tuning(args.tune)
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in item.split("x")) for item in args.shapes.split(",")]
        if any(len(s) != 3 for s in shapes):
            raise SystemExit(f"--shapes: expected MxNxK[,MxNxK...], got {args.shapes!r}")
    elif args.random:
        seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(63)
        rows = tuple(int(v) for v in args.rows.split(":"))
        shapes = random_shapes(args.random, seed, rows)
        print(f"# {args.random} random shapes, rows {args.rows}, seed {seed:#x} (--seed {seed:#x} repeats them)")
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16; ms per call, median of {args.iters}"
          f" blocks; tilelink.linear {'tuned' if args.tune else 'by its rule'}")
    print("M,N,K,F.linear,tilelink.linear,tilelink cuBLASLt,linear/F.linear speed,cuBLASLt/F.linear speed")
    g = torch.Generator(device="cuda").manual_seed(random.SystemRandom().getrandbits(62))
    ratios = []
    for m, n, k in shapes:
        a = torch.rand(m, k, device="cuda", generator=g).to(torch.bfloat16) * 2 - 1
        b = (torch.rand(n, k, device="cuda", generator=g).to(torch.bfloat16) * 2 - 1) / k**0.5
        want = F.linear(a, b)
        got = tilelink.linear(a, b)  # tunes here when tuning is on
        err = (got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-6)
        if err > 1e-2:
            raise SystemExit(f"{m}x{n}x{k}: tilelink.linear differs from F.linear (relative error {err:.2e})")
        est_us = 2.0 * m * n * k / 600e6 + 5.0  # at ~600 TFLOP/s, or a launch's few microseconds
        reps = max(1, min(200, int(300.0 / est_us)))  # a block of ~0.3 ms
        block = lambda f: (lambda: [f() for _ in range(reps)])  # noqa: E731
        t = time_collective_interleaved({"torch": block(lambda: F.linear(a, b)),
                                         "linear": block(lambda: tilelink.linear(a, b)),
                                         "cublaslt": block(lambda: tilelink.ag_gemm(a, b, path="decomposed"))},
                                        args.iters)
        t = {name: v / reps for name, v in t.items()}
        ratios.append(t["torch"] / t["linear"])
        print(f"{m},{n},{k},{t['torch']:.4f},{t['linear']:.4f},{t['cublaslt']:.4f},"
              f"{t['torch'] / t['linear']:.3f},{t['torch'] / t['cublaslt']:.3f}", flush=True)
    if len(ratios) > 1:
        geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        below = sum(r < 0.90 for r in ratios)
        print(f"# tilelink.linear / F.linear speed: geomean {geomean:.3f}x over {len(ratios)} shapes, "
              f"min {min(ratios):.3f}x, {below} below 0.90x")
    tl.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
