#!/usr/bin/env python3
"""A LLaMA-style tensor-parallel MLP block with tilelink, against the same block in plain
PyTorch (F.linear + NCCL) and with PyTorch's async-TP, in one run:

    torchrun --nproc-per-node 2 examples/tp_mlp.py [--tokens 8192 --hidden 4096 --ffn 14336]

Sequence-parallel in, sequence-parallel out (Megatron-LM's layout): each rank holds tokens/W rows
of x; the gate/up projection is column-parallel (AllGather-GEMM), the down projection row-parallel
(GEMM-ReduceScatter):

    h = all_gather(x) @ w_gate_up.T       tilelink.ag_gemm(x, w_gate_up)
    a = silu(h_gate) * h_up
    y = reduce_scatter(a @ w_down.T)      tilelink.gemm_rs(a, w_down)

The results are checked against each other, then each block and each of its two ops is timed
(tilelink.benchmark.time_collective: median of --iters calls after warm-up; each sample is the
slowest rank's; launches are queued behind a GPU spin longer than any candidate takes to
enqueue, so Python's launch latency is not what is measured). Rank 0 prints one table.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tilelink
from tilelink.benchmark import time_collective


def swiglu(h):
    gate, up = h.chunk(2, dim=-1)
    return F.silu(gate) * up


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=8192, help="tokens in the batch, all ranks together")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--ffn", type=int, default=14336, help="MLP width before sharding")
    p.add_argument("--iters", type=int, default=30)
    args = p.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD
    if args.tokens % world or args.ffn % world:
        raise SystemExit(f"--tokens and --ffn must be divisible by the {world} ranks")
    tl = tilelink.init(group)

    torch.manual_seed(1234 + rank)
    dt = torch.bfloat16
    t_local, f_local = args.tokens // world, args.ffn // world
    x = torch.randn(t_local, args.hidden, device="cuda", dtype=dt)
    w_gate_up = torch.randn(2 * f_local, args.hidden, device="cuda", dtype=dt) / args.hidden**0.5
    w_down = torch.randn(args.hidden, f_local, device="cuda", dtype=dt) / args.ffn**0.5
    gathered = torch.empty(args.tokens, args.hidden, device="cuda", dtype=dt)
    out = torch.empty(t_local, args.hidden, device="cuda", dtype=dt)

    # Each way of running the block: its AllGather-GEMM, its GEMM-ReduceScatter, and both with the
    # SwiGLU between them.
    def plain_ag():
        dist.all_gather_into_tensor(gathered, x, group=group)
        return F.linear(gathered, w_gate_up)

    def plain_rs(a):
        dist.reduce_scatter_tensor(out, F.linear(a, w_down), group=group)
        return out

    ways = {"PyTorch (F.linear + NCCL)": (plain_ag, plain_rs)}
    for path in ("auto", "fused", "decomposed"):
        ways[f"tilelink ({path})"] = (lambda p=path: tilelink.ag_gemm(x, w_gate_up, world=tl, path=p),
                                      lambda a, p=path: tilelink.gemm_rs(a, w_down, world=tl, path=p))
    try:
        from torch.distributed import _symmetric_memory  # noqa: F401  (defines torch.ops.symm_mem)

        def async_tp_ag():
            _, (h,) = torch.ops.symm_mem.fused_all_gather_matmul(x, [w_gate_up.t()], 0, group.group_name)
            return h

        def async_tp_rs(a):
            return torch.ops.symm_mem.fused_matmul_reduce_scatter(a, w_down.t(), "sum", 0, group.group_name)

        ways["PyTorch async-TP"] = (async_tp_ag, async_tp_rs)
    except Exception as e:  # an older PyTorch, or symmetric memory unavailable: say so, go on
        if rank == 0:
            print(f"# async-TP unavailable: {type(e).__name__}: {e}")

    def block(ag, rs):
        return rs(swiglu(ag()))

    reference = block(*ways["PyTorch (F.linear + NCCL)"]).float().clone()
    for name, (ag, rs) in ways.items():
        got = block(ag, rs).float()
        worst = torch.tensor([((got - reference).norm() / reference.norm()).item()], device="cuda")
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        if worst.item() > 2e-2:
            raise SystemExit(f"{name}: relative error {worst.item():.2e} against the plain PyTorch block")

    a_in = swiglu(plain_ag()).contiguous()
    def timed(fn):
        return time_collective(fn, args.iters, warmup=5)

    times = {name: (timed(lambda: block(ag, rs)), timed(ag), timed(lambda: rs(a_in))) for name, (ag, rs) in ways.items()}
    if rank == 0:
        base = times["PyTorch (F.linear + NCCL)"]
        print(f"# TP MLP, {world} ranks on {torch.cuda.get_device_name()}, torch {torch.__version__}: "
              f"tokens {args.tokens}, hidden {args.hidden}, ffn {args.ffn} (per rank: x [{t_local}, {args.hidden}], "
              f"w_gate_up [{2 * f_local}, {args.hidden}], w_down [{args.hidden}, {f_local}]), bf16, results agree")
        print(f"{'':<28}{'block ms':>10}{'x':>7}{'AG-GEMM ms':>12}{'x':>7}{'GEMM-RS ms':>12}{'x':>7}")
        for name, t in times.items():
            cells = "".join(f"{v:>{w}.3f}{b / v:>6.2f}x" for v, b, w in zip(t, base, (10, 12, 12)))
            print(f"{name:<28}{cells}")
        print("# x: speed-up over PyTorch (F.linear + NCCL); median of", args.iters, "calls, slowest rank")
    tl.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
