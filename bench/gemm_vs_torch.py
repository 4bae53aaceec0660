#!/usr/bin/env python3
"""One GPU: PyTorch's F.linear against tilelink's two GEMMs on the same inputs, samples interleaved:

    PYTHONPATH=python TILELINK_LIBRARY=build/lib/libtilelink_c.so \\
      torchrun --standalone --nproc-per-node 1 bench/gemm_vs_torch.py [--iters 30]

At world size 1, ag_gemm's decomposed path is one call of tilelink's cuBLASLt wrapper (the GEMM of
every decomposed path) and its fused path is the GEMM engine alone, so this checks that the
decomposed paths run cuBLASLt as fast as PyTorch does, and how far the engine is from it.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tilelink
from tilelink.benchmark import time_collective_interleaved

# (M, N, K): per-rank shapes of the reference TP layers and the TP2 LLaMA MLP, plus decode M.
SHAPES = [(8192, 6656, 16384), (8192, 3584, 8192), (8192, 1376, 4096), (4096, 14336, 4096), (4096, 4096, 7168),
          (2048, 3584, 8192), (128, 3584, 8192)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=30)
    args = p.parse_args()
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    if dist.get_world_size() != 1:
        raise SystemExit("run with one process: --nproc-per-node 1")
    tl = tilelink.init(dist.group.WORLD, heap_bytes=4 << 30)
    torch.manual_seed(0)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16; ms, median of {args.iters}")
    print("M,N,K,F.linear,tilelink cuBLASLt,tilelink engine,cuBLASLt/F.linear speed,engine/F.linear speed")
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5
        t = time_collective_interleaved({"torch": lambda: F.linear(a, b),
                                         "cublaslt": lambda: tilelink.ag_gemm(a, b, path="decomposed"),
                                         "engine": lambda: tilelink.ag_gemm(a, b, path="fused")}, args.iters)
        print(f"{m},{n},{k},{t['torch']:.4f},{t['cublaslt']:.4f},{t['engine']:.4f},"
              f"{t['torch'] / t['cublaslt']:.3f},{t['torch'] / t['engine']:.3f}")
    tl.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
