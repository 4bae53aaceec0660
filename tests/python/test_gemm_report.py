"""scripts/gemm_report.py: the bands, geometric means, counts below 0.90x and a config's wins that it
prints from tilelink-bench's CSV, checked on made-up rows (fresh random ratios each run)."""
import csv
import importlib.util
import io
import math
import random
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gemm_report", ROOT / "scripts" / "gemm_report.py")
report = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = report
spec.loader.exec_module(report)

HEADER = ("mode,group,M,N,K,config,raster,swizzle,ms,tflops,cublas_ms,cublas_tflops,ratio,plan,"
          "cublas_algo").split(",")
SEED = random.SystemRandom().getrandbits(32)


def write_rows(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        for mode, m, n, k, config, ratio in rows:
            ms = 0.1
            w.writerow([mode, "rand", m, n, k, config, "along_n", 1, ms, 1.0, ms * ratio, 1.0, ratio,
                        f"{config}/along_n/sw1", "tile 128x128"])


def test_bands_and_geomeans_match_a_direct_computation(tmp_path):
    print(f"seed {SEED:#x}")
    r = random.Random(SEED)
    rows, rule = [], {}
    for m in [1, 63, 64, 511, 512, 4095, 4096, 16384] + [r.randint(1, 16384) for _ in range(40)]:
        n, k = 8 * r.randint(32, 4096), 8 * r.randint(32, 4096)
        ratio = r.uniform(0.6, 1.3)
        rule[(m, n, k)] = ratio
        rows.append(("heuristic", m, n, k, "cfg_a", ratio))
    write_rows(tmp_path / "b.csv", rows)
    table = {band: (n, g, below, worst) for band, n, g, below, worst in
             report.summary(report.read([str(tmp_path / "b.csv")])["rule"])}
    bands = {"1-63": (1, 63), "64-511": (64, 511), "512-4095": (512, 4095), "4096+": (4096, 1 << 40),
             "all": (1, 1 << 40)}
    for name, (lo, hi) in bands.items():
        v = [x for (m, _, _), x in rule.items() if lo <= m <= hi]
        n, g, below, worst = table[name]
        assert n == len(v), name
        assert math.isclose(g, math.exp(sum(map(math.log, v)) / len(v)), rel_tol=1e-12), name
        assert below == sum(x < 0.90 for x in v), name
        assert worst == min(v), name


def test_a_config_wins_only_beyond_the_margin_and_best_of_drops_it(tmp_path):
    rows = [
        # 100 x 1000 x 1000: cfg_new 1.10 vs best other 1.00 -> a win at 2%, and 1.00 without it
        ("alone", 100, 1000, 1000, "cfg_a", 1.00), ("alone", 100, 1000, 1000, "cfg_b", 0.80),
        ("alone", 100, 1000, 1000, "cfg_new", 1.10),
        # 200 x 1000 x 1000: 1.01 vs 1.00 -> within the margin, no win
        ("alone", 200, 1000, 1000, "cfg_a", 1.00), ("alone", 200, 1000, 1000, "cfg_new", 1.01),
        # a config at two divisions counts at its best
        ("alone", 300, 1000, 1000, "cfg_a", 0.70), ("alone", 300, 1000, 1000, "cfg_a", 0.95),
        ("alone", 300, 1000, 1000, "cfg_new", 0.90),
        ("heuristic", 100, 1000, 1000, "cfg_a", 1.00), ("heuristic", 200, 1000, 1000, "cfg_a", 1.00),
        ("heuristic", 300, 1000, 1000, "cfg_a", 0.70),
    ]
    write_rows(tmp_path / "a.csv", rows)
    data = report.read([str(tmp_path / "a.csv")])
    wins, without = report.config_wins(data["alone"], "cfg_new", 0.02)
    assert [(w[0][1], w[1], w[2], w[3]) for w in wins] == [(100, 1.10, 1.00, "cfg_a")]
    assert sorted((k[1], v) for k, v in without.items()) == [(100, 1.00), (200, 1.00), (300, 0.95)]
    out = io.StringIO()
    with redirect_stdout(out):
        assert report.main([str(tmp_path / "a.csv"), "--config", "cfg_new", "--list"]) == 0
    text = out.getvalue()
    assert "cfg_new beats every other config by > 2% on 1 of 3 shapes" in text
    assert "rule below 0.90x: 1 shapes" in text and "300 x 1000 x 1000: 0.700x" in text


def test_the_same_shape_in_two_files_counts_twice_and_bad_rows_are_refused(tmp_path):
    write_rows(tmp_path / "x.csv", [("heuristic", 100, 1000, 1000, "cfg_a", 0.8)])
    write_rows(tmp_path / "y.csv", [("heuristic", 100, 1000, 1000, "cfg_a", 1.25)])
    rows = report.summary(report.read([str(tmp_path / "x.csv"), str(tmp_path / "y.csv")])["rule"])
    assert rows[-1][0] == "all" and rows[-1][1] == 2 and math.isclose(rows[-1][2], 1.0)
    write_rows(tmp_path / "z.csv", [("heuristic", 100, 1000, 1000, "cfg_a", 0.0)])
    try:
        report.read([str(tmp_path / "z.csv")])
    except ValueError as e:
        assert "ratio" in str(e)
    else:
        raise AssertionError("a zero ratio was accepted")
    write_rows(tmp_path / "e.csv", [("sweep", 100, 1000, 1000, "cfg_a", 1.0)])
    assert report.main([str(tmp_path / "e.csv")]) == 1


def test_versus_is_the_time_ratio_on_shapes_both_ran(tmp_path):
    print(f"seed {SEED:#x}")
    r = random.Random(SEED)
    rows, want = [], {}
    for m in [70, 300, 900, 5000] + [r.randint(64, 16384) for _ in range(20)]:
        n, k = 8 * r.randint(32, 4096), 8 * r.randint(32, 4096)
        a, b = r.uniform(0.5, 1.3), r.uniform(0.5, 1.3)
        rows += [("alone", m, n, k, "cfg_a", a), ("alone", m, n, k, "cfg_b", b)]
        want[(m, n, k)] = b / a  # ratios are cuBLASLt's time over the config's
    rows.append(("alone", 123, 2048, 2048, "cfg_a", 1.0))  # cfg_b never ran here: left out
    write_rows(tmp_path / "v.csv", rows)
    got = report.versus(report.read([str(tmp_path / "v.csv")])["alone"], "cfg_a", "cfg_b")
    assert {k[1:]: v for k, v in got.items()} == pytest.approx(want)
    out = io.StringIO()
    with redirect_stdout(out):
        assert report.main([str(tmp_path / "v.csv"), "--versus", "cfg_a", "cfg_b"]) == 0
    last = out.getvalue().strip().splitlines()[-1].split()
    v = list(want.values())
    assert last[0] == "all" and int(last[1]) == len(v)
    assert float(last[2]) == pytest.approx(math.exp(sum(map(math.log, v)) / len(v)), abs=6e-4)
    assert float(last[3]) == pytest.approx(min(v), abs=6e-4) and float(last[4]) == pytest.approx(max(v), abs=6e-4)
    assert report.main([str(tmp_path / "v.csv"), "--versus", "cfg_a", "cfg_c"]) == 1
