"""Issue 29 (Python): the fast-path rule asks the extension's CUDA algorithm choice for the
specialised kernels' limits instead of copying C++ tile constants. Checked here with a stand-in
for the query, so it runs in CPU-only builds too (tests/test_fastpath.py checks the real choice in
CUDA builds)."""
import pytest
import torch

import torch_ops
import torch_ops.algorithms
from torch_ops import fastpath


@pytest.fixture
def fake_choice(monkeypatch):
    calls = []

    def algorithm(op, x, w, bias, stride, padding, dilation, groups):
        calls.append((op, tuple(x.shape), x.dtype, tuple(dilation)))
        assert x.device.type == "meta" and w.device.type == "meta" and padding == 0
        return "general_direct" if max(dilation) > 100 else "depthwise_rows"

    monkeypatch.setattr(torch_ops, "has_cuda_kernels", lambda: True)
    monkeypatch.setattr(torch_ops.algorithms, "algorithm", algorithm)
    fastpath._cuda_choice_reason.cache_clear()
    yield calls
    fastpath._cuda_choice_reason.cache_clear()


def test_rule_follows_the_cuda_choice(fake_choice):
    assert torch_ops.has_fast_path("", torch.nn.Conv2d(4, 4, 3, dilation=2, groups=4))
    assert fake_choice[0] == ("conv2d", (2, 4, 256, 256), torch.float32, (2, 2))
    assert [c[2] for c in fake_choice] == [torch.float32, torch.bfloat16]
    reason = torch_ops.fast_path_reason(torch.nn.Conv2d(4, 4, 3, dilation=101, groups=4))
    assert "'general_direct'" in reason and "general kernel" in reason
    assert fake_choice[-1][1] == (2, 4, 256, 256)
    reason = torch_ops.fast_path_reason(torch.nn.Conv1d(4, 4, 3, dilation=200, groups=4))
    assert "general kernel" in reason
    # Structural cases are decided without a query; answers are cached per layer setting.
    n = len(fake_choice)
    assert not torch_ops.has_fast_path("", torch.nn.Conv1d(4, 8, 3, groups=4))
    assert torch_ops.has_fast_path("", torch.nn.Conv2d(4, 4, 3, dilation=2, groups=4))
    assert len(fake_choice) == n


def test_query_input_covers_the_footprint(fake_choice):
    torch_ops.fast_path_reason(torch.nn.Conv1d(2, 2, 5, dilation=3000, groups=2))
    assert fake_choice[0][1] == (2, 2, 12001)


def test_no_tile_constants_left():
    src = open(fastpath.__file__).read()
    for name in ("24576", "24 * 1024", "_DW2D", "_CONV1D_MAX_DILATION"):
        assert name not in src
