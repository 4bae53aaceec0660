"""scripts/fit_gemm_times.py and tilelink-gemm-model: the time-model fit recovers known constants.

Times are made up from chosen constants (with 0.2% noise, fresh each run) over the model's own terms,
so a fit that does not recover them, or a tool whose terms do not match what the fit assumes, fails.
"""
import csv
import importlib.util
import io
import math
import os
import random
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("fit_gemm_times", ROOT / "scripts" / "fit_gemm_times.py")
fgt = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fgt  # dataclasses look their module up
spec.loader.exec_module(fgt)

BENCH_HEADER = "mode,group,M,N,K,config,raster,swizzle,ms,tflops,cublas_ms,cublas_tflops,ratio,plan".split(",")
# tilelink-gemm-model's columns after the bench's.
TERMS_HEADER = BENCH_HEADER + ["model", "work", "waves"] + list(fgt.SHARED_TERMS) + list(fgt.SHARED) + [
    "launch_us", "k_step_us", "wave_us", "predicted_us"]
SEED = random.SystemRandom().getrandbits(32)


def rng():
    print(f"seed {SEED:#x}")
    return random.Random(SEED)


def test_fit_recovers_per_config_and_shared_constants(tmp_path):
    r = rng()
    truth = {"cfg_a": (3.0, 0.40), "cfg_b": (4.5, 0.25), "cfg_c": (2.2, 0.80)}
    wave_cost = {"cfg_c": 2.0}  # one config pays a cost per wave (the many-rows model's term)
    shared = (0.0, 5.0, 0.8, 12.0)
    path = tmp_path / "terms.csv"
    cols = TERMS_HEADER
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for n in range(120):
            shape = (r.randint(64, 4095), 8 * r.randint(32, 4096), 8 * r.randint(32, 4096))
            cublas_ms = r.uniform(0.01, 0.5)  # one cuBLASLt time per shape, as the bench measures it
            for c, (launch, step) in truth.items():
                waves = r.uniform(1, 20)
                work = waves * math.exp(r.uniform(math.log(5), math.log(200)))  # K loops span decades
                split = r.random() < 0.3
                terms = (0.0, 1.0 if split else 0.0, r.uniform(1, 40) if split else 0.0, 0.0)
                t = launch + step * work + wave_cost.get(c, 0.0) * waves + sum(a * b for a, b in zip(shared, terms))
                # 0.2% noise: at 0.5%, cfg_c's launch (beside long K loops and a per-wave cost) came
                # out 8-15% off in ~1.5% of runs.
                t *= math.exp(r.gauss(0, 0.002))
                row = {"mode": "alone", "group": "random", "M": shape[0], "N": shape[1], "K": shape[2], "config": c,
                       "raster": "along_n", "swizzle": 1, "ms": t / 1000, "tflops": 1, "cublas_ms": cublas_ms,
                       "cublas_tflops": 1, "ratio": cublas_ms * 1000 / t, "plan": c + "/along_n/sw1",
                       "model": "mid_rows", "work": work, "waves": waves, "launch_us": "", "k_step_us": "",
                       "wave_us": "", "predicted_us": ""}
                row.update(zip(fgt.SHARED_TERMS, terms))
                row.update(zip(fgt.SHARED, (0.0, 1.0, 1.0, 1.0)))  # held values, deliberately wrong
                w.writerow([row[k] for k in cols])

    rows, _ = fgt.read_rows([str(path)], None, {"alone"})
    held = fgt.fit(rows, sorted(truth), fit_shared=False, min_rows=4)
    assert held.shared == (0.0, 1.0, 1.0, 1.0)
    assert all(held.per_config[c][2] == 0.0 for c in truth)  # wave_us held at the rows' (none)
    free = fgt.fit(rows, sorted(truth), fit_shared=True, min_rows=4, wave_term=True)
    for c, (launch, step) in truth.items():
        assert free.per_config[c][0] == pytest.approx(launch, rel=0.08), c
        assert free.per_config[c][1] == pytest.approx(step, rel=0.02), c
        assert free.per_config[c][2] == pytest.approx(wave_cost.get(c, 0.0), abs=0.05), c
    assert free.shared[1] == pytest.approx(shared[1], rel=0.15)  # pass_us
    assert free.shared[2] == pytest.approx(shared[2], rel=0.05)  # partial_weight
    assert free.shared[3] == 1.0  # no stream-K row in the data: held
    # The fitted times pick the truly fastest row almost everywhere.
    picked, best = fgt.judge(free, fgt.by_shape(rows), set(truth))
    assert len(picked) == 120
    assert fgt.geomean(picked) > 0.99 * fgt.geomean(best)

    out = io.StringIO()
    with redirect_stdout(out):
        assert fgt.main([str(path), "--modes", "alone", "--fit-shared", "--wave-term", "--folds", "2", "--seed", "7"]) == 0
    text = out.getvalue()
    assert "out of sample (2 halvings, seed 0x7" in text
    for c in truth:
        assert f"{{GemmConfig::{c}, " in text


def run_tool(tool, text, *args):
    done = subprocess.run([tool, *args], input=text, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def tool():
    path = os.environ.get("TILELINK_GEMM_MODEL")
    if not path:
        pytest.fail("TILELINK_GEMM_MODEL is not set (ctest sets it to the built tilelink-gemm-model)")
    return path


def bench_csv(rows):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(BENCH_HEADER)
    w.writerows(rows)
    return out.getvalue()


def test_tool_terms_fit_back_to_the_times_they_made(tool, tmp_path):
    """Times built from the tool's terms and chosen constants are fitted back to those constants."""
    r = rng()
    truth = {"pp_128x128_c2x1": (3.1, 0.52), "cpba_128x192_c1x1": (4.0, 0.66)}
    plans = {"pp_128x128_c2x1": ["/along_n/sw1", "/along_n/sw1/reduce4"], "cpba_128x192_c1x1": ["/along_m/sw1"]}
    dummy = []
    for _ in range(60):
        m, n, k = r.randint(64, 4095), 8 * r.randint(16, 1024), 8 * r.randint(32, 512)
        for c, suffixes in plans.items():
            for s in suffixes:
                dummy.append(["alone", "random", m, n, k, c, "along_n", 1, 1.0, 1, 1.0, 1, 1.0, c + s])
    terms = list(csv.DictReader(io.StringIO(run_tool(tool, bench_csv(dummy)))))
    assert len(terms) == len(dummy) and all(t["model"] == "mid_rows" for t in terms)
    assert all(float(t["work"]) > 0 for t in terms)
    assert {t["passes"] for t in terms} == {"0", "1"}  # whole and split rows

    timed, cublas_ms = [], {}
    for row, t in zip(dummy, terms):
        launch, step = truth[t["config"]]
        us = launch + step * float(t["work"]) + sum(
            float(t[w]) * float(t[x]) for w, x in zip(fgt.SHARED, fgt.SHARED_TERMS))
        us *= math.exp(r.gauss(0, 0.005))
        cms = cublas_ms.setdefault(tuple(row[2:5]), r.uniform(0.01, 0.5))
        timed.append(row[:8] + [us / 1000, 1, cms, 1, 1.0, row[13]])
    path = tmp_path / "terms.csv"
    path.write_text(run_tool(tool, bench_csv(timed), "--sms", "132"))
    rows, _ = fgt.read_rows([str(path)], "mid_rows", {"alone"})
    got = fgt.fit(rows, sorted(truth), fit_shared=False, min_rows=4)
    for c, (launch, step) in truth.items():
        assert got.per_config[c][0] == pytest.approx(launch, rel=0.15), c
        assert got.per_config[c][1] == pytest.approx(step, rel=0.03), c
    # The library's constants ride along for the configs it has.
    lib = fgt.library_fit(rows)
    assert set(lib.per_config) == set(truth)


def test_tool_refuses_what_it_cannot_read(tool):
    bad = subprocess.run([tool], input="M,N,K\n1,2,3\n", capture_output=True, text=True)
    assert bad.returncode == 2 and "no column 'plan'" in bad.stderr
    row = ["alone", "random", 100, 1024, 1024, "x", "along_n", 1, 1.0, 1, 1.0, 1, 1.0, "no_such_config/along_n/sw1"]
    bad = subprocess.run([tool], input=bench_csv([row]), capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown config" in bad.stderr
    bad = subprocess.run([tool, "--model", "all_rows"], input=bench_csv([]), capture_output=True, text=True)
    assert bad.returncode == 2 and "--model must be" in bad.stderr


def test_tool_applies_the_rules_model_by_shape(tool):
    """Under the rule's choice each row gets the model of its shape; a named model applies to every row."""
    rows = [["alone", "random", m, n, 1024, "x", "along_n", 1, 1.0, 1, 1.0, 1, 1.0, "coop_128x256_c2x1/along_n/sw1"]
            for m, n in ((63, 1024), (64, 1024), (4095, 8192), (4096, 1024), (16000, 2048), (5000, 29000))]
    by_rule = list(csv.DictReader(io.StringIO(run_tool(tool, bench_csv(rows)))))
    assert [t["model"] for t in by_rule] == ["few_rows", "mid_rows", "mid_rows", "many_rows", "many_rows", "many_rows"]
    # The waves the work counts K steps of; a per-wave cost in the many-rows model alone.
    assert all(float(t["work"]) == pytest.approx(float(t["waves"]) * 16) for t in by_rule)
    assert [float(t["wave_us"]) > 0 for t in by_rule[1:]] == [False, False, True, True, True]
    named = list(csv.DictReader(io.StringIO(run_tool(tool, bench_csv(rows), "--model", "mid_rows"))))
    assert [t["model"] for t in named] == ["mid_rows"] * 6
    # mid_rows and many_rows share their terms; only the constants differ.
    many = list(csv.DictReader(io.StringIO(run_tool(tool, bench_csv(rows), "--model", "many_rows"))))
    assert [t["work"] for t in many] == [t["work"] for t in named]


def test_the_rules_measured_pick_is_its_heuristic_rows_plan():
    """The rule's pick is judged by the measured row of its plan; a plan not measured is left out."""
    def mk(shape, plan, ratio):
        return fgt.Row(shape, plan.split("/")[0], plan, "many_rows", 10.0, ratio, 1.0, 1.0, (0, 0, 0, 0),
                       (0, 0, 0, 0), None, None, 0.0)
    a, b = (5000, 512, 4096), (6000, 512, 4096)
    shapes = {a: [mk(a, "x/along_n/sw1", 0.8), mk(a, "y/along_m/sw1", 1.1)], b: [mk(b, "x/along_n/sw1", 0.9)]}
    assert fgt.judge_rule(shapes, {a: "y/along_m/sw1"}) == [1.1]
    assert fgt.judge_rule(shapes, {b: "z/along_n/sw1"}) == []


def write_terms(path, rows):
    """A tilelink-gemm-model CSV of (mode, model, shape, config, plan suffix, work, us, cublas_us) rows,
    shared constants and terms zero, the library's constants absent."""
    cols = TERMS_HEADER
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for mode, model, (m, n, k), config, suffix, work, us, cublas_us in rows:
            row = {"mode": mode, "group": "random", "M": m, "N": n, "K": k, "config": config, "raster": "along_n",
                   "swizzle": 1, "ms": us / 1000, "tflops": 1, "cublas_ms": cublas_us / 1000, "cublas_tflops": 1,
                   "ratio": cublas_us / us, "plan": config + "/along_n/sw1" + suffix, "model": model, "work": work,
                   "waves": 1.0, "launch_us": "", "k_step_us": "", "wave_us": "", "predicted_us": ""}
            row.update(zip(fgt.SHARED_TERMS, (0.0, 0.0, 0.0, 0.0)))
            row.update(zip(fgt.SHARED, (0.0, 0.0, 0.0, 0.0)))
            w.writerow([row[c] for c in cols])


def test_rows_the_model_does_not_choose_among_are_left_out(tmp_path):
    """Below 64 rows the rule splits K only with a separate sum: chained slices and stream-K rows
    (which the few-rows model times as whole K) are not read; division rows are, by default."""
    shape = (8, 4096, 4096)
    path = tmp_path / "few.csv"
    write_terms(path, [("alone", "few_rows", shape, "cfg", "", 10.0, 20.0, 20.0),
                       ("division", "few_rows", shape, "cfg", "/reduce4", 3.0, 9.0, 20.0),
                       ("division", "few_rows", shape, "cfg", "/split4", 10.0, 8.0, 20.0),
                       ("division", "few_rows", shape, "cfg", "/streamk", 10.0, 7.0, 20.0),
                       ("division", "mid_rows", (100, 4096, 4096), "cfg", "/streamk", 10.0, 7.0, 20.0)])
    rows, _ = fgt.read_rows([str(path)], "few_rows", {"alone", "division"})
    assert sorted(r.plan.split("/")[-1] for r in rows) == ["reduce4", "sw1"]
    mid, _ = fgt.read_rows([str(path)], "mid_rows", {"alone", "division"})
    assert [r.plan.split("/")[-1] for r in mid] == ["streamk"]  # from 64 rows stream-K is a division
    with pytest.raises(SystemExit, match="no rows are called divisions"):
        fgt.read_rows([str(path)], None, {"alone", "divisions"})
    out = io.StringIO()
    with redirect_stdout(out):
        assert fgt.main([str(path), "--model", "few_rows", "--folds", "0", "--min-rows", "2"]) == 0
    assert "2 rows, 1 shapes, model few_rows" in out.getvalue()


def test_a_fit_is_judged_on_other_files_shapes(tmp_path):
    """--judge-on: fitted on every shape of the given files, judged on the other files' shapes."""
    r = rng()
    truth = {"fast_short": (2.0, 0.5), "fast_long": (6.0, 0.25)}  # the first wins below 16 K steps

    def rows(count):
        out = []
        for _ in range(count):
            shape = (r.randint(64, 4095), 8 * r.randint(32, 4096), 8 * r.randint(32, 4096))
            work = math.exp(r.uniform(math.log(2), math.log(200)))
            for c, (launch, step) in truth.items():
                out.append(("alone", "mid_rows", shape, c, "", work, launch + step * work, 10.0))
        return out
    fit_on, judge_on = tmp_path / "a.csv", tmp_path / "b.csv"
    write_terms(fit_on, rows(40))
    write_terms(judge_on, rows(30))
    out = io.StringIO()
    with redirect_stdout(out):
        assert fgt.main([str(fit_on), "--folds", "0", "--judge-on", str(judge_on)]) == 0
    text = out.getvalue()
    assert "judged on 30 other shapes" in text
    judged = text.split("judged on", 1)[1]
    fitted, best = (float(line.split("geomean ")[1].split()[0]) for line in judged.splitlines()
                    if line.strip().startswith(("fitted constants", "best measured")))
    assert fitted == pytest.approx(best, rel=1e-3)  # exact times: the fit picks the fastest row
    assert "library's constants    no shape with a prediction" in judged
