"""torch_ops.swap with fusion, the per-layer policy, channels_last and the per-layer table.

On CPU the fused blocks run gpukern's CPU kernels (swap(..., cpu=True)): the fused op where the
build has it, gpukern's convolution with the epilogue in torch otherwise; on CUDA the same models
run under the three policies."""
import collections
import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_ops
from torch_ops import policy as gk_policy
from torch_ops.nn import FusedConv1d, FusedConv2d, has_fused_op, torch_class_of
from conftest import DEVICE_PARAMS, HAS_CUDA

tvm = pytest.importorskip("torchvision.models")

CUDA_ONLY = pytest.mark.skipif(not HAS_CUDA,
                               reason="needs a CUDA device and the CUDA build of gpukern")


def _randomize_bn(model, seed=0):
    """Non-trivial BatchNorm statistics and affine parameters (fresh ones are the identity)."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            if m.affine:
                m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.data.copy_(torch.randn(n, generator=g) * 0.1)
    return model


def _close(out, ref, dtype=torch.float32):
    tol = {torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 5e-3}[dtype]
    err = (out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)
    assert err <= tol, f"norm-relative error {float(err):.2e} > {tol}"


def _fused_counts(result):
    return collections.Counter(b.fused for b in result.fused)


# ---------------------------------------------------------------------------------------------
# torchvision models

MODELS = {
    # name: (constructor, kwargs, expected fused blocks by what they fused)
    "resnet18": (tvm.resnet18, {}, {"bn+relu": 9, "bn+add+relu": 8, "bn": 3}),
    "resnet50": (tvm.resnet50, {}, {"bn+relu": 33, "bn+add+relu": 16, "bn": 4}),
    "mobilenet_v3_small": (tvm.mobilenet_v3_small, {},
                           {"bn+hardswish": 18, "relu": 9, "hardsigmoid": 9, "bn+add": 6,
                            "bn+relu": 5, "bn": 5}),
    "convnext_tiny": (tvm.convnext_tiny, {"layer_scale": 0.5}, {}),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_torchvision_models_cpu(name):
    ctor, kwargs, expected = MODELS[name]
    torch.manual_seed(0)
    model = _randomize_bn(ctor(weights=None, **kwargs)).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.inference_mode():
        ref = model(x)
    result = torch_ops.swap(model, cpu=True)
    assert dict(_fused_counts(result)) == expected
    if expected:
        assert isinstance(result.model, torch.fx.GraphModule) and result.model is not model
        for b in result.fused:
            assert isinstance(b.module, (FusedConv1d, FusedConv2d))
            assert result.model.get_submodule(b.name) is b.module
        assert not any(isinstance(m, nn.BatchNorm2d) for m in result.model.modules()
                       if not isinstance(m, nn.Sequential))
    else:
        assert result.model is model
    with torch.inference_mode():
        out = result.model(x)
        again = model(x)  # the model passed in still works (converted in place)
    _close(out, ref)
    _close(again, ref)


# ---------------------------------------------------------------------------------------------
# Hand-made models: every activation, residual patterns, cases that must not fuse

ACTS = {
    "relu": lambda: nn.ReLU(), "relu_inplace": lambda: nn.ReLU(inplace=True),
    "relu6": lambda: nn.ReLU6(), "silu": lambda: nn.SiLU(inplace=True), "gelu": lambda: nn.GELU(),
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"), "hardswish": lambda: nn.Hardswish(),
    "sigmoid": lambda: nn.Sigmoid(),
}
ACT_NAME = {"relu_inplace": "relu"}


class ModuleAct(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.act = ACTS[act]()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


FUNCS = {
    "F.relu": lambda y: F.relu(y), "F.relu_inplace": lambda y: F.relu(y, inplace=True),
    "torch.relu": torch.relu, "torch.relu_": torch.relu_, "Tensor.relu": lambda y: y.relu(),
    "F.relu6": F.relu6, "F.silu": F.silu, "F.gelu": F.gelu,
    "F.gelu_tanh": lambda y: F.gelu(y, approximate="tanh"), "F.hardswish": F.hardswish,
    "torch.sigmoid": torch.sigmoid, "Tensor.sigmoid_": lambda y: y.sigmoid_(),
}
FUNC_NAME = {"F.relu": "relu", "F.relu_inplace": "relu", "torch.relu": "relu",
             "torch.relu_": "relu", "Tensor.relu": "relu", "F.relu6": "relu6", "F.silu": "silu",
             "F.gelu": "gelu", "F.gelu_tanh": "gelu_tanh", "F.hardswish": "hardswish",
             "torch.sigmoid": "sigmoid", "Tensor.sigmoid_": "sigmoid"}


class FuncAct(nn.Module):
    def __init__(self, fn, one_d=False):
        super().__init__()
        self.fn = fn
        self.conv = nn.Conv1d(4, 8, 5, padding=2) if one_d else nn.Conv2d(4, 8, 3, padding=1)
        self.bn = nn.BatchNorm1d(8) if one_d else nn.BatchNorm2d(8)

    def forward(self, x):
        return self.fn(self.bn(self.conv(x)))


class Residual(nn.Module):
    """conv+bn+add+relu with the conv branch left or right of the add (add, iadd, torch.add,
    Tensor.add), and an add whose other operand is another conv block (ResNet's downsample)."""

    def __init__(self, how):
        super().__init__()
        self.how = how
        self.conv = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.down = nn.Conv2d(8, 8, 1)
        self.down_bn = nn.BatchNorm2d(8)

    def forward(self, x):
        y = self.bn(self.conv(x))
        other = self.down_bn(self.down(x)) if self.how == "two_convs" else x * 0.5
        if self.how in ("left", "two_convs"):
            z = y + other
        elif self.how == "right":
            z = other + y
        elif self.how == "iadd":
            y += other
            z = y
        elif self.how == "torch.add":
            z = torch.add(other, y)
        else:  # Tensor.add
            z = y.add(other)
        return F.relu(z)


def _check(model, x, expected, cpu=True, **kw):
    model = _randomize_bn(model).eval()
    with torch.inference_mode():
        ref = model(x)
    result = torch_ops.swap(model, cpu=cpu, **kw)
    assert sorted(b.fused for b in result.fused) == sorted(expected), result.fused
    with torch.inference_mode():
        out = result.model(x)
    _close(out, ref)
    return result


@pytest.mark.parametrize("act", list(ACTS))
def test_activation_modules(act):
    torch.manual_seed(0)
    result = _check(ModuleAct(act), torch.randn(2, 4, 9, 9),
                    ["bn+" + ACT_NAME.get(act, act)])
    assert result.fused[0].parts == ["conv", "bn", "act"]
    assert result.fused[0].module.activation == ACT_NAME.get(act, act)


@pytest.mark.parametrize("fn", list(FUNCS))
@pytest.mark.parametrize("one_d", [False, True], ids=["2d", "1d"])
def test_activation_functions(fn, one_d):
    torch.manual_seed(0)
    x = torch.randn(2, 4, 33) if one_d else torch.randn(2, 4, 9, 9)
    result = _check(FuncAct(FUNCS[fn], one_d), x, ["bn+" + FUNC_NAME[fn]])
    assert type(result.fused[0].module) is (FusedConv1d if one_d else FusedConv2d)


@pytest.mark.parametrize("how", ["left", "right", "iadd", "torch.add", "Tensor.add",
                                 "two_convs"])
def test_residual_patterns(how):
    torch.manual_seed(0)
    expected = ["bn+add+relu"] + (["bn"] if how == "two_convs" else [])
    result = _check(Residual(how), torch.randn(2, 8, 10, 10), expected)
    block = next(b for b in result.fused if "add" in b.fused)
    assert block.module.has_residual and block.name == "conv"


def test_residual_shape_checked_with_example_inputs():
    class Broadcast(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x, s):
            return torch.relu(self.conv(x) + s)  # s broadcasts: [N, C, 1, 1]
    torch.manual_seed(0)
    x, s = torch.randn(2, 4, 8, 8), torch.randn(2, 4, 1, 1)
    model = Broadcast().eval()
    with torch.inference_mode():
        ref = model(x, s)
    # Without shapes the add is fused and the module adds the broadcasting residual in torch.
    res = torch_ops.swap(model, cpu=True, fuse=True)
    assert [b.fused for b in res.fused] == ["add+relu"]
    with torch.inference_mode():
        _close(res.model(x, s), ref)
        # The same input shape with an exact-shape residual (the fused op), then the broadcasting
        # one again: the output size cached per input shape serves both decisions.
        s_full = torch.randn(2, 4, 8, 8)
        _close(res.model(x, s_full), model(x, s_full))
        _close(res.model(x, s), ref)
    # With example inputs the shapes differ: only the activation is left to fuse (none here).
    res = torch_ops.swap(Broadcast().eval(), cpu=True, example_inputs=(x, s))
    assert res.fused == []


class TwiceUsed(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv(x)            # used by bn and by the sum: no fusion
        a = self.bn(y) + y
        b = self.bn2(self.conv2(x))  # bn2 output used twice: conv2+bn2 fuse, the relu not
        return a + torch.relu(b) + b


class NonConvBeforeBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.AvgPool2d(1)

    def forward(self, x):
        return torch.relu(self.bn(self.pool(self.lin(x) * 2)))


class InplaceIntoShared(nn.Module):
    """`x2.add_(block)` writes into x2, which is read again afterwards: the add must not fuse.
    (torch.fx records `x2 += block` as an out-of-place add, losing the aliasing before any
    fusion: a limitation of tracing itself.)"""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        x2 = x * 1.0
        alias = x2                   # the same tensor: it sees the in-place add
        x2.add_(self.bn(self.conv(x)))
        return alias * 2 + x2


def test_no_fusion_where_values_are_shared():
    torch.manual_seed(0)
    _check(TwiceUsed(), torch.randn(2, 4, 8, 8), ["bn"])
    _check(NonConvBeforeBN(), torch.randn(2, 4, 8, 8), [])
    _check(InplaceIntoShared(), torch.randn(2, 4, 8, 8), ["bn"])


def test_bn_in_training_mode_warns_and_is_not_fused():
    torch.manual_seed(0)
    model = _randomize_bn(ModuleAct("relu")).eval()
    model.bn.train()
    with pytest.warns(UserWarning, match="training mode"):
        result = torch_ops.swap(model, cpu=True)
    assert result.fused == [] and result.model is model
    assert any("training mode" in n for n in result.notes)


def test_training_model_warns_and_converts_in_place():
    model = _randomize_bn(ModuleAct("relu")).train()
    with pytest.warns(UserWarning, match="training mode"):
        result = torch_ops.swap(model)
    assert result.fused == [] and result.model is model
    assert type(model.conv) is torch_ops.nn.Conv2d


def test_fuse_false_is_in_place_only():
    model = _randomize_bn(ModuleAct("relu")).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = torch_ops.swap(model, fuse=False)
    assert result.model is model and result.fused == []
    assert [n for n, _ in result.replaced] == ["conv"]


def test_state_dict_and_restore():
    torch.manual_seed(0)
    model = _randomize_bn(Residual("two_convs")).eval()
    keys = set(model.state_dict())
    result = torch_ops.swap(model, cpu=True)
    fused_keys = set(result.model.state_dict())
    assert fused_keys == {"conv.weight", "conv.bias", "down.weight", "down.bias"}
    assert set(model.state_dict()) == keys  # the model passed in keeps its state
    result.restore()
    assert type(model.conv) is nn.Conv2d and "gpukern_policy" not in model.conv.__dict__


# ---------------------------------------------------------------------------------------------
# nn.Sequential fallback (models torch.fx cannot trace)

class Untraceable(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Conv1d(4, 4, 5, padding=2, groups=4), nn.BatchNorm1d(4),
                                   nn.SiLU(), nn.Conv1d(4, 6, 1), nn.ReLU())
        self.tail = nn.Conv1d(6, 6, 3, padding=1)

    def forward(self, x):
        if x.sum() > 1e9:  # data-dependent control flow: fx cannot trace it
            return x
        return self.tail(self.block(x))


def test_sequential_fallback_in_place_and_restore():
    torch.manual_seed(0)
    model = _randomize_bn(Untraceable()).eval()
    x = torch.randn(2, 4, 40)
    with torch.inference_mode():
        ref = model(x)
    result = torch_ops.swap(model, cpu=True)
    assert result.model is model
    assert any("cannot trace" in n for n in result.notes)
    assert [(b.name, b.fused) for b in result.fused] == [("block.0", "bn+silu"),
                                                        ("block.3", "relu")]
    assert isinstance(model.block[1], nn.Identity) and isinstance(model.block[0], FusedConv1d)
    assert [n for n, _ in result.replaced] == ["tail"]
    with torch.inference_mode():
        _close(model(x), ref)
    result.restore()
    assert type(model.block[0]) is nn.Conv1d and type(model.block[1]) is nn.BatchNorm1d
    with torch.inference_mode():
        _close(model(x), ref)


def test_conformer_and_wav2vec2_fall_back():
    ta = pytest.importorskip("torchaudio.models")
    torch.manual_seed(0)
    conformer = _randomize_bn(ta.Conformer(input_dim=16, num_heads=2, ffn_dim=32, num_layers=2,
                                           depthwise_conv_kernel_size=7)).eval()
    x, lengths = torch.randn(1, 20, 16), torch.tensor([20])
    with torch.inference_mode():
        ref = conformer(x, lengths)[0]
    res = torch_ops.swap(conformer, cpu=True)
    assert [b.fused for b in res.fused] == ["bn+silu"] * 2
    with torch.inference_mode():
        _close(res.model(x, lengths)[0], ref)
    w2v = ta.wav2vec2_base().feature_extractor.eval()
    wav = torch.randn(1, 800)
    with torch.inference_mode():
        ref = w2v(wav, None)[0]
    res = torch_ops.swap(w2v, cpu=True)
    with torch.inference_mode():
        _close(res.model(wav, None)[0], ref)


# ---------------------------------------------------------------------------------------------
# torch.compile, the policy, channels_last, the table

def _gpukern_calls(graphs):
    return collections.Counter(str(n.target) for gm in graphs for n in gm.graph.nodes
                               if n.op == "call_function" and str(n.target).startswith("gpukern."))


def test_compile_fullgraph_cpu():
    torch.manual_seed(0)
    model = _randomize_bn(tvm.resnet18(weights=None)).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.inference_mode():
        ref = model(x)
    result = torch_ops.swap(model, cpu=True)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm
    torch._dynamo.reset()
    with torch.inference_mode():
        out = torch.compile(result.model, fullgraph=True, backend=backend)(x)
        torch._dynamo.reset()
        aot = torch.compile(result.model, fullgraph=True, backend="aot_eager")(x)
    torch._dynamo.reset()
    assert len(graphs) == 1
    op = "gpukern.conv2d_fused" if has_fused_op("conv2d") else "gpukern.conv2d"
    assert sum(v for k, v in _gpukern_calls(graphs).items() if k.startswith(op)) == 20
    _close(out, ref)
    _close(aot, ref)


@pytest.fixture
def cpu_follows_policy(monkeypatch):
    """Make CPU inputs go through the policy (rules / autotune), as CUDA inputs do."""
    monkeypatch.setattr(gk_policy, "_RULED_DEVICE_TYPES", ("cuda", "cpu"))



def _guard_tree(model, x):
    """The text of dynamo's guard tree for model(x) compiled (eager backend), or None where this
    torch does not expose it."""
    torch._dynamo.reset()
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError:
        return None
    with torch.no_grad():
        torch.compile(model, backend="eager", fullgraph=True)(x)
    entries = _debug_get_cache_entry_list(type(model).forward.__code__)
    torch._dynamo.reset()
    if len(entries) != 1 or "tag_safe=" not in str(entries[0].guard_manager):
        return None
    return str(entries[0].guard_manager)


class _StemDw(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 7, padding=3, groups=8)

    def forward(self, x):
        return self.dw(F.gelu(self.stem(x)))


def test_compiled_swapped_layers_keep_dynamos_module_fast_path(cpu_follows_policy):
    """A swapped conv layer that runs torch under compile is guarded like the stock one: its guard
    subtree stays "tag safe" (dynamo then skips an unchanged module's guards by its dict tag), so a
    compiled swapped model checks no more guards per call than the stock one. Reaching torch's
    _conv_forward through a class attribute holding the torch class (or super()) guarded a chain
    through the class's __dict__ / __mro__ per layer and made every layer's subtree unsafe: ConvNeXt-T
    swapped took 25-26 us a call in guards against the stock model's 18 (2-core CPU host)."""
    torch.manual_seed(0)
    stock = _StemDw().eval()
    x = torch.randn(1, 3, 16, 16)
    swapped = torch_ops.swap(copy.deepcopy(stock), policy="rules").model
    assert type(swapped.get_submodule("stem")) is not nn.Conv2d  # converted
    tree_stock, tree_swap = _guard_tree(stock, x), _guard_tree(swapped, x)
    if tree_stock is None or tree_swap is None:
        pytest.skip("this torch does not expose dynamo's guard tree")
    assert "_torch_class" not in tree_swap and "__mro__" not in tree_swap
    for name in ("stem", "dw"):
        lines = [ln for ln in tree_swap.splitlines() if f"_modules['{name}'], " in ln
                 and "source=" in ln]
        # (On failure, the tree's lines that name the layer: CI once read no such line here,
        # which no rerun reproduced.)
        assert lines and "tag_safe=(True," in lines[0], \
            (lines[:1], [ln for ln in tree_swap.splitlines() if name in ln][:8])
    safe = tree_stock.count("tag_safe=(True, True)")
    assert tree_swap.count("tag_safe=(True, True)") >= safe

def test_rules_decide_per_signature_and_compile(cpu_follows_policy, monkeypatch):
    torch.manual_seed(0)
    model = _randomize_bn(ModuleAct("relu")).eval()
    # A rule sending this layer (cpu, conv2d, a 4-channel stem) to gpukern for planes >= 64 px.
    rule = gk_policy.Rule("cpu", "conv2d", "stem", "1", "float32", "contiguous", None, 64,
                          None, "gpukern", "test rule")
    monkeypatch.setattr(gk_policy, "RULES", [rule])
    monkeypatch.setattr(gk_policy, "COMPILED_RULES", [rule])  # the compiled table
    result = torch_ops.swap(model, policy="rules")
    block = result.fused[0].module
    with torch.inference_mode():
        result.model(torch.randn(1, 4, 8, 8))    # 64 px: gpukern
        result.model(torch.randn(1, 4, 4, 4))    # 16 px: no rule -> torch
    paths = {sig[0]: d.path for sig, d in gk_policy.decisions(block).items()}
    assert paths == {(1, 4, 8, 8): "gpukern", (1, 4, 4, 4): "torch"}
    table = result.table()
    assert "bn+relu" in table and "1x4x8x8" in table and "test rule" in table
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm
    for shape, n_gk in (((1, 4, 8, 8), 1), ((1, 4, 4, 4), 0)):
        graphs.clear()
        torch._dynamo.reset()
        x = torch.randn(*shape)
        with torch.inference_mode():
            out = torch.compile(result.model, fullgraph=True, backend=backend)(x)
            _close(out, model(x))
        assert sum(_gpukern_calls(graphs).values()) == n_gk
    torch._dynamo.reset()


def test_compiled_rules_follow_batch_size_under_dynamic_shapes(cpu_follows_policy, monkeypatch):
    """A compiled swapped model called with a second batch size recompiles with a symbolic batch
    dimension (dynamo's automatic dynamic shapes): the compiled choice must still come from the
    rules (here one bounded on the batch-wide output, m_px), not fail on a non-constant size."""
    torch.manual_seed(0)
    model = _randomize_bn(ModuleAct("relu")).eval()
    rule = gk_policy.Rule("cpu", "conv2d", "stem", "1", "float32", "contiguous", None, None,
                          None, "gpukern", "test rule", m_px_min=128)
    monkeypatch.setattr(gk_policy, "RULES", [rule])
    monkeypatch.setattr(gk_policy, "COMPILED_RULES", [rule])  # the compiled table
    result = torch_ops.swap(model, policy="rules")
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm
    torch._dynamo.reset()
    compiled = torch.compile(result.model, fullgraph=True, backend=backend)
    # 8x8 planes: batch 1 is 64 output px (torch), batch 2 and 3 are 128 / 192 (gpukern)
    compiles = 0
    for n, n_gk in ((1, 0), (2, 1), (3, 1)):
        graphs.clear()
        x = torch.randn(n, 4, 8, 8)
        with torch.inference_mode():
            out = compiled(x)
            _close(out, model(x))
        if graphs:  # a (re)compile happened for this call
            compiles += 1
            assert sum(_gpukern_calls(graphs).values()) == n_gk
    assert compiles >= 2  # batch 1, then a recompile for the larger batches
    torch._dynamo.reset()


def test_policy_all_vs_rules_vs_autotune_cpu(cpu_follows_policy):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 32, 32)
    base = _randomize_bn(tvm.resnet18(weights=None)).eval()
    with torch.inference_mode():
        ref = base(x)
    for pol in ("all", "rules", "autotune"):
        model = copy.deepcopy(base)
        result = torch_ops.swap(model, policy=pol, example_inputs=(x,))
        with torch.inference_mode():
            _close(result.model(x), ref)
        rows = [r for r in result.rows() if r["path"] != "-"]
        if pol == "all":
            assert rows == []  # "all" decides nothing: gpukern on every call
        else:
            assert len(rows) == 20
            if pol == "rules":  # no CPU rules in the table: torch everywhere
                assert {r["path"] for r in rows} == {"torch"}
            else:
                assert all(r["reason"].startswith("autotune") for r in rows)
    with pytest.raises(ValueError, match="policy='fast'"):
        torch_ops.swap(copy.deepcopy(base), policy="fast")


def test_channels_last_and_verbose(capsys):
    torch.manual_seed(0)
    model = _randomize_bn(tvm.resnet18(weights=None)).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.inference_mode():
        ref = model(x)
    result = torch_ops.swap(model, cpu=True, channels_last=True, verbose=True,
                            example_inputs=(x,))
    printed = capsys.readouterr().out
    assert "bn+add+relu" in printed and "channels_last" in printed and "layer1.0.conv1" in printed
    block = result.model.get_submodule("layer1.0.conv1")
    assert block.weight.is_contiguous(memory_format=torch.channels_last)
    seen = []
    h = block.register_forward_pre_hook(lambda m, a: seen.append(a[0]))
    with torch.inference_mode():
        out = result.model(x)
    h.remove()
    assert seen[0].is_contiguous(memory_format=torch.channels_last)
    _close(out, ref)


def test_channels_last_auto_leaves_cpu_models_and_validates():
    model = _randomize_bn(tvm.resnet18(weights=None)).eval()
    result = torch_ops.swap(model, cpu=True)  # channels_last="auto": CPU model, left alone
    assert any("channels_last='auto'" in n and "not on a CUDA device" in n for n in result.notes)
    assert result.model.get_submodule("layer1.0.conv1").weight.is_contiguous()
    with pytest.raises(ValueError, match="channels_last='yes'"):
        torch_ops.swap(copy.deepcopy(model), channels_last="yes")


@CUDA_ONLY
@pytest.mark.cuda
def test_channels_last_auto_on_cuda():
    """Dense-conv models move to channels_last on sm_80+ GPUs, depthwise-dominated ones do not;
    values agree with the stock model either way."""
    torch.manual_seed(0)
    dense = _randomize_bn(tvm.resnet18(weights=None)).eval().cuda()
    dw = nn.Sequential(*[nn.Conv2d(16, 16, 3, padding=1, groups=16) for _ in range(3)],
                       nn.Conv2d(16, 8, 1)).eval().cuda()
    big = torch.cuda.get_device_capability() >= (8, 0)
    for model, x, expect in ((dense, torch.randn(2, 3, 64, 64, device="cuda"), big),
                             (dw, torch.randn(2, 16, 20, 20, device="cuda"), False)):
        with torch.inference_mode(), torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            ref = model(x)
        result = torch_ops.swap(copy.deepcopy(model))
        note = [n for n in result.notes if n.startswith("channels_last='auto'")]
        assert len(note) == 1 and ("moved to channels_last" in note[0]) == expect
        seen = []
        first = next(m for m in result.model.modules()
                     if isinstance(m, (nn.Conv2d, FusedConv2d)))
        h = first.register_forward_pre_hook(lambda m, a: seen.append(a[0]))
        with torch.inference_mode():
            out = result.model(x)
        h.remove()
        assert seen[0].is_contiguous(memory_format=torch.channels_last) == expect
        _close(out, ref)


def test_fused_module_cpu_kernels_and_torch_path_agree():
    torch.manual_seed(0)
    for nsp, cls in ((1, FusedConv1d), (2, FusedConv2d)):
        conv = (nn.Conv1d(6, 8, 3, padding=1, stride=2) if nsp == 1
                else nn.Conv2d(6, 8, 3, padding=1, stride=2)).eval()
        x = torch.randn(2, 6, *([12] * nsp))
        for act in torch_ops.nn.ACTIVATIONS:
            m = cls.from_conv(conv, activation=act, residual=True)
            r = torch.randn(2, 8, *([6] * nsp))
            with torch.inference_mode():
                a, b = m._run_gpukern(x, r), m._run_torch(x, r)
            _close(a, b)


# ---------------------------------------------------------------------------------------------
# CUDA

@CUDA_ONLY
@pytest.mark.cuda
@pytest.mark.parametrize("pol", ["all", "rules", "autotune"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v3_small", "convnext_tiny"])
def test_models_cuda(name, dtype, pol):
    ctor, kwargs, expected = MODELS[name]
    torch.manual_seed(0)
    model = _randomize_bn(ctor(weights=None, **kwargs)).eval().cuda().to(dtype)
    x = torch.randn(4, 3, 96, 96, device="cuda", dtype=dtype)
    with torch.inference_mode(), torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        ref = model(x)
    result = torch_ops.swap(model, policy=pol, example_inputs=(x,))
    if result.kept_stock:  # the end-to-end check found the model before swap fastest
        assert pol == "rules" and result.model is model and result.fused == []
        assert not any(torch_class_of(type(m)) for m in model.modules())
    else:
        assert dict(_fused_counts(result)) == expected
    with torch.inference_mode():
        out = result.model(x)
        compiled = torch.compile(result.model, fullgraph=True)(x)
    _close(out, ref, dtype)
    _close(compiled, ref, dtype)
    rows = result.rows()
    if pol != "all":
        assert all(r["path"] != "-" for r in rows), result.table()
    # the end-to-end check runs for "rules" only, and its choice is one of the timed ones
    tuned = result.tuned
    assert (tuned is not None) == (pol == "rules")
    if tuned is not None:
        assert tuned["choice"] in tuned["ms"] and "rules" in tuned["ms"]
        assert any(n.startswith("end-to-end check") for n in result.notes)


@CUDA_ONLY
@pytest.mark.cuda
def test_autotune_cuda_graph_capture_uses_cache():
    torch.manual_seed(0)
    model = _randomize_bn(tvm.resnet18(weights=None)).eval().cuda()
    x = torch.randn(2, 3, 64, 64, device="cuda")
    result = torch_ops.swap(model, policy="autotune", example_inputs=(x,))
    decided = {id(b.module): dict(gk_policy.decisions(b.module)) for b in result.fused}
    assert all(d for d in decided.values())
    with torch.inference_mode():
        ref = result.model(x)
        compiled = torch.compile(result.model, fullgraph=True, mode="reduce-overhead")
        outs = [compiled(x).clone() for _ in range(3)]
    torch.cuda.synchronize()
    for out in outs:
        _close(out, ref)
    # Nothing new was timed under compile / capture.
    assert {id(b.module): dict(gk_policy.decisions(b.module)) for b in result.fused} == decided


@CUDA_ONLY
@pytest.mark.cuda
def test_fused_op_used_on_cuda_when_present():
    if not has_fused_op("conv2d"):
        pytest.skip("this build has no gpukern::conv2d_fused")
    from conftest import OpLog
    torch.manual_seed(0)
    model = _randomize_bn(Residual("left")).eval().cuda()
    x = torch.randn(2, 8, 16, 16, device="cuda")
    with torch.inference_mode():
        ref = model(x)
    result = torch_ops.swap(model, policy="all")
    with torch.inference_mode(), OpLog() as log:
        out = result.model(x)
    assert log.gpukern() == ["gpukern::conv2d_fused"]
    _close(out, ref)



# ---------------------------------------------------------------------------------------------
# swap's end-to-end check (torch_ops.tune), with a stand-in timer on CPU

class _FusedAndPlain(nn.Module):
    """A fused block (conv -> bn -> relu) and a plain conv converted in place."""

    def __init__(self):
        super().__init__()
        self.block = ModuleAct("relu")
        self.plain = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        return self.plain(self.block(x))


@pytest.mark.parametrize("times,choice", [
    ({"rules": 2.0, "fused": 1.5, "all": 1.6, "torch": 2.5}, "fused"),
    ({"rules": 2.0, "fused": 2.0, "all": 2.01, "torch": 2.5}, "rules"),  # a tie keeps the rules
    ({"rules": 2.0, "fused": 2.1, "all": 1.2, "torch": 2.5}, "all"),
    ({"rules": 2.0, "fused": 2.1, "all": 2.2, "torch": 1.0}, "torch"),
])
def test_end_to_end_check_keeps_the_fastest_configuration(cpu_follows_policy, monkeypatch,
                                                           times, choice):
    from torch_ops import tune
    monkeypatch.setattr(tune, "DEVICE_TYPES", ("cpu",))
    monkeypatch.setattr(gk_policy, "RULES", [])  # the table: torch for everything
    torch.manual_seed(0)
    model = _randomize_bn(_FusedAndPlain()).eval()
    x = torch.randn(2, 4, 10, 10)
    with torch.inference_mode():
        ref = model(x)
    result = torch_ops.swap(model, cpu=True, example_inputs=(x,), prune=False)
    assert result.tuned is None  # CPU example inputs: swap does not time anything
    block = result.model.get_submodule("block.conv")
    plain = result.model.get_submodule("plain")
    layers = [block, plain]
    configs = tune.configurations(layers)
    assert list(configs) == ["rules", "fused", "all"]  # "torch" is the rules' configuration
    assert [list(c[id(block)].values()) for c in configs.values()] == [[False], [True], [True]]
    assert [list(c[id(plain)].values()) for c in configs.values()] == [[False], [False], [True]]
    seen = []

    def timer(ls, cfgs, forward):
        seen.append(sorted(cfgs))
        for cfg in cfgs.values():  # each configuration runs and gives the stock answer
            tune._apply(ls, cfg)
            _close(forward(), ref)
        tune._apply(ls, cfgs["rules"])
        return {n: times[n] for n in cfgs}

    with torch.inference_mode():
        out = tune.tune_end_to_end(layers, lambda: result.model(x), timer=timer)
    assert seen == [["all", "fused", "rules"]]
    want = choice if choice in configs else "rules"
    assert out["choice"] == want
    gk = {"rules": (False, False), "fused": (True, False), "all": (True, True)}[want]
    for layer, on in zip(layers, gk):
        assert list(layer._gk_fast.values()) == [on]
        (decision,) = gk_policy.decisions(layer).values()
        assert decision.path == ("gpukern" if on else "torch")
        if want != "rules" and on:
            assert decision.reason.startswith("swap's end-to-end check")
    with torch.inference_mode():
        _close(result.model(x), ref)


@pytest.mark.parametrize("fastest", ["stock", "rules", "torch"])
def test_end_to_end_check_gives_the_stock_model_back(cpu_follows_policy, monkeypatch, fastest):
    """The check also times the model as it was before swap; when that is the fastest, swap
    undoes itself: result.model is the model, every layer its torch class again."""
    import importlib
    from torch_ops import tune
    swap_mod = importlib.import_module("torch_ops.swap")  # the module, not the function
    monkeypatch.setattr(tune, "DEVICE_TYPES", ("cpu",))
    monkeypatch.setattr(swap_mod, "_on_cuda", lambda inputs: True)  # CPU inputs stand in
    torch.manual_seed(0)
    model = _randomize_bn(_FusedAndPlain()).eval()
    x = torch.randn(2, 4, 10, 10)
    with torch.inference_mode():
        ref = model(x)
    classes_in_stock = []

    def timer(ls, cfgs, forward):
        for name, cfg in cfgs.items():
            def run(fwd, name=name):
                if name == "stock":
                    classes_in_stock.append({type(m) for m in model.modules()})
                return fwd()
            _close(tune._measure(ls, cfg, forward, run), ref)  # every configuration: stock's answer
        tune._apply(ls, cfgs["rules"])
        return {n: 1.0 if n == fastest else 2.0 for n in cfgs}

    monkeypatch.setattr(tune, "time_configurations", timer)
    result = torch_ops.swap(model, cpu=True, example_inputs=(x,), channels_last=False,
                            prune=False)
    assert result.tuned is not None and "stock" in result.tuned["ms"]
    # the stock configuration ran the model before swap: BatchNorm there, no gpukern class
    (classes,) = classes_in_stock
    assert nn.BatchNorm2d in classes and not any(torch_class_of(c) for c in classes)
    # "torch" is not timed here (it is the rules' configuration): every configuration then ties
    # with stock, and a tie gives the model back (tune.KEEP_BELOW_STOCK)
    want = fastest if fastest in result.tuned["ms"] else "stock"
    if want == "stock":
        assert result.kept_stock and result.model is model
        assert result.replaced == [] and result.fused == [] and result.pruned == []
        assert type(model.plain) is nn.Conv2d and "_gk_fast" not in model.plain.__dict__
        assert any("gave it back unchanged" in n for n in result.notes)
    else:  # after the stock timing, the swapped model again
        assert not result.kept_stock and result.model is not model
        assert len(result.fused) == 1 and torch_class_of(type(model.plain)) is nn.Conv2d
    assert result.tuned["choice"] == want
    with torch.inference_mode():
        _close(result.model(x), ref)
    # parameters moved to channels_last: the stock model cannot be given back as it was
    model = _randomize_bn(_FusedAndPlain()).eval()
    with torch.inference_mode():
        ref = model(x)  # (the timer's reference: read when it runs)
    result = torch_ops.swap(model, cpu=True, example_inputs=(x,), channels_last=True)
    assert result.tuned is not None and "stock" not in result.tuned["ms"]
    assert not result.kept_stock


def test_end_to_end_check_only_with_rules_on_cuda_inputs(cpu_follows_policy, monkeypatch):
    from torch_ops import tune
    calls = []
    monkeypatch.setattr(tune, "tune_end_to_end", lambda *a, **k: calls.append(1))
    x = torch.randn(2, 4, 10, 10)
    for kwargs in ({}, {"policy": "autotune"}, {"policy": "all"}, {"tune": False}):
        torch_ops.swap(_randomize_bn(_FusedAndPlain()).eval(), cpu=True, example_inputs=(x,),
                       **kwargs)
    assert calls == []  # CPU inputs: never timed
    # what counts as a model whose forwards change state: a BatchNorm in training mode, not the
    # training flag of the containers torch.fx builds around an eval-mode model's leaves
    from torch_ops.swap import _updates_state
    gm = torch.fx.symbolic_trace(tvm.resnet18(weights=None).eval())
    assert any(m.training for m in gm.modules()) and not _updates_state(gm)
    gm.get_submodule("layer1.0.bn1").train()
    assert _updates_state(gm)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
def test_end_to_end_check_skips_models_in_training_mode(monkeypatch):
    from torch_ops import tune
    calls = []
    monkeypatch.setattr(tune, "tune_end_to_end", lambda *a, **k: calls.append(1))
    x = torch.randn(2, 4, 10, 10, device="cuda")
    model = _randomize_bn(_FusedAndPlain()).cuda().eval()
    model.block.bn.train()  # a BatchNorm in training mode: its forwards update running stats
    result = torch_ops.swap(model, example_inputs=(x,))
    assert calls == [] and result.tuned is None
    assert any("training mode" in n for n in result.notes)
    # an fx-traced eval model (its GraphModule's containers are in training mode) is checked
    model = tvm.resnet18(weights=None).cuda().eval()
    torch_ops.swap(model, example_inputs=(torch.randn(1, 3, 32, 32, device="cuda"),))
    assert calls == [1]
    torch_ops.swap(_randomize_bn(_FusedAndPlain()).cuda().eval(), example_inputs=(x,))
    assert calls == [1, 1]


def test_fused_block_eager_call_follows_its_settings():
    """Eager calls of a fused block use the op and settings cached at the first call
    (_eager_call); a reassigned setting must reach the next call."""
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 6, 3, padding=1)
    block = FusedConv2d.from_conv(conv, activation="relu")
    x = torch.randn(2, 4, 9, 9)
    w, b = conv.weight.detach(), conv.bias.detach()
    with torch.inference_mode():
        _close(block(x), F.relu(F.conv2d(x, w, b, 1, 1)))
        if has_fused_op("conv2d"):
            assert "_gk_call" in block.__dict__  # the cached call ran
        block.activation = "sigmoid"
        _close(block(x), torch.sigmoid(F.conv2d(x, w, b, 1, 1)))
        block.stride = (2, 2)
        _close(block(x), torch.sigmoid(F.conv2d(x, w, b, 2, 1)))
        block.padding = (0, 1)
        _close(block(x), torch.sigmoid(F.conv2d(x, w, b, 2, (0, 1))))
        block.dilation = (2, 1)
        _close(block(x), torch.sigmoid(F.conv2d(x, w, b, 2, (0, 1), (2, 1))))
        block.padding = "valid"  # a string: the general path
        block.stride = (1, 1)
        _close(block(x), torch.sigmoid(F.conv2d(x, w, b, 1, "valid", (2, 1))))
        res = torch.randn(2, 6, 5, 7)
        _close(block(x, res), torch.sigmoid(F.conv2d(x, w, b, 1, "valid", (2, 1)) + res))


def test_end_to_end_check_rounds():
    from torch_ops import tune
    assert tune.rounds_for(5, 10, 0.3) == tune.MAX_ROUNDS  # a fast forward: the most
    assert tune.rounds_for(5, 1, 20.0) == int(tune.CHECK_MS / 100)  # Conformer at batch 1: 20
    assert tune.ROUNDS < int(tune.CHECK_MS / 100) < tune.MAX_ROUNDS
    assert tune.rounds_for(5, 1, 500.0) == tune.ROUNDS  # a slow forward: the fewest


@pytest.mark.parametrize("times,vs_stock,choice", [
    ({"stock": 1.0, "rules": 0.99, "fused": 1.2}, None, "stock"),  # 1% faster: within the margin
    ({"stock": 1.0, "rules": 0.95, "fused": 1.2}, None, "rules"),
    ({"stock": 1.0, "rules": 1.1, "fused": 0.9}, None, "fused"),
    ({"stock": 0.5, "rules": 1.0, "fused": 1.2}, None, "stock"),
    # the paired ratio decides where the timer kept one, not the two medians
    ({"stock": 1.0, "rules": 0.95}, {"stock": 1.0, "rules": 0.99}, "stock"),
    ({"stock": 1.0, "rules": 1.0}, {"stock": 1.0, "rules": 0.9}, "rules"),
])
def test_end_to_end_check_keeps_stock_within_the_margin(times, vs_stock, choice):
    from torch_ops import tune
    t = tune.Times(times)
    t.vs_stock = vs_stock
    assert tune.choose(t) == choice


def test_end_to_end_timer_pairs_each_round_with_stock(monkeypatch):
    """time_configurations keeps, per configuration, the median over the rounds of its time over
    stock's in the same round: a configuration that is faster in every round pairs below 1.0
    even where a slow spell moves its median above stock's."""
    from torch_ops import tune
    # one warm-up call each, then 9 rounds
    clock = {"rules": iter([1.0] + [0.9, 0.9, 0.9, 2.7, 2.7, 2.7, 0.9, 2.7, 2.7]),
             "stock": iter([1.0] + [1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 1.0, 3.0, 3.0])}
    monkeypatch.setattr(tune, "ROUNDS", 9)
    monkeypatch.setattr(tune, "MAX_ROUNDS", 9)

    def measure(layers, config, forward, how):
        return next(clock[config])

    monkeypatch.setattr(tune, "_measure", measure)
    monkeypatch.setattr(tune, "_apply", lambda layers, config: None)
    times = tune.time_configurations([], {"rules": "rules", "stock": "stock"}, lambda: None)
    assert times["rules"] == pytest.approx(2.7) and times["stock"] == pytest.approx(3.0)
    assert times.vs_stock["rules"] == pytest.approx(0.9)
    assert times.vs_stock["stock"] == pytest.approx(1.0)
    assert times.faster_than_stock == {"rules": 1.0, "stock": 0.0}
    assert tune.choose(times) == "rules"


def test_end_to_end_check_wants_most_rounds_faster_than_stock(monkeypatch):
    """A configuration whose paired median is below the margin but which ran faster than stock
    in only 5 of 9 rounds (a few lucky rounds on a noisy host) gives the stock model back."""
    from torch_ops import tune
    clock = {"rules": iter([1.0] + [0.9, 0.9, 0.9, 0.9, 0.9, 1.2, 1.2, 1.2, 1.2]),
             "stock": iter([1.0] + [1.0] * 9)}
    monkeypatch.setattr(tune, "ROUNDS", 9)
    monkeypatch.setattr(tune, "MAX_ROUNDS", 9)
    monkeypatch.setattr(tune, "_measure", lambda layers, config, forward, how: next(clock[config]))
    monkeypatch.setattr(tune, "_apply", lambda layers, config: None)
    times = tune.time_configurations([], {"rules": "rules", "stock": "stock"}, lambda: None)
    assert times.vs_stock["rules"] == pytest.approx(0.9)
    assert times.faster_than_stock["rules"] == pytest.approx(5 / 9)
    assert tune.choose(times) == "stock"
    times.faster_than_stock["rules"] = 7 / 9  # 7 of 9 rounds: kept
    assert tune.choose(times) == "rules"
