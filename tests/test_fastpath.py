"""The fast-path policy: torch_ops.has_fast_path (a swap filter) and enabled(convs="fast") pick
only the convolutions gpukern has a specialised kernel for; the structural rule agrees with the
CUDA algorithm choice (checked on meta tensors in CUDA builds)."""
import pytest
import torch

import torch_ops
import torch_ops.functional
from torch_ops.fastpath import conv_fast_path_reason

_FAST1 = {"rowwise8", "rowwise16", "rowwise8_dilated", "rowwise_reg", "rowwise_mma", "fft"}
_FAST2 = {"depthwise_rows", "depthwise_tma", "depthwise_plane", "depthwise_large", "depthwise_nchw",
          "depthwise_nhwc", "depthwise_nhwc_reg"}

# (in, out, groups, kernel, stride, dilation, fast)
CONV1D_CASES = [
    (1, 1, 1, 16, 1, 1, True),       # single-channel signal
    (8, 8, 8, 31, 1, 1, True),       # Conformer depthwise
    (8, 8, 8, 64, 1, 1, True),
    (8, 8, 8, 5, 1, 4, True),
    (8, 8, 8, 3, 1, 128, True),
    (8, 8, 8, 3, 1, 129, False),     # dilation past the row-wise kernels' limit
    (8, 8, 8, 5, 2, 1, False),       # strided depthwise
    (8, 16, 8, 5, 1, 1, False),      # depthwise multiplier 2
    (8, 8, 1, 1, 1, 1, False),       # pointwise
    (8, 8, 2, 3, 1, 1, False),       # grouped
    (8, 4, 1, 3, 1, 1, False),       # dense
    (1, 1, 1, 10, 5, 1, False),      # strided single-channel
]
CONV2D_CASES = [
    (1, 1, 1, (3, 3), 1, 1, True),
    (8, 8, 8, (3, 3), 1, 1, True),
    (8, 8, 8, (7, 7), 1, 1, True),
    (8, 8, 8, (3, 5), 1, 1, True),
    (8, 8, 8, (31, 31), 1, 1, True),
    (8, 8, 8, (3, 3), 1, 2, True),
    (8, 8, 8, (3, 3), 1, 40, True),
    (8, 8, 8, (3, 3), 1, 60, False),  # dilated footprint past the depthwise tile
    (8, 8, 8, (3, 3), 2, 1, False),   # MobileNet's strided depthwise
    (8, 8, 8, (3, 3), (1, 2), 1, False),
    (8, 16, 8, (3, 3), 1, 1, False),
    (8, 8, 1, (1, 1), 1, 1, False),
    (8, 8, 1, (3, 3), 1, 1, False),
    (8, 8, 4, (3, 3), 1, 1, False),
]


def _layer(nsp, c, o, g, k, s, d):
    cls = torch.nn.Conv1d if nsp == 1 else torch.nn.Conv2d
    return cls(c, o, k, stride=s, dilation=d, groups=g, device="meta")


@pytest.mark.parametrize("nsp,case", [(1, c) for c in CONV1D_CASES] +
                         [(2, c) for c in CONV2D_CASES])
def test_rule(nsp, case):
    *cfg, fast = case
    c, o, g, k, s, d = cfg
    if not fast and g == c == o and s == 1 and not torch_ops.has_cuda_kernels():
        pytest.skip("the specialised kernels' limits come from the CUDA algorithm choice")
    layer = _layer(nsp, *cfg)
    assert torch_ops.has_fast_path("x", layer) is fast
    reason = torch_ops.fast_path_reason(layer)
    assert (reason is None) is fast
    if not fast:
        assert "general kernel" in reason and "\n" not in reason


def test_rule_reasons():
    assert "dense channel mixing" in torch_ops.fast_path_reason(torch.nn.Conv1d(4, 8, 1))
    assert "depthwise multiplier 2" in torch_ops.fast_path_reason(
        torch.nn.Conv1d(4, 8, 3, groups=4))
    assert "grouped" in torch_ops.fast_path_reason(torch.nn.Conv2d(4, 4, 3, groups=2))
    assert "stride (2, 2)" in torch_ops.fast_path_reason(
        torch.nn.Conv2d(4, 4, 3, stride=2, groups=4))
    assert "not a Conv1d" in torch_ops.fast_path_reason(torch.nn.Linear(2, 2))
    assert not torch_ops.has_fast_path("", torch.nn.ConvTranspose1d(2, 2, 3, groups=2))
    # The fast rule applies to what swap may convert; subclasses are still skipped by swap.
    assert conv_fast_path_reason(1, 4, 4, 4, [3], [1], [1]) is None


@pytest.mark.skipif(not torch_ops.has_cuda_kernels(),
                    reason="the CUDA algorithm choice exists only in CUDA builds")
@pytest.mark.parametrize("nsp,case", [(1, c) for c in CONV1D_CASES] +
                         [(2, c) for c in CONV2D_CASES])
def test_rule_matches_cuda_algorithm_choice(nsp, case):
    """On inputs long enough for the row-wise tiles, the structural rule says "fast" exactly when
    the CUDA choice (from meta tensors, no GPU needed) is a specialised kernel."""
    c, o, g, k, s, d, fast = case
    if nsp == 1:
        x = torch.empty(2, c, 8192, device="meta")
        w = torch.empty(o, c // g, k, device="meta")
        names = _FAST1
    else:
        x = torch.empty(2, c, 256, 256, device="meta")
        w = torch.empty(o, c // g, *k, device="meta")
        names = _FAST2
    for dtype in (torch.float32, torch.bfloat16):
        name = torch_ops.algorithm(f"conv{nsp}d", x.to(dtype), w.to(dtype), None, s, 0, d, g)
        assert (name in names) is fast, name


class Mixed(torch.nn.Module):
    """A Conformer-like conv block plus single-channel, strided and dilated layers."""

    def __init__(self):
        super().__init__()
        self.pw1 = torch.nn.Conv1d(4, 8, 1)
        self.dw = torch.nn.Conv1d(8, 8, 7, padding=3, groups=8)
        self.dw_dil = torch.nn.Conv1d(8, 8, 3, padding=2, dilation=2, groups=8,
                                      padding_mode="reflect")
        self.dw_stride = torch.nn.Conv1d(8, 8, 3, stride=2, padding=1, groups=8)
        self.pw2 = torch.nn.Conv1d(8, 1, 1)
        self.single = torch.nn.Conv2d(1, 1, 3, padding=1)
        self.dw2 = torch.nn.Conv2d(4, 4, 5, padding=2, groups=4)
        self.mult = torch.nn.Conv2d(4, 8, 3, padding=1, groups=4)

    def forward(self, x):
        y = self.dw_stride(self.dw_dil(self.dw(self.pw1(x))))
        y = self.pw2(y)                                  # (N, 1, L/2)
        img = y.unsqueeze(1).expand(-1, 1, 4, -1)        # (N, 1, 4, L/2)
        img = self.single(img).expand(-1, 4, -1, -1)
        return self.mult(self.dw2(img))


FAST_LAYERS = ["dw", "dw_dil", "single", "dw2"]


def test_swap_with_fast_path_filter_matches_stock():
    torch.manual_seed(0)
    net = Mixed().eval()
    x = torch.randn(2, 4, 40)
    with torch.no_grad():
        ref = net(x)
    result = torch_ops.swap(net, filter=torch_ops.has_fast_path)
    assert [n for n, _ in result.replaced] == FAST_LAYERS
    skipped = dict(result.skipped)
    assert sorted(skipped) == ["dw_stride", "mult", "pw1", "pw2"]
    assert skipped["pw1"].startswith("excluded by has_fast_path: dense channel mixing")
    assert "stride (2,)" in skipped["dw_stride"]
    assert "depthwise multiplier 2" in skipped["mult"]
    assert type(net.pw1) is torch.nn.Conv1d and type(net.dw) is torch_ops.nn.Conv1d
    with torch.no_grad():
        out = net(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    # The rest can be swapped later; everything then runs gpukern.
    rest = torch_ops.swap(net)
    assert sorted(n for n, _ in rest.replaced) == ["dw_stride", "mult", "pw1", "pw2"]
    with torch.no_grad():
        torch.testing.assert_close(net(x), ref, rtol=1e-4, atol=1e-5)


def test_swap_other_filter_reason_unchanged():
    net = Mixed()
    res = torch_ops.swap(net, filter=lambda n, m: n == "dw")
    assert ("pw1", "excluded by filter") in res.skipped


@pytest.fixture
def conv_calls(monkeypatch):
    """Names of the gpukern conv functions the override called."""
    calls = []
    for op in ("conv1d", "conv2d"):
        real = getattr(torch_ops.functional, op)

        def spy(*args, _real=real, _op=op, **kwargs):
            calls.append(_op)
            return _real(*args, **kwargs)
        monkeypatch.setattr(torch_ops.functional, op, spy)
    return calls


@pytest.mark.parametrize("convs,expected", [("fast", 4), ("all", 8)])
def test_enabled_convs_policy(conv_calls, convs, expected):
    torch.manual_seed(1)
    net = Mixed().eval()
    x = torch.randn(2, 4, 40)
    with torch.no_grad():
        ref = net(x)
        with torch_ops.enabled(convs=convs, cpu=True):
            out = net(x)
    assert len(conv_calls) == expected
    if convs == "fast":
        assert conv_calls == ["conv1d", "conv1d", "conv2d", "conv2d"]
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_enabled_convs_fast_functional_calls(conv_calls):
    x = torch.randn(1, 3, 50)
    dw = torch.randn(3, 1, 5)
    dense = torch.randn(3, 3, 5)
    with torch.no_grad(), torch_ops.enabled(ops=["conv1d"], convs="fast", cpu=True):
        torch.nn.functional.conv1d(x, dw, None, 1, 2, 1, 3)
        torch.nn.functional.conv1d(x, dw, groups=3, stride=[2])
        torch.nn.functional.conv1d(x, dense, padding="same")
        torch.nn.functional.conv1d(x, dw, groups=3, dilation=(2,), padding="same")
        with pytest.raises(RuntimeError):  # malformed: torch raises its own error
            torch.nn.functional.conv1d(x, torch.randn(3, 2, 5), groups=3)
    assert conv_calls == ["conv1d", "conv1d"]


def test_enabled_convs_bad_policy():
    with pytest.raises(ValueError, match="convs='some'"):
        with torch_ops.enabled(convs="some"):
            pass


def _gpukern_calls(graphs):
    return sorted(str(n.target) for gm in graphs for n in gm.graph.nodes
                  if n.op == "call_function" and str(n.target).startswith("gpukern."))


@pytest.mark.parametrize("how", ["swap", "override"])
def test_fast_policy_compiles_fullgraph(how):
    """The policy traces into one graph holding gpukern ops for the 4 fast layers only."""
    torch.manual_seed(2)
    net = Mixed().eval()
    x = torch.randn(2, 4, 40)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    torch._dynamo.reset()
    with torch.no_grad():
        ref = net(x)
        if how == "swap":
            torch_ops.swap(net, filter=torch_ops.has_fast_path, cpu=True)
            ctx = torch_ops.enabled(ops=[])  # no routing: the swapped layers call gpukern
        else:
            ctx = torch_ops.enabled(convs="fast", cpu=True)
        with ctx:
            out = torch.compile(net, fullgraph=True, backend=backend)(x)
    torch._dynamo.reset()
    assert len(graphs) == 1
    assert _gpukern_calls(graphs) == ["gpukern.conv1d"] * 2 + ["gpukern.conv2d"] * 2
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
