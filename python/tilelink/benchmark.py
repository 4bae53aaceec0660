"""Timing of collective GPU work across the ranks of a torch.distributed group, the way the
project's benchmarks and examples measure (and a user can, to compare with them):

    ms = tilelink.benchmark.time_collective(lambda: tilelink.ag_gemm(x, w), iters=30)

Each sample: all ranks synchronise (barrier), each queues a ~0.5 ms GPU spin so that Python's
launch latency is hidden behind GPU work, then times `fn` with CUDA events; the sample is the
slowest rank's time. Returns the median in ms, the same on every rank. Collective: every rank
of `group` calls it with the same iters.
"""

from __future__ import annotations

import statistics

import torch
import torch.distributed as dist


def time_collective(fn, iters: int = 20, warmup: int = 3, group=None) -> float:
    return time_collective_interleaved({"fn": fn}, iters, warmup, group)["fn"]


def time_collective_interleaved(fns: dict, iters: int = 20, warmup: int = 3, group=None) -> dict:
    """Like time_collective for several candidates at once, their samples interleaved (each
    round runs every candidate once, in a rotating order), so that drift in clocks or in the
    machine's load falls on all of them alike. Returns {name: median ms}."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    torch.cuda.synchronize()
    samples = {name: [] for name in names}
    for i in range(iters):
        for j in range(len(names)):
            name = names[(i + j) % len(names)]
            dist.barrier(group=group)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(1_000_000)
            start.record()
            fns[name]()
            end.record()
            end.synchronize()
            t = torch.tensor([start.elapsed_time(end)], device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
            samples[name].append(t.item())
    return {name: statistics.median(v) for name, v in samples.items()}
