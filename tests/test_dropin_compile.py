"""A swapped model and the override mode under torch.compile: one graph (fullgraph=True, no
graph break) whose convolutions and reductions are gpukern ops, the same outputs as eager; on
CUDA also mode="reduce-overhead" (CUDA graphs)."""
import contextlib

import pytest
import torch
import torch.nn.functional as F

import torch_ops
from conftest import HAS_CUDA


class Tiny(torch.nn.Module):
    """Depthwise + pointwise Conv1d (Conformer-like), a reflect-padded depthwise Conv2d, a mean
    and an amax: every routed family in a few layers."""

    def __init__(self):
        super().__init__()
        self.dw = torch.nn.Conv1d(8, 8, 7, padding=3, groups=8)
        self.pw = torch.nn.Conv1d(8, 4, 1)
        self.img = torch.nn.Conv2d(4, 4, 3, padding=1, groups=4, padding_mode="reflect")

    def forward(self, x):
        y = self.pw(F.silu(self.dw(x)))
        z = self.img(y.unsqueeze(-1).expand(-1, -1, -1, 3).contiguous())
        return z.mean(dim=(2, 3)) + y.amax(-1)


class Capture:
    """A compile backend that keeps the FX graphs it is given and runs them as they are."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm

    def gpukern_ops(self):
        return sorted({str(n.target) for gm in self.graphs for n in gm.graph.nodes
                       if n.op == "call_function" and str(n.target).startswith("gpukern.")})


def _model(device):
    torch.manual_seed(0)
    return Tiny().to(device).eval()


def test_swapped_model_compiles_fullgraph():
    model, x = _model("cpu"), torch.randn(2, 8, 32)
    with torch.no_grad():
        ref = model(x)
        torch_ops.swap(model, cpu=True)
        torch._dynamo.reset()
        cap = Capture()
        out = torch.compile(model, fullgraph=True, backend=cap)(x)
        torch._dynamo.reset()
        aot = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    assert len(cap.graphs) == 1
    assert cap.gpukern_ops() == ["gpukern.conv1d", "gpukern.conv2d"]
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(aot, ref, rtol=1e-4, atol=1e-5)


def test_override_compiles_fullgraph():
    model, x = _model("cpu"), torch.randn(2, 8, 32)
    torch._dynamo.reset()
    with torch.no_grad():
        ref = model(x)
        with torch_ops.enabled(cpu=True):
            explain = torch._dynamo.explain(model)(x)
            torch._dynamo.reset()
            cap = Capture()
            out = torch.compile(model, fullgraph=True, backend=cap)(x)
            torch._dynamo.reset()
            aot = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    assert explain.graph_break_count == 0 and explain.graph_count == 1
    assert cap.gpukern_ops() == ["gpukern.amax", "gpukern.conv1d", "gpukern.conv2d",
                                 "gpukern.mean.dim"]
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(aot, ref, rtol=1e-4, atol=1e-5)


def test_override_compiled_falls_through_with_grad():
    """Under grad mode with parameters that require grad, the traced graph is torch's own and
    trains as usual."""
    model, x = _model("cpu"), torch.randn(2, 8, 32)
    torch._dynamo.reset()
    cap = Capture()
    with torch_ops.enabled():
        out = torch.compile(model, fullgraph=True, backend=cap)(x)
    assert cap.gpukern_ops() == []
    out.sum().backward()
    assert model.dw.weight.grad is not None


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("how", ["swap", "override"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reduce_overhead_cuda_graphs(how, dtype):
    model = _model("cuda").to(dtype)
    x = torch.randn(4, 8, 256, device="cuda", dtype=dtype)
    torch._dynamo.reset()
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-5)
    with torch.inference_mode():
        # Stock in true fp32 (cuDNN's default TF32 would differ from gpukern by ~1e-4).
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            stock = model(x)
        if how == "swap":
            assert len(torch_ops.swap(model)) == 3
        with torch_ops.enabled() if how == "override" else contextlib.nullcontext():
            eager = model(x)
            compiled = torch.compile(model, fullgraph=True, mode="reduce-overhead")
            outs = [compiled(x).clone() for _ in range(4)]  # warm-up, record, replays
        torch.cuda.synchronize()
    torch.testing.assert_close(eager, stock, **tol)
    for out in outs:
        torch.testing.assert_close(out, eager, **tol)
