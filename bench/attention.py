#!/usr/bin/env python3
"""Attention forward on one GPU: tilelink.attention against PyTorch's scaled_dot_product_attention
with its FlashAttention backend and its cuDNN backend, on the same inputs, samples interleaved,
outputs checked against each other:

    PYTHONPATH=python TILELINK_LIBRARY=build/lib/libtilelink_c.so python bench/attention.py \\
        [--iters 20] [--random 24] [--seed S]

Tensors are SDPA's [batch, heads, len, head_dim] (contiguous); tilelink reads the same memory
through transposed views (no copy). Shapes: the sequence-parallel workload's (32 q heads, 8 kv
heads, head_dim 128, batch 1-4, 8k-128k tokens) causal and full, then --random N shapes drawn
with a fresh seed (printed): batch 1-4, lengths log-uniform 64-16384 (odd ones included), kv
heads 1-8 x group 1-8, head_dim 64 or 128, bf16 or fp16, either mask. A backend that refuses a
shape (or grouped-query heads) is run on K/V expanded to every query head beforehand, marked *.
Printed: ms (median), TFLOP/s (causal counts the visible half), and tilelink's speed-up over
each backend and over the faster of the two.
"""
import argparse
import math
import random
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import tilelink

_CYCLES_PER_MS = 2_000_000
TABLE = [(b, s, causal) for causal in (True, False) for (b, s) in ((1, 8192), (4, 8192), (1, 32768), (2, 32768),
                                                                  (1, 131072))]


def time_interleaved(fns: dict, iters: int) -> dict:
    """Median ms of each candidate, samples interleaved in rotating order, each behind a GPU spin
    that hides the launch."""
    names = list(fns)
    for _ in range(2):
        for n in names:
            fns[n]()
    torch.cuda.synchronize()
    samples = {n: [] for n in names}
    for i in range(iters):
        for j in range(len(names)):
            n = names[(i + j) % len(names)]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(_CYCLES_PER_MS // 2)
            start.record()
            fns[n]()
            end.record()
            end.synchronize()
            samples[n].append(start.elapsed_time(end))
    return {n: statistics.median(v) for n, v in samples.items()}


def visible_pairs(sq, skv, causal):
    if not causal:
        return sq * skv
    # SDPA's causal is top-left aligned: query i sees keys 0..i.
    return sum(min(i + 1, skv) for i in range(sq)) if sq < 4096 else (min(sq, skv) * (min(sq, skv) + 1) // 2 +
                                                                      max(0, sq - skv) * skv)


def sdpa_call(backend, q, k, v, causal):
    """The SDPA call on a backend, with grouped-query heads if it takes them, else on K/V
    expanded beforehand (marked)."""
    g = q.shape[1] // k.shape[1]
    def run(kk, vv, gqa):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal, enable_gqa=gqa)
    try:
        run(k, v, g > 1)
        torch.cuda.synchronize()
        return (lambda: run(k, v, g > 1)), ""
    except RuntimeError:
        ke, ve = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        try:
            run(ke, ve, False)
            torch.cuda.synchronize()
            return (lambda: run(ke, ve, False)), "*"
        except RuntimeError:
            return None, "-"


def measure(b, sq, skv, hq, hkv, d, dtype, causal, iters):
    q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype)
    k = torch.randn(b, hkv, skv, d, device="cuda", dtype=dtype)
    v = torch.randn(b, hkv, skv, d, device="cuda", dtype=dtype)
    tl = lambda: tilelink.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal)  # noqa
    fns, marks = {"tilelink": tl}, {}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        fn, mark = sdpa_call(backend, q, k, v, causal)
        marks[name] = mark
        if fn is not None:
            fns[name] = fn
    ours = tl()[0].transpose(1, 2).float()
    diffs = {n: (fns[n]().float() - ours).abs().max().item() for n in fns if n != "tilelink"}
    ms = time_interleaved(fns, iters)
    flops = 4.0 * b * hq * d * visible_pairs(sq, skv, causal)
    row = {"ms": ms, "tflops": {n: flops / t / 1e9 for n, t in ms.items()}, "marks": marks, "diff": diffs}
    del q, k, v
    return row


def fmt(row):
    ms, tf = row["ms"], row["tflops"]
    out = [f"{ms['tilelink']:8.3f} {tf['tilelink']:5.0f}"]
    for n in ("flash", "cudnn"):
        out.append(f"{ms[n]:8.3f}{row['marks'][n]:1s} {tf[n]:5.0f}" if n in ms else f"{'-':>9s} {'-':>5s}")
    base = {n: ms[n] / ms["tilelink"] for n in ("flash", "cudnn") if n in ms}
    out += [f"{base[n]:6.2f}x" if n in base else f"{'-':>7s}" for n in ("flash", "cudnn")]
    out.append(f"{min(base.values()):6.2f}x" if base else "      -")
    out.append(f"{max(row['diff'].values()):8.1e}" if row["diff"] else "       -")
    return " ".join(out)


HEADER = (f"{'tl ms':>8s} {'TF/s':>5s} {'flash ms':>9s} {'TF/s':>5s} {'cudnn ms':>9s} {'TF/s':>5s} "
          f"{'/flash':>7s} {'/cudnn':>7s} {'/best':>7s} {'maxdiff':>8s}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--random", type=int, default=24)
    p.add_argument("--seed", type=int, default=None)
    args = p.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; ms median of {args.iters}; seed {seed}")
    ratios = []
    print(f"# table: bf16, 32 q heads / 8 kv heads, head_dim 128\n{'batch':>5s} {'seq':>6s} {'mask':>6s} {HEADER}")
    for b, s, causal in TABLE:
        row = measure(b, s, s, 32, 8, 128, torch.bfloat16, causal, args.iters)
        print(f"{b:5d} {s:6d} {'causal' if causal else 'full':>6s} {fmt(row)}", flush=True)
        ratios.append(min(row["ms"][n] for n in ("flash", "cudnn") if n in row["ms"]) / row["ms"]["tilelink"])
    if args.random:
        print(f"# random shapes (seed {seed})\n{'b':>2s} {'q_len':>6s} {'kv_len':>6s} {'hq/hkv':>7s} {'d':>4s} "
              f"{'dtype':>5s} {'mask':>6s} {HEADER}")
    for _ in range(args.random):
        b = rng.randint(1, 4)
        sq = int(math.exp(rng.uniform(math.log(64), math.log(16384))))
        skv = sq if rng.random() < 0.5 else int(math.exp(rng.uniform(math.log(64), math.log(16384))))
        hkv = rng.randint(1, 8)
        hq = hkv * rng.choice((1, 2, 4, 8))
        d = rng.choice((64, 128))
        dtype = rng.choice((torch.bfloat16, torch.float16))
        causal = rng.random() < 0.5
        row = measure(b, sq, skv, hq, hkv, d, dtype, causal, args.iters)
        print(f"{b:2d} {sq:6d} {skv:6d} {f'{hq}/{hkv}':>7s} {d:4d} {str(dtype)[6:]:>5s} "
              f"{'causal' if causal else 'full':>6s} {fmt(row)}", flush=True)
        ratios.append(min(row["ms"][n] for n in ("flash", "cudnn") if n in row["ms"]) / row["ms"]["tilelink"])
    g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"# vs the faster SDPA backend: geomean {g:.3f}x, min {min(ratios):.3f}x, "
          f"median {statistics.median(ratios):.3f}x over {len(ratios)} shapes")


if __name__ == "__main__":
    main()
