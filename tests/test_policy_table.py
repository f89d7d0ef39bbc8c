"""The shipped rule tables (torch_ops.policy RULES and COMPILED_RULES) are what
benchmarks/derive_policy.py derives from the shipped census files, and neither sends a measured
layer that was slower (or, for a plain convolution, saved too little) to gpukern."""
import json
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import derive_policy  # noqa: E402
from torch_ops import policy  # noqa: E402


def _census_files():
    src = open(os.path.join(ROOT, "torch_ops", "policy.py")).read()
    block = src[src.index("# BEGIN GENERATED RULES"):src.index("# END GENERATED RULES")]
    names = sorted(set(re.findall(r"(\w+_layers\.json)", block)))
    return [os.path.join(ROOT, "benchmarks", "results", n) for n in names]


def test_tables_are_the_derivation_of_the_census(tmp_path):
    files = _census_files()
    assert files and all(os.path.exists(f) for f in files), files
    copy = tmp_path / "policy.py"
    copy.write_text(open(os.path.join(ROOT, "torch_ops", "policy.py")).read())
    assert derive_policy.main(files + ["--write", "--policy-file", str(copy)]) == 0
    assert copy.read_text() == open(os.path.join(ROOT, "torch_ops", "policy.py")).read(), (
        "torch_ops/policy.py's tables differ from derive_policy.py's output: re-run "
        "python3 benchmarks/derive_policy.py " + " ".join(os.path.relpath(f, ROOT) for f in files)
        + " --write")


@pytest.mark.parametrize("table", ["RULES", "COMPILED_RULES"])
def test_no_slow_measured_layer_under_a_gpukern_rule(table):
    files = _census_files()
    compiled = table == "COMPILED_RULES"
    meas = (derive_policy.compiled_measurements(files) if compiled
            else derive_policy.measurements(files))
    cheap = () if compiled else derive_policy.HOST_CHEAP_KINDS
    assert derive_policy.misplaced(getattr(policy, table), meas, policy.MARGIN, cheap) == []
    # and the check can fail: a table sending everything to gpukern misplaces the slow rows
    everything = [policy.Rule("*", "*", "*", "*", "*", "*", None, None, None, "gpukern")]
    slow = [m for m in meas if m[1] < policy.MARGIN]
    assert slow and len(derive_policy.misplaced(everything, meas, policy.MARGIN, cheap)) >= \
        len(slow)


def test_compiled_table_keeps_its_torch_cells_on_torch():
    """No compiled rule sends a cell of derive_policy.COMPILED_TORCH_CELLS (2-D stems, bf16 2-D
    depthwise layers) to gpukern, though the census has measured rows there that would (so the
    exclusion is what keeps them on torch)."""
    def in_cells(op, kind, dtype):
        return derive_policy._compiled_torch_cell(dict(op=op, kind=kind, dtype=dtype))

    assert not [r for r in policy.COMPILED_RULES
                if r.path == "gpukern" and in_cells(r.op, r.kind, r.dtype)]
    files = _census_files()
    rows = [m for m in derive_policy.measurements(files, skip_batch1=True)
            if not m[0]["fused"] and in_cells(m[0]["op"], m[0]["kind"], m[0]["dtype"])]
    assert any(m[1] >= policy.MARGIN for m in rows)  # faster alone, yet torch under compile
    assert not any(in_cells(m[0]["op"], m[0]["kind"], m[0]["dtype"])
                   for m in derive_policy.compiled_measurements(files))
