#!/usr/bin/env python3
"""The baselines users have today, on N GPUs: PyTorch cuBLAS + NCCL (sequential) and PyTorch
async-TP (torch.ops.symm_mem fused ops), on the reference shapes.

    PYTHONPATH=python torchrun --nproc-per-node 8 bench/torch_baselines.py [--csv FILE] [--iters 20]

Prints, per shape: the GEMM alone, the collective alone, sequential, async-TP, in ms (median of
--iters timed calls after warm-up, tilelink.benchmark.time_collective: CUDA events, all ranks
synchronised per sample; each sample is the slowest rank's time; the launches are queued behind a
GPU spin so Python's launch latency is not counted). Compare with `mpirun -np N build/bin/tilelink-bench <op> --mpi` in the
same run. NVLink multicast stays off (NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1).
"""
import argparse
import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from tilelink.benchmark import time_collective  # noqa: E402  (PYTHONPATH=python, or pip install .)

AG_SHAPES = [(8192, 11008, 4096), (8192, 14336, 4096), (8192, 28672, 8192), (8192, 53248, 16384),
             (8192, 29568, 8192)]
RS_SHAPES = [(8192, 4096, 11008), (8192, 4096, 14336), (8192, 3584, 14336), (8192, 4608, 36864),
             (8192, 8192, 28672), (8192, 8192, 29568)]


def timed(fn, iters):
    return time_collective(fn, iters)


def timed_or_nan(fn, iters, what, rank):
    """Async-TP may reject a shape or the environment; record NaN and say why instead of dying."""
    try:
        return timed(fn, iters)
    except Exception as e:
        if rank == 0:
            print(f"# {what}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return float("nan")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--csv", default="")
    args = p.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    group = dist.group.WORLD
    # The async-TP ops are defined by the Python module (torch.library), so they exist only after
    # it is imported; checking torch.ops.symm_mem first reports them missing.
    have_symm = False
    try:
        import torch.distributed._symmetric_memory as symm_mem
        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            symm_mem.enable_symm_mem_for_group(group.group_name)
        have_symm = hasattr(torch.ops.symm_mem, "fused_all_gather_matmul")
    except Exception as e:  # report, keep the other baselines
        if rank == 0:
            print(f"# async-TP unavailable: {type(e).__name__}: {e}")
    if rank == 0:
        print(f"# async-TP (torch.ops.symm_mem fused ops): {'available' if have_symm else 'unavailable'}")
    rows = []
    dt = torch.bfloat16

    for m, n, k in AG_SHAPES:
        a = torch.randn(m // world, k, device="cuda", dtype=dt)
        b = torch.randn(n // 8, k, device="cuda", dtype=dt)  # this rank's TP8 shard of B
        gathered = torch.empty(m, k, device="cuda", dtype=dt)
        t_comm = timed(lambda: dist.all_gather_into_tensor(gathered, a), args.iters)
        t_gemm = timed(lambda: gathered @ b.t(), args.iters)
        t_seq = timed(lambda: (dist.all_gather_into_tensor(gathered, a), gathered @ b.t()), args.iters)
        t_atp = float("nan")
        if have_symm:
            t_atp = timed_or_nan(lambda: torch.ops.symm_mem.fused_all_gather_matmul(a, [b.t()], 0, group.group_name),
                                 args.iters, f"async-TP ag m{m} n{n // 8} k{k}", rank)
        rows.append(("ag_gemm", m, n // 8, k, t_gemm, t_comm, t_seq, t_atp))

    for m, n, k in RS_SHAPES:
        a = torch.randn(m, k // 8, device="cuda", dtype=dt)
        b = torch.randn(n, k // 8, device="cuda", dtype=dt)
        partial = a @ b.t()
        out = torch.empty(m // world, n, device="cuda", dtype=dt)
        t_gemm = timed(lambda: a @ b.t(), args.iters)
        t_comm = timed(lambda: dist.reduce_scatter_tensor(out, partial), args.iters)
        t_seq = timed(lambda: dist.reduce_scatter_tensor(out, a @ b.t()), args.iters)
        t_atp = float("nan")
        if have_symm:
            t_atp = timed_or_nan(lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b.t(), "sum", 0,
                                                                                         group.group_name),
                                 args.iters, f"async-TP rs m{m} n{n} k{k // 8}", rank)
        rows.append(("gemm_rs", m, n, k // 8, t_gemm, t_comm, t_seq, t_atp))

    for m in (128, 256, 512, 1024, 2048):
        n, k = 8192, 28672 // 8
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(n, k, device="cuda", dtype=dt)
        c = a @ b.t()
        t_gemm = timed(lambda: a @ b.t(), args.iters)
        t_comm = timed(lambda: dist.all_reduce(c), args.iters)
        t_seq = timed(lambda: dist.all_reduce(a @ b.t()), args.iters)
        rows.append(("gemm_ar", m, n, k, t_gemm, t_comm, t_seq, float("nan")))

    if rank == 0:
        header = "op,M,N,K,gemm_ms,comm_ms,sequential_ms,async_tp_ms"
        print(f"# world {world}, {torch.cuda.get_device_name()}, torch {torch.__version__}")
        print(header)
        lines = [",".join([r[0]] + [str(x) for x in r[1:4]] + [f"{x:.4f}" for x in r[4:]]) for r in rows]
        print("\n".join(lines))
        if args.csv:
            with open(args.csv, "w") as f:
                f.write(header + "\n" + "\n".join(lines) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
