#!/usr/bin/env python3
"""Fit the plain GEMM's time-model constants to measured times, and check them out of sample.

    # on the GPU: every config as the rule runs it alone (or every division), one CSV row each
    tilelink-bench gemm --sweep-random 60 --seed S --alone --csv times.csv
    # here: the model's terms for each row (host only)
    build/bin/tilelink-gemm-model < times.csv > terms.csv
    scripts/fit_gemm_times.py terms.csv [more.csv ...] [--configs a,b] [--fit-shared] [--folds 5 --seed S]
                              [--judge-on other.csv ...]

The model (src/gemm/heuristic/time_models.hpp) is linear in its constants:
    t = launch_us + k_step_us x work + wave_us x waves + stream_weight x streamed_us
        + pass_us x passes + partial_weight x partial_us + fixup_us x fixups
so they are fitted by least squares on relative error (each row weighted by 1 / measured time).
By default only the per-config (launch_us, k_step_us) are fitted, wave_us and the shared constants
held at the values the rows carry; --wave-term fits wave_us per config too, --fit-shared the shared
constants, jointly with every config. Configs not fitted keep the library's constants and compete
in the picks, unless --only-fitted (the library then holds constants for the fitted ones alone).

The fit is judged as the rule uses it: on each shape, the config (at the division in the row) with
the least predicted time is picked, and the pick's measured speed against cuBLASLt (the `ratio`
column, cublas_ms / ms) is compared with the best measured row of the shape, with the pick of the
constants the library has now, and with the plan the measuring binary's rule ran (the shape's
`heuristic` row), as measured among the others. Out of sample: the shapes are halved at random
(the seed is printed), fitted on one half and judged on the other, both ways, --folds times; and
with --judge-on, fitted on every shape of the CSVs and judged on the shapes of other files (another
seed's set: whether a fit carries beyond the shapes it saw). Rows of a division the model does not
choose among are left out: below 64 rows the rule runs K whole or split with a separate sum only.

Prints the fitted constants as the C++ table lines of time_models.cpp.
"""
from __future__ import annotations

import argparse
import csv
import math
import random
import sys
from dataclasses import dataclass

import numpy as np

SHARED = ("stream_weight", "pass_us", "partial_weight", "fixup_us")
SHARED_TERMS = ("streamed_us", "passes", "partial_us", "fixups")


@dataclass
class Row:
    shape: tuple  # (M, N, K)
    config: str
    plan: str
    model: str
    time_us: float  # measured
    ratio: float  # cuBLASLt time / this time
    work: float
    waves: float
    terms: tuple  # SHARED_TERMS, in order
    shared: tuple  # the model's shared constants the row was written with
    launch_us: float | None  # the library's constants for the config, if it has them
    k_step_us: float | None
    wave_us: float  # the library's, 0 where it has none


# The kinds of rows `tilelink-bench gemm` writes (its CSV's first column).
BENCH_MODES = ("heuristic", "tuned", "sweep", "sweep-best", "division", "alone", "order")


def model_runs(model: str, plan: str) -> bool:
    """Whether the rule chooses among plans of this division under `model`: below 64 rows it runs
    K whole or split with a separate sum (`/reduceN`), never chained slices or stream-K."""
    return model != "few_rows" or not any(part.startswith(("split", "streamk")) for part in plan.split("/")[3:])


def read_rows(paths: list[str], model: str | None, modes: set) -> tuple[list[Row], dict]:
    """The rows of `modes` whose division the row's model chooses among, and each shape's plan in
    its `heuristic` row (the rule's pick)."""
    if unknown := sorted(modes - set(BENCH_MODES)):
        sys.exit(f"--modes: no rows are called {', '.join(unknown)} (the bench writes {', '.join(BENCH_MODES)})")
    rows, rule_plans = [], {}
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if "work" not in r:
                    sys.exit(f"{path}: no model terms (run it through tilelink-gemm-model first)")
                if model and r["model"] != model:
                    continue
                if r["mode"] == "heuristic":
                    rule_plans[(int(r["M"]), int(r["N"]), int(r["K"]))] = r["plan"]
                if r["mode"] not in modes or not model_runs(r["model"], r["plan"]):
                    continue
                ms = float(r["ms"])
                if not ms > 0:
                    continue
                opt = lambda k: float(r[k]) if r[k] != "" else None
                rows.append(Row(shape=(int(r["M"]), int(r["N"]), int(r["K"])), config=r["config"], plan=r["plan"],
                                model=r["model"], time_us=ms * 1000.0, ratio=float(r["cublas_ms"]) / ms,
                                work=float(r["work"]), waves=float(r["waves"]),
                                terms=tuple(float(r[k]) for k in SHARED_TERMS),
                                shared=tuple(float(r[k]) for k in SHARED), launch_us=opt("launch_us"),
                                k_step_us=opt("k_step_us"), wave_us=opt("wave_us") or 0.0))
    models = {r.model for r in rows}
    if len(models) > 1:
        sys.exit(f"rows of several models ({', '.join(sorted(models))}): choose one with --model")
    return rows, rule_plans


@dataclass
class Fit:
    per_config: dict  # config -> (launch_us, k_step_us, wave_us)
    shared: tuple  # SHARED, in order

    def predict(self, r: Row) -> float | None:
        c = self.per_config.get(r.config)
        if c is None:
            return None
        return c[0] + c[1] * r.work + c[2] * r.waves + sum(w * t for w, t in zip(self.shared, r.terms))


def fit(rows: list[Row], configs: list[str], fit_shared: bool, min_rows: int, wave_term: bool = False) -> Fit:
    """Least squares on relative error; wave_us held at the library's unless wave_term, the shared
    constants at the rows' values unless fit_shared."""
    held = rows[0].shared
    use = [c for c in configs if sum(r.config == c for r in rows) >= min_rows]
    # Shared terms that vary in the data can be fitted; the others stay held.
    free = [i for i in range(len(SHARED)) if fit_shared and any(r.terms[i] != 0 for r in rows)]
    per = 3 if wave_term else 2
    index = {c: per * i for i, c in enumerate(use)}
    held_wave = {r.config: r.wave_us for r in rows}
    sel = [r for r in rows if r.config in index]
    if not sel:
        return Fit({}, held)
    a = np.zeros((len(sel), per * len(use) + len(free)))
    b = np.zeros(len(sel))
    for n, r in enumerate(sel):
        w = 1.0 / r.time_us
        j = index[r.config]
        a[n, j], a[n, j + 1] = w, r.work * w
        if wave_term:
            a[n, j + 2] = r.waves * w
        for k, i in enumerate(free):
            a[n, per * len(use) + k] = r.terms[i] * w
        fixed = sum(held[i] * r.terms[i] for i in range(len(SHARED)) if i not in free)
        if not wave_term:
            fixed += held_wave[r.config] * r.waves
        b[n] = (r.time_us - fixed) * w
    x, *_ = np.linalg.lstsq(a, b, rcond=None)
    shared = list(held)
    for k, i in enumerate(free):
        shared[i] = float(x[per * len(use) + k])
    wave = lambda c: float(x[index[c] + 2]) if wave_term else held_wave[c]  # noqa: E731
    return Fit({c: (float(x[index[c]]), float(x[index[c] + 1]), wave(c)) for c in use}, tuple(shared))


def library_fit(rows: list[Row]) -> Fit:
    per = {r.config: (r.launch_us, r.k_step_us, r.wave_us) for r in rows if r.launch_us is not None}
    return Fit(per, rows[0].shared if rows else (0, 0, 0, 0))


def by_shape(rows: list[Row]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(r.shape, []).append(r)
    return out


def judge(fit: Fit, shapes: dict, configs: set) -> tuple[list[float], list[float]]:
    """Per shape with a prediction for some row of `configs`: (ratio of the pick, best ratio)."""
    picked, best = [], []
    for rs in shapes.values():
        cands = [(fit.predict(r), r) for r in rs if r.config in configs]
        cands = [(p, r) for p, r in cands if p is not None]
        if not cands:
            continue
        picked.append(min(cands, key=lambda pr: pr[0])[1].ratio)
        best.append(max(r.ratio for _, r in cands))
    return picked, best


def judge_rule(shapes: dict, rule_plans: dict) -> list[float]:
    """Per shape whose rule plan was measured among its rows: that row's ratio."""
    out = []
    for shape, rs in shapes.items():
        hit = [r for r in rs if r.plan == rule_plans.get(shape)]
        if hit:
            out.append(hit[0].ratio)
    return out


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summary(name: str, ratios: list[float]) -> str:
    if not ratios:
        return f"{name:<22} no shape with a prediction"
    below = sum(x < 0.90 for x in ratios)
    return f"{name:<22} geomean {geomean(ratios):.3f}  min {min(ratios):.3f}  below 0.90: {below}/{len(ratios)}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", nargs="+", help="rows from tilelink-gemm-model")
    p.add_argument("--model", choices=["few_rows", "mid_rows", "many_rows"], help="only rows of this model")
    p.add_argument("--modes", default="alone,division",
                   help="the bench's row kinds to use (default: alone,division: one row per config and division)")
    p.add_argument("--configs", help="fit these configs only (comma-separated); default: every config in the rows")
    p.add_argument("--fit-shared", action="store_true", help="fit the shared constants too")
    p.add_argument("--wave-term", action="store_true", help="fit each config's wave_us too")
    p.add_argument("--only-fitted", action="store_true",
                   help="configs not fitted do not compete (default: they keep the library's constants)")
    p.add_argument("--min-rows", type=int, default=4, help="a config needs this many rows to be fitted")
    p.add_argument("--folds", type=int, default=5, help="random halvings of the shapes for the out-of-sample check")
    p.add_argument("--seed", type=lambda s: int(s, 0), default=None, help="of the halvings (default: fresh, printed)")
    p.add_argument("--judge-on", nargs="+", default=[], metavar="CSV",
                   help="judge the constants fitted on every shape on these files' shapes too")
    args = p.parse_args(argv)

    rows, rule_plans = read_rows(args.csv, args.model, set(args.modes.split(",")))
    if not rows:
        sys.exit("no rows with measured times")
    configs = sorted({r.config for r in rows})
    if args.configs:
        wanted = args.configs.split(",")
        if unknown := [c for c in wanted if c not in configs]:
            sys.exit(f"no rows for {', '.join(unknown)}")
        configs = wanted
    # Configs not fitted (not asked for, or too few rows) keep the library's constants, if it has
    # them, so they still compete in the picks.
    lib = library_fit(rows)
    keep = {} if args.only_fitted else dict(lib.per_config)

    def full_fit(train: list[Row]) -> Fit:
        f = fit(train, configs, args.fit_shared, args.min_rows, args.wave_term)
        return Fit({**keep, **f.per_config}, f.shared)

    shapes = by_shape(rows)
    print(f"{len(rows)} rows, {len(shapes)} shapes, model {rows[0].model}, fitting {len(configs)} configs"
          f"{' and the shared constants' if args.fit_shared else ''}")

    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(32)
    rng = random.Random(seed)
    out_of_sample = {"fitted": [], "library": [], "rule": [], "best": []}
    keys = sorted(shapes)
    for _ in range(args.folds):
        rng.shuffle(keys)
        halves = keys[: len(keys) // 2], keys[len(keys) // 2:]
        for train, test in (halves, halves[::-1]):
            f = full_fit([r for k in train for r in shapes[k]])
            test_shapes = {k: shapes[k] for k in test}
            competing = set(f.per_config)
            picked, best = judge(f, test_shapes, competing)
            lib_picked, _ = judge(lib, test_shapes, competing)
            out_of_sample["fitted"] += picked
            out_of_sample["library"] += lib_picked
            out_of_sample["rule"] += judge_rule(test_shapes, rule_plans)
            out_of_sample["best"] += best
    if args.folds > 0 and out_of_sample["fitted"]:
        print(f"\nout of sample ({args.folds} halvings, seed {seed:#x}; shapes counted once per halving):")
        print("  " + summary("fitted constants", out_of_sample["fitted"]))
        print("  " + summary("library's constants", out_of_sample["library"]))
        print("  " + summary("measured rule's pick", out_of_sample["rule"]))
        print("  " + summary("best measured", out_of_sample["best"]))

    final = full_fit(rows)
    picked, best = judge(final, shapes, set(final.per_config))
    print("\nin sample (fitted on every shape):")
    print("  " + summary("fitted constants", picked))
    print("  " + summary("measured rule's pick", judge_rule(shapes, rule_plans)))
    print("  " + summary("best measured", best))

    if args.judge_on:
        others, other_plans = read_rows(args.judge_on, args.model, set(args.modes.split(",")))
        if others and others[0].model != rows[0].model:
            sys.exit(f"--judge-on: rows of model {others[0].model}, fitted on {rows[0].model}")
        other_shapes = {k: v for k, v in by_shape(others).items() if k not in shapes}
        competing = set(final.per_config)
        picked, best = judge(final, other_shapes, competing)
        lib_picked, _ = judge(library_fit(others), other_shapes, competing)
        print(f"\njudged on {len(other_shapes)} other shapes ({', '.join(args.judge_on)}), "
              "fitted on every shape above:")
        print("  " + summary("fitted constants", picked))
        print("  " + summary("library's constants", lib_picked))
        print("  " + summary("measured rule's pick", judge_rule(other_shapes, other_plans)))
        print("  " + summary("best measured", best))

    print("\nrelative error of the fitted times, per config (median |predicted / measured - 1|):")
    for c in configs:
        errs = [abs(final.predict(r) / r.time_us - 1) for r in rows if r.config == c and c in final.per_config]
        if errs:
            print(f"  {c:<22} {len(errs):4d} rows  {float(np.median(errs)):.3f}")
        else:
            print(f"  {c:<22} fewer than {args.min_rows} rows: not fitted")

    print("\n// the fitted constants, as in src/gemm/heuristic/time_models.cpp")
    for c in configs:
        if c in final.per_config:
            launch, step, wave = final.per_config[c]
            tail = f", {wave:.3g}" if args.wave_term or wave else ""
            print(f"    {{GemmConfig::{c}, {launch:.3g}, {step:.4g}{tail}}},")
    print("// shared: " + ", ".join(f"{n} {v:.4g}" for n, v in zip(SHARED, final.shared)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
