"""The default policy's per-call cost: a swapped layer whose policy says torch runs what the stock
layer runs, with a bounded amount of Python around it, and compiles to the same graphs.

Counted, not only timed: the Python-level calls one forward makes (``sys.setprofile``) are
deterministic; the wall-time check is loose (medians of interleaved runs, < 2x stock on a tiny
convolution) so a loaded machine does not flake it."""
import copy
import importlib.util
import os
import statistics
import time

import pytest
import torch
import torch.nn as nn

import torch_ops
from torch_ops import policy as gk_policy

tvm = pytest.importorskip("torchvision.models")


@pytest.fixture(params=[False, True], ids=["cpu-default", "cpu-follows-rules"])
def follows(request, monkeypatch):
    """CPU inputs either skip the policy (swap's default on CPU: torch) or follow it as CUDA
    inputs do (the rule table has no CPU rules: torch, through the lookup and cache)."""
    if request.param:
        monkeypatch.setattr(gk_policy, "_RULED_DEVICE_TYPES", ("cuda", "cpu"))
    return request.param


# The Python-call counter of benchmarks/policy_overhead.py (the benchmark reports what this checks).
_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                     "policy_overhead.py")
_spec = importlib.util.spec_from_file_location("policy_overhead", _PATH)
_overhead = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_overhead)
_calls = _overhead.python_calls


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


def test_torch_policy_layer_python_calls(follows):
    conv = nn.Conv2d(4, 4, 1).eval()
    swapped = copy.deepcopy(conv)
    torch_ops.swap(swapped)
    x = torch.randn(1, 4, 4, 4)
    with torch.inference_mode():
        torch.testing.assert_close(swapped(x), conv(x))  # decided (torch), cached
        assert gk_policy.decisions(swapped)  # the table still sees the decision
        stock_n, swap_n = _calls(lambda: conv(x)), _calls(lambda: swapped(x))
    # The cached decision: is_compiling (2 Python frames), two dict lookups, x.stride().
    assert swap_n <= stock_n + 5, (stock_n, swap_n)


def test_torch_policy_fused_block_no_more_calls_than_stock(follows):
    block = ConvBnRelu().eval()
    fused = torch_ops.swap(copy.deepcopy(block)).model
    x = torch.randn(1, 4, 4, 4)
    with torch.inference_mode():
        torch.testing.assert_close(fused(x), block(x), rtol=1e-4, atol=1e-5)
        assert _calls(lambda: fused(x)) <= _calls(lambda: block(x))


def test_torch_policy_layer_wall_time(follows):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        conv = nn.Conv2d(4, 4, 1).eval()
        swapped = copy.deepcopy(conv)
        torch_ops.swap(swapped)
        x = torch.randn(1, 4, 4, 4)
        fns = (lambda: conv(x), lambda: swapped(x))
        samples = ([], [])
        with torch.inference_mode():
            for f in fns:
                for _ in range(50):
                    f()
            for _ in range(25):
                for i, f in enumerate(fns):
                    t0 = time.perf_counter()
                    for _ in range(40):
                        f()
                    samples[i].append(time.perf_counter() - t0)
        stock, swap = (statistics.median(s) for s in samples)
        assert swap < 2 * stock, f"swapped {swap / stock:.2f}x the stock layer's time"
    finally:
        torch.set_num_threads(threads)


def test_cache_survives_deepcopy_and_unswap(monkeypatch):
    monkeypatch.setattr(gk_policy, "_RULED_DEVICE_TYPES", ("cuda", "cpu"))
    conv = nn.Conv2d(4, 4, 1).eval()
    torch_ops.swap(conv)
    x = torch.randn(1, 4, 4, 4)
    with torch.inference_mode():
        conv(x)
        assert list(conv._gk_fast.values()) == [False]
        twin = copy.deepcopy(conv)
        twin(torch.randn(1, 4, 5, 5))  # a new signature: the copy gets its own id and caches
        assert twin._gk_uid != conv._gk_uid and len(conv._gk_fast) == 1
    torch_ops.unswap(conv)
    assert "_gk_fast" not in conv.__dict__ and type(conv) is nn.Conv2d


def _graphs(model, x):
    torch._dynamo.reset()
    with torch.inference_mode():
        ex = torch._dynamo.explain(model)(x)
    torch._dynamo.reset()
    targets = [str(n.target) for g in ex.graphs for n in g.graph.nodes
               if n.op == "call_function"]
    return ex.graph_count, ex.graph_break_count, targets


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "convnext_tiny"])
def test_compiled_same_graphs_as_stock(name, follows):
    torch.manual_seed(0)
    stock = getattr(tvm, name)(weights=None).eval()
    x = torch.randn(1, 3, 32, 32)
    swapped = torch_ops.swap(copy.deepcopy(stock), example_inputs=(x,)).model
    s_graphs, s_breaks, s_targets = _graphs(stock, x)
    w_graphs, w_breaks, w_targets = _graphs(swapped, x)
    assert (w_graphs, w_breaks) == (s_graphs, s_breaks) == (1, 0)
    # Policy torch everywhere: torch's own convolutions, as many as stock, no gpukern op.
    n_conv = sum(1 for t in s_targets if "conv2d" in t)
    assert sum(1 for t in w_targets if "conv2d" in t and "gpukern" not in t) == n_conv
    assert not any("gpukern" in t for t in w_targets)
    torch.compile(swapped, fullgraph=True, backend="eager")(x)  # no break under fullgraph
    torch._dynamo.reset()


def test_compiled_channels_last_swap_is_one_graph():
    """swap(channels_last=True) converts inputs in a forward pre-hook; under torch.compile the
    hook runs eagerly, so the compiled model is one graph with no break (dynamo compiled the hook
    as a second graph before)."""
    torch.manual_seed(0)
    stock = tvm.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.inference_mode():
        ref = stock(x)
    swapped = torch_ops.swap(copy.deepcopy(stock), cpu=True, channels_last=True,
                             example_inputs=(x,)).model
    graphs, breaks, targets = _graphs(swapped, x)
    assert (graphs, breaks) == (1, 0)
    seen = []
    h = swapped.register_forward_pre_hook(lambda m, a: seen.append(a[0]))  # after swap's hook
    torch._dynamo.reset()
    with torch.inference_mode():
        out = torch.compile(swapped, fullgraph=True, backend="eager")(x)
    h.remove()
    torch._dynamo.reset()
    assert seen and all(t.is_contiguous(memory_format=torch.channels_last) for t in seen)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("with_rule", [False, True], ids=["no-rule", "depthwise-rule"])
def test_compiled_guards_per_swapped_layer(with_rule, monkeypatch):
    """Every call of a compiled model evaluates the guards dynamo installed. A swapped layer kept
    converted (prune=False) adds a few (its uid, policy and CPU flag, the conv method), not one per
    attribute read of the rule lookup traced op by op (18 a layer before policy._compiled_plan,
    about 130 us a forward of swapped ConvNeXt-T on a 2-core host). With a rule that leaves the
    choice to the input's sizes (the depthwise 7x7 layers here), the bounds are tested in traced
    code on the intermediate tensors' static sizes, which adds no guard."""
    monkeypatch.setattr(gk_policy, "_RULED_DEVICE_TYPES", ("cuda", "cpu"))
    if with_rule:
        rule = gk_policy.Rule("cpu", "conv2d", "depthwise", "1", "float32", "*", None,
                              None, None, "gpukern", "test rule", taps_min=49)
        monkeypatch.setattr(gk_policy, "COMPILED_RULES", [rule])
    torch.manual_seed(0)
    stock = tvm.convnext_tiny(weights=None).eval()
    x = torch.randn(1, 3, 32, 32)
    result = torch_ops.swap(copy.deepcopy(stock), example_inputs=(x,), prune=False)
    layers = len(result.replaced) + len(result.fused)
    assert layers == 22

    def guards(model):
        torch._dynamo.reset()
        with torch.inference_mode():
            ex = torch._dynamo.explain(model)(x)
        torch._dynamo.reset()
        assert (ex.graph_count, ex.graph_break_count) == (1, 0)
        ops = [str(n.target) for g in ex.graphs for n in g.graph.nodes if n.op == "call_function"]
        return len(ex.out_guards), sum(1 for t in ops if "gpukern" in t)

    stock_guards, _ = guards(stock)
    swap_guards, gk_ops = guards(result.model)
    assert gk_ops == (18 if with_rule else 0)  # the rule's layers on gpukern, compiled
    # per layer its uid, policy and CPU flag and torch's or gpukern's conv method; once per model
    # the globals the choice reads (about 30)
    assert swap_guards - stock_guards <= 5 * layers + 40, (swap_guards, stock_guards)


def test_compiled_plan_matches_the_traced_lookup(monkeypatch):
    """policy.compiled_choice (the constant plan, then its bounds tested on x) decides exactly as
    the rule lookup it replaces (_compiled_rules_choice), over the shipped COMPILED_RULES (read
    as this CPU's arch), for many layers and inputs: kinds, strides, dtypes, layouts, sizes."""
    monkeypatch.setattr(gk_policy, "_RULED_DEVICE_TYPES", ("cuda", "cpu"))
    arch = {r.arch for r in gk_policy.COMPILED_RULES}.pop()
    monkeypatch.setattr(gk_policy, "_arch", lambda device_type, index: arch)
    gen = torch.Generator().manual_seed(5)
    checked = gpukern = 0
    for i in range(400):
        pick = lambda seq: seq[int(torch.randint(len(seq), (1,), generator=gen))]  # noqa: E731
        cin = pick([3, 16, 24, 64, 96, 120, 160, 256, 384, 512, 672, 960])
        k = pick([1, 3, 5, 7])
        stride = pick([1, 2])
        groups = pick([1, cin])
        cout = cin if groups == cin else pick([16, 64, 160, 256, 512])
        conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False)
        layer = torch_ops.nn.Conv2d.from_module(conv)
        gk_policy.register(layer, "rules", False)
        n, hw = pick([1, 8, 16]), pick([7, 14, 28, 56, 112])
        dtype = pick([torch.float32, torch.bfloat16])
        x = torch.empty(n, cin, hw, hw, dtype=dtype)
        layout = pick(["contiguous", "channels_last", "strided"])
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        elif layout == "strided":
            x = torch.empty(n, cin, hw, hw + 1, dtype=dtype)[..., :hw]
        want = gk_policy._compiled_rules_choice(layer, x)
        assert gk_policy.compiled_choice(layer, x) == want, (cin, cout, k, stride, groups, n,
                                                             hw, dtype, layout)
        checked += 1
        gpukern += want
    assert checked == 400 and gpukern > 0  # some of the draws do match a gpukern rule
