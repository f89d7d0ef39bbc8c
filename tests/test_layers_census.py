"""benchmarks/layers.py on the CPU: the layer census (hooks, dedup, counts, layouts, what follows
each conv) on a hand-made net and on torchvision's MobileNetV3-Small, and one census row per layer
(correctness, CPU timing, the fused path with and without a fused op)."""
import argparse
import collections
import importlib.util
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                     "layers.py")
_spec = importlib.util.spec_from_file_location("census_layers", _PATH)
layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layers)


class Tiny(nn.Module):
    """Conv1d/Conv2d of various settings; `a` and `b` share their settings and input shape, `b`
    runs twice."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU(inplace=True)
        self.a = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn_a = nn.BatchNorm2d(8)
        self.b = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.dw = nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2, groups=8)
        self.refl = nn.Conv2d(8, 4, 3, padding=1, padding_mode="reflect")
        self.c1 = nn.Conv1d(4, 6, 5, padding="same", bias=False)

    def forward(self, x):
        x = self.act(self.bn(self.stem(x)))
        y = F.relu(self.bn_a(self.a(x)) + x)
        y = self.b(self.b(y))
        y = torch.sigmoid(self.dw(y))
        z = torch.flatten(self.refl(y), 2)
        return F.silu(self.c1(z))


def _by_name(census):
    return {lay["names"][0]: lay for lay in census}


@pytest.mark.parametrize("fmt", ["nchw", "channels_last"])
def test_tiny_census(fmt):
    model, x = layers.in_format(Tiny().eval(), (torch.randn(2, 3, 8, 8),), fmt)
    census = layers.census(model, x)
    assert [lay["names"] for lay in census] == [["stem"], ["a", "b"], ["dw"], ["refl"], ["c1"]]
    assert [lay["count"] for lay in census] == [1, 3, 1, 1, 1]
    assert census[0]["follow_source"] == "fx"
    lay = _by_name(census)
    assert lay["stem"]["input_shape"] == [2, 3, 8, 8]
    assert lay["stem"]["layout"] == ("channels_last" if fmt == "channels_last" else "contiguous")
    assert lay["stem"]["kind"] == "dense" and lay["dw"]["kind"] == "depthwise"
    assert (lay["dw"]["stride"], lay["dw"]["padding"], lay["dw"]["dilation"],
            lay["dw"]["groups"], lay["dw"]["bias"]) == ([2, 2], [2, 2], [2, 2], 8, True)
    assert lay["dw"]["input_shape"] == [2, 8, 8, 8]
    assert lay["refl"]["padding_mode"] == "reflect" and lay["refl"]["input_shape"] == [2, 8, 4, 4]
    assert lay["c1"]["op"] == "conv1d" and lay["c1"]["padding"] == "same"
    assert lay["c1"]["input_shape"] == [2, 4, 16] and lay["c1"]["kernel"] == [5]

    def eps(name):
        return {e["follow"]: (e["bias"], e["residual"], e["act"], e["count"])
                for e in lay[name]["epilogues"]}
    assert eps("stem") == {"bn>relu": (True, False, "relu", 1)}
    assert eps("a") == {"bn>add>relu": (True, True, "relu", 1), "": (False, False, None, 2)}
    assert eps("dw") == {"sigmoid": (True, False, "sigmoid", 1)}
    assert eps("refl") == {"": (True, False, None, 1)}
    assert eps("c1") == {"silu": (False, False, "silu", 1)}


def test_sequential_fallback():
    """Models fx cannot trace: what follows comes from the next modules of an nn.Sequential."""
    seq = nn.Sequential(nn.Conv1d(4, 4, 3, groups=4), nn.BatchNorm1d(4), nn.Dropout(),
                        nn.SiLU(), nn.Conv1d(4, 2, 1), nn.GLU(dim=1))
    follow = layers.follow_sequential(seq)
    assert follow == {"0": [["bn", "silu"]], "4": [["glu"]]}
    census = layers.census(seq.eval(), (torch.randn(1, 4, 10),), follow=follow)
    assert [(lay["count"], lay["epilogues"][0]["follow"], lay["epilogues"][0]["act"])
            for lay in census] == [(1, "bn>silu", "silu"), (1, "glu", None)]


def _args():
    return argparse.Namespace(gpu=False, device="cpu", timeout=30.0)


def _fake_fused(x, w, b, stride, padding, dilation, groups, activation, residual):
    conv = F.conv1d if w.dim() == 3 else F.conv2d
    y = conv(x, w, b, stride, padding, dilation, groups)
    if residual is not None:
        y = y + residual
    return layers.apply_act(y, None if activation == "none" else activation, inplace=False)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rows(dtype):
    model, x = layers.in_format(Tiny().eval(), (torch.randn(2, 3, 8, 8),), "channels_last")
    census = layers.census(model, x)
    timer = layers.Timer(gpu=False, quick=True)
    fused_ops = {"conv1d": _fake_fused, "conv2d": _fake_fused}
    for lay in census:
        for ops in ({}, fused_ops):
            row = layers.run_layer(lay, dtype, timer, _args(), ops)
            assert row["status"] == "ok", row
            assert row["gpukern_err"] <= row["tol"] and row["torch_ms"]["aten-cpu"] > 0
            assert row["speedup"] > 0 and isinstance(row["algorithm"], str)
            fused = [e for e in lay["epilogues"] if layers.fusable(e)]
            assert [f["follow"] for f in row["fused"]] == [e["follow"] for e in fused]
            for f in row["fused"]:
                assert f["torch_unfused_ms"] > 0 and f["torch_err"] <= row["tol"]
                assert f["status"] == ("ok" if ops else "n/a"), f
                if ops:
                    assert f["gpukern_err"] <= row["tol"] and f["speedup"] > 0
    row["model"], row["format"] = "tiny", "channels_last"
    (total,) = layers.totals([row])
    assert total["complete"] and total["gpukern_fused_ms"] is not None
    assert "tiny" in layers.markdown(dict(info=_info(), rows=[row], totals=[total]))


def _info():
    return dict(device="cpu", device_name="CPU", torch=torch.__version__, cuda=None, cudnn=None,
                gpukern_cuda=False, archs="", cudnn_allow_tf32=True, matmul_allow_tf32=False,
                fused_op=None, timing="-", time="-", git="-", inputs={})


def test_mobilenet_v3_small():
    tvm = pytest.importorskip("torchvision.models")
    model = tvm.mobilenet_v3_small(weights=None).eval()
    convs = [n for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    x = torch.randn(2, 3, 64, 64)
    # an independent count of the distinct calls: settings, input shape and strides
    calls = collections.Counter()
    handles = [m.register_forward_pre_hook(lambda m, a: calls.update([(
        tuple(a[0].shape), a[0].stride(), m.out_channels, m.kernel_size, m.stride, m.padding,
        m.groups, m.bias is not None)])) for m in model.modules() if isinstance(m, nn.Conv2d)]
    model(x)
    for h in handles:
        h.remove()
    census = layers.census(model, (x,))
    # every conv runs once per forward; identical calls are folded together
    assert sum(lay["count"] for lay in census) == len(convs) == sum(calls.values()) == 52
    assert sorted(n for lay in census for n in lay["names"]) == sorted(convs)
    assert len(census) == len({lay["key"] for lay in census}) == len(calls) == 41
    assert sorted(lay["count"] for lay in census) == sorted(calls.values())
    kinds = collections.Counter(lay["kind"] for lay in census)
    assert kinds == {"dense": 32, "depthwise": 9}
    # the last 1x1 (96 -> 576) has the settings and input of blocks 10 and 11's expansions
    last = next(lay for lay in census if "features.12.0" in lay["names"])
    assert last["names"] == ["features.10.block.0.0", "features.11.block.0.0", "features.12.0"]
    assert last["epilogues"] == [dict(follow="bn>hardswish", bias=True, residual=False,
                                      act="hardswish", count=3)]
    first = census[0]
    assert first["names"] == ["features.0.0"] and first["input_shape"] == [2, 3, 64, 64]
    assert first["epilogues"][0]["follow"] == "bn>hardswish"
    se = _by_name(census)["features.1.block.1.fc1"]
    assert se["input_shape"][2:] == [1, 1] and se["epilogues"][0]["follow"] == "relu"


def test_plan():
    assert layers.plan(0.01, 30, 60.0) == (20, 30)           # short layers: 20 calls a graph
    assert layers.plan(4.0, 30, 60.0) == (5, 30)             # a replay stays near 20 ms
    assert layers.plan(100.0, 30, 60.0) == (1, 30)
    assert layers.plan(100.0, 30, 2.0) == (1, 19)            # fewer replays to fit the time left
    with pytest.raises(TimeoutError):
        layers.plan(1000.0, 30, 2.0)


def test_gpu_timer_path(monkeypatch):
    """The GPU branch of Timer without a GPU: a flushed estimate, then the graph of the planned
    size with the L2 flushed before each replay; flushed single calls where capture fails."""
    seen = []

    def fake_time_cuda(fn, reps=30, warmup=5, flush=True, max_seconds=3.0):
        seen.append(("events", reps, flush))
        return 2.0

    def fake_graph(fn, calls=100, reps=10, flush=False):
        seen.append(("graph", calls, reps, flush))
        if fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        return 1.5

    monkeypatch.setattr(layers, "time_cuda", fake_time_cuda)
    monkeypatch.setattr(layers, "time_cuda_graph", fake_graph)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    timer = layers.Timer(gpu=True, quick=False)
    fail = False
    deadline = layers.time.perf_counter() + 60
    assert timer(lambda: None, deadline) == (1.5, "graph 10x30")
    assert seen == [("events", 3, True), ("graph", 10, 30, True)]
    fail, seen[:] = True, []
    assert timer(lambda: None, deadline) == (2.0, "events x30")
    assert seen[-1] == ("events", 30, True)
    with pytest.raises(TimeoutError):
        timer(lambda: None, layers.time.perf_counter() - 1)


def test_best_torch_settings():
    """On a GPU torch runs with cudnn.benchmark off and on (the faster kept, the flag restored)."""
    def timer(fn, deadline):
        return (1.0 if torch.backends.cudnn.benchmark else 2.0), "how"
    old = torch.backends.cudnn.benchmark
    times, hows, best = layers.best_torch(timer, None, True, 0)
    assert times == {"cudnn": 2.0, "cudnn.bm": 1.0} and best == "cudnn.bm"
    assert torch.backends.cudnn.benchmark == old
    assert layers.best_torch(timer, None, False, 0)[2] == "aten-cpu"


def test_census_keeps_the_conv_race():
    """The census times what a user's call runs, the race against cuDNN included: neither its own
    import nor its naming of the result files (run.result_name, imported from benchmarks/run.py,
    which turns the race off for its own process in main()) may set GPUKERN_CONV_RACE. (It did:
    run.py set it at import, and the census ran without the race.)"""
    import subprocess
    import sys
    bench = os.path.dirname(_PATH)
    script = ("import os, sys; sys.path.insert(0, {b!r}); import layers; "
              "layers.result_name({{'gpu': 'NVIDIA H100 80GB HBM3'}}); "
              "print('RACE=' + str(os.environ.get('GPUKERN_CONV_RACE')))").format(b=bench)
    env = {k: v for k, v in os.environ.items() if k != "GPUKERN_CONV_RACE"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "RACE=None" in out.stdout, out.stdout
