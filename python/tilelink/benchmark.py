"""Timing of collective GPU work across the ranks of a torch.distributed group, the way the
project's benchmarks and examples measure (and a user can, to compare with them):

    ms = tilelink.benchmark.time_collective(lambda: tilelink.ag_gemm(x, w), iters=30)

Each sample: all ranks synchronise (barrier), each queues a GPU spin so that Python's launch
latency is hidden behind GPU work, then times `fn` with CUDA events; the sample is the slowest
rank's time. The spin lasts at least twice the longest time any candidate took to enqueue in the
last warm-up round (0.5 ms at least, the same on every rank): a block of several ops whose
enqueueing outlasted a fixed spin would otherwise be timed partly on the host. Returns the
median in ms, the same on every rank. Collective: every rank of `group` calls it with the same
iters.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist


# SM clock cycles per millisecond, rounded up over Hopper's clocks (H100/H200 boost ~1.98 GHz):
# a spin of N ms in these cycles lasts at least N ms.
_CYCLES_PER_MS = 2_000_000


def time_collective(fn, iters: int = 20, warmup: int = 3, group=None) -> float:
    return time_collective_interleaved({"fn": fn}, iters, warmup, group)["fn"]


def time_collective_interleaved(fns: dict, iters: int = 20, warmup: int = 3, group=None) -> dict:
    """Like time_collective for several candidates at once, their samples interleaved (each
    round runs every candidate once, in a rotating order), so that drift in clocks or in the
    machine's load falls on all of them alike. Returns {name: median ms}."""
    names = list(fns)
    for _ in range(max(warmup, 2)):
        torch.cuda.synchronize()
        enqueue_ms = 0.0  # of the last round: the first ones include first-call setup
        for name in names:
            t0 = time.perf_counter()
            fns[name]()
            enqueue_ms = max(enqueue_ms, (time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    spin = torch.tensor([max(0.5, 2.0 * enqueue_ms)], device="cuda")
    dist.all_reduce(spin, op=dist.ReduceOp.MAX, group=group)
    spin_cycles = int(spin.item() * _CYCLES_PER_MS)
    samples = {name: [] for name in names}
    for i in range(iters):
        for j in range(len(names)):
            name = names[(i + j) % len(names)]
            dist.barrier(group=group)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(spin_cycles)
            start.record()
            fns[name]()
            end.record()
            end.synchronize()
            t = torch.tensor([start.elapsed_time(end)], device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
            samples[name].append(t.item())
    return {name: statistics.median(v) for name, v in samples.items()}
