#!/usr/bin/env python3
"""Summarize `tilelink-bench gemm --csv` files: the engine against cuBLASLt by band of rows.

    # on the GPU
    tilelink-bench gemm --sweep-random 100 --seed S [--alone | --tune] --csv bench.csv
    # here
    scripts/gemm_report.py bench.csv [more.csv ...] [--config NAME [--margin 0.02]] [--versus A B] [--list]

Every ratio is cuBLASLt's time over the engine's (the CSV's `ratio`, > 1: the engine is faster),
summarized per band of M as the project reports them (1-63, 64-511, 512-4095, 4096+ rows): the
number of shapes, the geometric mean, how many ran below 0.90x and the worst. Printed for each
kind of row the files hold:
  rule      the plan the library's rule chose (`heuristic` rows)
  tuned     the plan tuning kept (`tuned` rows, `--tune`), timed in the same samples as the rule's
  best-of   the fastest config of each shape, each as the rule runs it alone (`alone` rows)
With --config NAME (and `alone` rows): the best-of without that config, and the shapes where it
beats every other config by more than --margin (what a new config is judged by before it joins a
time model). --versus A B (`alone` rows): A's time over B's on each shape both ran, by band (the
geometric mean, the least and the most): how two configs compare, e.g. a tile in a 2x2 cluster
against its 2-CTA twin on one GPU model and another. --list prints the rule's shapes below 0.90x
with its plan and cuBLASLt's algorithm.
A shape measured in several files counts once per file (different seeds give different shapes).
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import defaultdict

BANDS = ((1, 63), (64, 511), (512, 4095), (4096, None))
FLOOR = 0.90  # the bar: no shape below this


def band_name(lo: int, hi: int | None) -> str:
    return f"{lo}-{hi}" if hi is not None else f"{lo}+"


def band_of(m: int) -> str:
    for lo, hi in BANDS:
        if m >= lo and (hi is None or m <= hi):
            return band_name(lo, hi)
    raise ValueError(f"M = {m} is below every band")


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def read(paths: list[str]) -> dict[str, dict]:
    """Rows by kind: shape key -> ratio (rule, tuned), or -> {config: best ratio} (alone).
    A shape key is (file index, M, N, K)."""
    out: dict[str, dict] = {"rule": {}, "tuned": {}, "alone": defaultdict(dict), "info": {}}
    for f, path in enumerate(paths):
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                key = (f, int(row["M"]), int(row["N"]), int(row["K"]))
                ratio = float(row["ratio"])
                if not ratio > 0.0:
                    raise ValueError(f"{path}: ratio {row['ratio']!r} for {key[1:]}")
                mode = row["mode"]
                if mode == "heuristic":
                    out["rule"][key] = ratio
                    out["info"][key] = (row.get("plan", ""), row.get("cublas_algo", ""))
                elif mode == "tuned":
                    out["tuned"][key] = ratio
                elif mode == "alone":
                    # a config may appear at several divisions (lib configs, plans): keep its best
                    best = out["alone"][key]
                    best[row["config"]] = max(ratio, best.get(row["config"], 0.0))
    return out


def banded(values: dict[tuple, float]) -> list[tuple[str, list[float]]]:
    """The values by band of M (the key's second field), bands without values left out, then
    `all` where there are any."""
    by_band: dict[str, list[float]] = defaultdict(list)
    for key, v in values.items():
        by_band[band_of(key[1])].append(v)
    rows = [(band_name(lo, hi), by_band[band_name(lo, hi)]) for lo, hi in BANDS if by_band.get(band_name(lo, hi))]
    return rows + [("all", list(values.values()))] if values else rows


def summary(ratios: dict[tuple, float]) -> list[tuple[str, int, float, int, float]]:
    """(band, shapes, geomean, below FLOOR, worst) per band that has shapes, then `all`."""
    return [(band, len(v), geomean(v), sum(x < FLOOR for x in v), min(v)) for band, v in banded(ratios)]


def config_wins(alone: dict[tuple, dict[str, float]], config: str, margin: float):
    """Shapes where `config` beats the best other config by more than `margin`, and the best-of
    every shape without it: ([(key, its ratio, best other, that config)], {key: best other})."""
    wins, without = [], {}
    for key, ratios in alone.items():
        others = {c: r for c, r in ratios.items() if c != config}
        if not others:
            continue
        best = max(others, key=others.get)
        without[key] = others[best]
        mine = ratios.get(config)
        if mine is not None and mine > others[best] * (1.0 + margin):
            wins.append((key, mine, others[best], best))
    return sorted(wins, key=lambda w: w[0][1:]), without


def versus(alone: dict[tuple, dict[str, float]], a: str, b: str) -> dict[tuple, float]:
    """A's time over B's on each shape where both ran alone (the ratios are cuBLASLt's time over
    the config's, so the time ratio is B's ratio over A's)."""
    return {key: r[b] / r[a] for key, r in alone.items() if a in r and b in r}


def print_versus(a: str, b: str, times: dict[tuple, float]) -> None:
    print(f"{a} time / {b} time (< 1: {a} is faster)")
    print(f"  {'M':<10} {'shapes':>6} {'geomean':>8} {'least':>6} {'most':>6}")
    for band, v in banded(times):
        print(f"  {band:<10} {len(v):>6} {geomean(v):>8.3f} {min(v):>6.3f} {max(v):>6.3f}")


def print_table(title: str, ratios: dict[tuple, float]) -> None:
    if not ratios:
        return
    print(f"{title}")
    print(f"  {'M':<10} {'shapes':>6} {'geomean':>8} {'<0.90':>6} {'worst':>6}")
    for band, n, g, below, worst in summary(ratios):
        print(f"  {band:<10} {n:>6} {g:>8.3f} {below:>6} {worst:>6.3f}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="tilelink-bench gemm --csv files")
    ap.add_argument("--config", help="a config to judge against the others (needs --alone rows)")
    ap.add_argument("--margin", type=float, default=0.02, help="how much faster a win must be (default 0.02)")
    ap.add_argument("--versus", nargs=2, metavar=("A", "B"), help="config A's time over config B's (--alone rows)")
    ap.add_argument("--list", action="store_true", help="list the rule's shapes below 0.90x")
    args = ap.parse_args(argv)
    data = read(args.csv)
    if not (data["rule"] or data["tuned"] or data["alone"]):
        print("gemm_report: no heuristic, tuned or alone rows in these files", file=sys.stderr)
        return 1
    print_table("rule (the library's pick), cuBLASLt time / engine time", data["rule"])
    print_table("tuned (same samples as the rule's)", data["tuned"])
    best_of = {k: max(v.values()) for k, v in data["alone"].items() if v}
    print_table("best-of (each config alone, the fastest per shape)", best_of)
    if args.config:
        if not data["alone"]:
            print("gemm_report: --config needs `alone` rows (tilelink-bench gemm --alone)", file=sys.stderr)
            return 1
        wins, without = config_wins(data["alone"], args.config, args.margin)
        print_table(f"best-of without {args.config}", without)
        print(f"{args.config} beats every other config by > {args.margin:.0%} on {len(wins)} of "
              f"{len(without)} shapes")
        for key, mine, other, which in wins:
            print(f"  {key[1]} x {key[2]} x {key[3]}: {mine:.3f}x against {other:.3f}x ({which})")
    if args.versus:
        times = versus(data["alone"], *args.versus)
        if not times:
            print(f"gemm_report: no shape where both {args.versus[0]} and {args.versus[1]} ran alone", file=sys.stderr)
            return 1
        print_versus(*args.versus, times)
    if args.list:
        low = sorted((k for k, r in data["rule"].items() if r < FLOOR), key=lambda k: data["rule"][k])
        print(f"rule below {FLOOR:.2f}x: {len(low)} shapes")
        for k in low:
            plan, algo = data["info"][k]
            best = f", best-of {best_of[k]:.3f}x" if k in best_of else ""
            print(f"  {k[1]} x {k[2]} x {k[3]}: {data['rule'][k]:.3f}x {plan}{best} | cuBLASLt {algo}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
