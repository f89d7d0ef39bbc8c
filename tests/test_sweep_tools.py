"""The size sweeps' method, without a GPU: benchmarks/sweep.py's recheck (the rounds of a second
recheck join the first's, the median over all of them; the first pass kept) and its gzipped
JSON reader, and benchmarks/dw_sweep.py's grid (its bounds and its fixed order)."""
import gzip
import importlib.util
import itertools
import json
import os

import pytest

_BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(_BENCH, name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sweep = _load("sweep.py")
dw_sweep = _load("dw_sweep.py")


class _Built:
    ours = "ours"
    baselines = {"torch.sum": ("torch", None)}
    bytes = 1000


def test_recheck_pools_rounds(monkeypatch):
    """Five rounds where gpukern reads 2.0 ms (0.5x), then fifteen of 1.0 (eight) and 3.0 (seven):
    the second recheck's median is over all twenty rounds (2.0 ms; the fifteen alone would give
    1.0), the first pass stays under "first", and every round is kept."""
    times = {"ours": iter([2.0] * 5 + [1.0] * 8 + [3.0] * 7), "torch": itertools.repeat(1.0)}
    monkeypatch.setattr(sweep, "make", lambda p, device: _Built())
    monkeypatch.setattr(sweep, "pick_method", lambda sides: ("graph100", 100, 5.0))
    monkeypatch.setattr(sweep, "time_one", lambda fn, flag, calls: next(times[fn]))
    row = {"method": "graph100", "estimate_us": 5.0, "ours_ms": 1.1,
           "baselines_ms": {"torch.sum": 1.0}, "speedup": 1.0 / 1.1}
    sweep.recheck(None, row, None, 5)
    assert row["ours_ms"] == 2.0 and row["speedup"] == pytest.approx(0.5)
    assert row["method"] == "graph100 x5"
    assert row["first"]["ours_ms"] == 1.1
    sweep.recheck(None, row, None, 15)
    assert row["ours_ms"] == 2.0 and row["speedup"] == pytest.approx(0.5)
    assert row["method"] == "graph100 x20"
    assert row["first"]["ours_ms"] == 1.1  # the first pass, not the five-round reading
    assert len(row["rounds_ms"]["gpukern"]) == 20 and len(row["rounds_ms"]["torch.sum"]) == 20


def test_load_json_reads_gzip(tmp_path):
    data = {"info": {"gpu": "x"}, "points": [{"family": "sum", "speedup": 1.0}]}
    plain, packed = tmp_path / "a.json", tmp_path / "b.json.gz"
    plain.write_text(json.dumps(data))
    with gzip.open(packed, "wt") as f:
        json.dump(data, f)
    assert sweep.load_json(str(plain)) == data == sweep.load_json(str(packed))


def test_dw_sweep_grid_bounds():
    for quick in (False, True):
        points, skipped = dw_sweep.grid(quick)
        assert points and skipped
        for p in points:
            pad = p["K"] // 2
            oh = (p["H"] + 2 * pad - p["K"]) // p["stride"] + 1
            assert p["K"] <= p["H"] + 2 * pad
            assert 1 <= p["N"] <= 8 and p["N"] * p["C"] * p["H"] ** 2 <= dw_sweep.MAX_IN
            assert p["N"] * p["C"] * oh * oh * p["K"] ** 2 <= dw_sweep.MAX_FMA
        keys = {tuple(sorted(p.items())) for p in points}
        assert len(keys) == len(points)  # no point twice
        assert dw_sweep.grid(quick)[0] == points  # the same order every run
    full = dw_sweep.grid(False)[0]
    assert {p["H"] for p in full} == set(dw_sweep.PLANES)
    assert {p["K"] for p in full} == set(dw_sweep.KS)
    assert {p["C"] for p in full} == set(dw_sweep.CS)
