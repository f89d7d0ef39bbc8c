"""benchmarks/models.py's report: the summary states the default swap's worst case by the median
and by the paired ratio, beside the run's A/A rows, and --render rewrites a table from its JSON."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import models  # noqa: E402


def _row(variant, speedup, paired, dtype="float32", mode="eager"):
    return dict(model="m", input="16x3", dtype=dtype, mode=mode, variant=variant, ms=1.0,
                speedup=speedup, paired=paired, convs_fast=0, convs_depthwise=1, convs_other=2)


def test_summary_gives_median_and_paired_worst_case_and_the_aa_range():
    rows = [_row("stock", 1.0, 1.0), _row("swap", 0.92, 1.04, "bfloat16", "compiled"),
            _row("swap", 1.10, 0.97, "float32", "eager"), _row("stock(again)", 0.95, 0.96),
            _row("stock(copy)", 1.01, 1.02)]
    line = [s for s in models.summaries(rows) if "default swap lowest" in s][0]
    assert "lowest 0.92x vs stock (16x3, bfloat16 compiled) over 2 configurations" in line
    assert "lowest paired 0.97x (16x3, float32 eager)" in line
    assert "A/A rows (stock against itself) paired 0.96-1.02x" in line


def test_render_rewrites_the_table_from_the_json(tmp_path, monkeypatch):
    rows = [dict(_row("stock", 1.0, 1.0), rel_vs_stock=0.0, rel_vs_fp64=1e-4,
                 stock_rel_vs_fp64=1e-4, agree=True, replaced=None, note="", skip_reasons={}),
            dict(_row("swap", 1.5, 1.4), rel_vs_stock=1e-4, rel_vs_fp64=1e-4,
                 stock_rel_vs_fp64=1e-4, agree=True, replaced=3, note="kept 'rules'",
                 skip_reasons={})]
    env = dict(device="GPU X", torch="2", cuda="13", gpukern_cuda=True, archs="sm_90a",
               compile="none", max_slowdown=5.0, slow_ms=50.0)
    src = tmp_path / "run.json"
    src.write_text(json.dumps(dict(env=env, rows=rows)))
    monkeypatch.setattr(sys, "argv", ["models.py", "--render", str(src)])
    models.main()
    md = (tmp_path / "run.md").read_text()
    assert md == models.markdown(rows, env)
    assert "| m | 16x3 | float32 | eager | swap | 1.000 | 1.50x | 1.40x |" in md


def test_chart_plots_the_swap_rows(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [dict(_row("stock", 1.0, 1.0), note=""),
            dict(_row("swap", 1.5, 1.4), note="kept 'rules'"),
            dict(_row("stock(again)", 0.99, 1.01), note="")]
    env = dict(device="GPU X")
    path = tmp_path / "m.png"
    assert models.chart(rows, env, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not models.chart([rows[0]], env, str(tmp_path / "none.png"))  # no swap row
    assert not (tmp_path / "none.png").exists()
