"""Issue 30, defect 6: torch_ops.algorithm("convolve", x, h, mode=...) and
`python -m torch_ops.info convolve ...` say which path a convolve call takes. The query op
gpukern::_algorithm_convolve comes with the conv1d work; without it the tests of the answer skip and
the call says the build lacks the query (not "unknown op")."""
import subprocess
import sys

import pytest
import torch

import torch_ops
from torch_ops.algorithms import has_convolve_query

needs_query = pytest.mark.skipif(not has_convolve_query(),
                                 reason="this build has no gpukern::_algorithm_convolve")


def _meta(*shape):
    return torch.empty(*shape, device="meta")


@needs_query
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_algorithm_convolve(mode):
    x, h = _meta(8, 4096), _meta(8, 31)
    name = torch_ops.algorithm("convolve", x, h, mode=mode)
    assert isinstance(name, str) and name
    assert torch_ops.algorithm("convolve", x, h, mode) == name
    if mode == "full":
        assert torch_ops.algorithm("convolve", x, h) == name


@needs_query
def test_info_convolve():
    out = subprocess.run([sys.executable, "-m", "torch_ops.info", "convolve", "--input", "8,4096",
                          "--filter", "8,31", "--mode", "same"], capture_output=True, text=True,
                         check=True).stdout
    assert "output: [8, 4096] float32" in out
    assert "CUDA algorithm: unknown" not in out


def test_algorithm_convolve_is_a_known_op():
    x, h = _meta(8, 64), _meta(8, 5)
    if has_convolve_query():
        assert torch_ops.algorithm("convolve", x, h)
    else:
        with pytest.raises(NotImplementedError, match="no convolve query"):
            torch_ops.algorithm("convolve", x, h)
    with pytest.raises(ValueError, match="expected one of conv1d, conv2d, convolve, mv"):
        torch_ops.algorithm("conv3d", x, h)
