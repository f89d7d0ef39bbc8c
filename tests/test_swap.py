"""torch_ops.swap: in-place conversion of a model's Conv1d/Conv2d layers, keeping parameters,
hooks and training flags; layers gpukern cannot run are left alone with a reason."""
import pytest
import torch

import torch_ops
from conftest import DEVICE_PARAMS, HAS_CUDA


class MyConv2d(torch.nn.Conv2d):
    def forward(self, x):
        return super().forward(x) * 2


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = torch.nn.Conv1d(8, 8, 5, padding=2, groups=8)
        self.pw = torch.nn.Conv1d(8, 4, 1)
        self.act = torch.nn.GELU()

    def forward(self, x):
        return self.pw(self.act(self.dw(x)))


class Net(torch.nn.Module):
    """Nested blocks, a layer shared under two names, a Conv2d with reflect padding, a subclass
    of nn.Conv2d and a layer gpukern does not replace (ConvTranspose1d)."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.blocks[1].pw = torch.nn.Conv1d(8, 4, 1)
        self.proj = torch.nn.Conv1d(4, 8, 3, padding=1)
        self.proj_again = self.proj
        self.img = torch.nn.Sequential(
            torch.nn.Conv2d(1, 3, 3, padding=1, padding_mode="reflect"),
            MyConv2d(3, 3, 3, padding=1, groups=3),
            torch.nn.Conv2d(3, 1, (3, 1), stride=(2, 1)))
        self.up = torch.nn.ConvTranspose1d(4, 4, 2, stride=2)

    def forward(self, x):
        y = self.blocks[0](x)
        y = self.blocks[1](self.proj(y))
        y = self.up(y)
        return self.img(y.unsqueeze(1)).mean(dim=(1, 2))


def _net(device, seed=0):
    torch.manual_seed(seed)
    return Net().to(device)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_swap_replaces_in_place_and_matches(device):
    net = _net(device).eval()
    x = torch.randn(2, 8, 24, device=device)
    with torch.no_grad():
        ref = net(x)
    params_before = [(n, p) for n, p in net.named_parameters()]
    keys_before = list(net.state_dict())
    layer_ids = {n: id(m) for n, m in net.named_modules()}

    result = torch_ops.swap(net, cpu=True)

    names = [n for n, _ in result.replaced]
    assert names == ["blocks.0.dw", "blocks.0.pw", "blocks.1.dw", "blocks.1.pw", "proj",
                     "img.0", "img.2"]
    assert len(result) == 7
    assert [n for n, _ in result.skipped] == ["img.1"]
    assert "subclasses torch.nn.Conv2d" in result.skipped[0][1]
    assert "img.1" in result.summary()
    for n, layer in result.replaced:
        assert type(layer) in (torch_ops.nn.Conv1d, torch_ops.nn.Conv2d)
        assert net.get_submodule(n) is layer and id(layer) == layer_ids[n]
    assert net.proj_again is net.proj and type(net.proj_again) is torch_ops.nn.Conv1d
    assert type(net.img[1]) is MyConv2d and type(net.up) is torch.nn.ConvTranspose1d
    assert all(p is q for (_, p), (_, q) in zip(params_before, net.named_parameters()))
    assert list(net.state_dict()) == keys_before

    with torch.no_grad():
        out = net(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)

    result.restore()
    assert type(net.proj) is torch.nn.Conv1d and type(net.img[0]) is torch.nn.Conv2d
    assert torch_ops.swap(net).replaced and torch_ops.unswap(net) == 7


def test_swap_keeps_hooks_and_training_flag():
    net = _net("cpu").train()
    net.blocks[1].eval()
    calls = []
    h1 = net.proj.register_forward_hook(lambda m, i, o: calls.append("post"))
    net.blocks[0].dw.register_forward_pre_hook(lambda m, i: calls.append("pre"))
    net.img[0].register_forward_hook(lambda m, a, k, o: calls.append("kw"), with_kwargs=True)
    modes = {n: m.training for n, m in net.named_modules()}

    torch_ops.swap(net)

    assert {n: m.training for n, m in net.named_modules()} == modes
    with torch.no_grad():
        net(torch.randn(1, 8, 16))
    assert calls == ["pre", "post", "kw"]
    h1.remove()  # handles made before the swap still work
    with torch.no_grad():
        net(torch.randn(1, 8, 16))
    assert calls == ["pre", "post", "kw", "pre", "kw"]


def test_swap_filter_and_idempotence():
    net = _net("cpu")
    result = torch_ops.swap(net, filter=lambda name, m: isinstance(m, torch.nn.Conv1d))
    assert all(type(m) is torch_ops.nn.Conv1d for _, m in result.replaced)
    assert ("img.0", "excluded by filter") in result.skipped
    again = torch_ops.swap(net)
    assert [n for n, _ in again.replaced] == ["img.0", "img.2"]
    assert len(torch_ops.swap(net)) == 0


def test_swap_root_module_and_skip_reasons():
    conv = torch.nn.Conv2d(2, 2, 3)
    res = torch_ops.swap(conv)
    assert res.replaced == [("", conv)] and type(conv) is torch_ops.nn.Conv2d

    skipped = torch.nn.ModuleDict({
        "complex": torch.nn.Conv1d(2, 2, 3, dtype=torch.complex64),
        "meta": torch.nn.Conv2d(2, 2, 3, device="meta"),
        "lazy": torch.nn.LazyConv1d(2, 3),
        "f64": torch.nn.Conv1d(2, 2, 3, dtype=torch.float64),
    })
    res = torch_ops.swap(skipped)
    reasons = dict(res.skipped)
    assert "complex" in reasons["complex"]
    assert "device meta" in reasons["meta"]
    assert "LazyConv1d" in reasons["lazy"]
    assert [n for n, _ in res.replaced] == ["f64"]  # float64 runs on CPU
    for reason in reasons.values():
        assert "\n" not in reason


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
def test_swap_skips_float64_on_cuda():
    net = torch.nn.Sequential(torch.nn.Conv1d(2, 2, 3, dtype=torch.float64, device="cuda"),
                              torch.nn.Conv1d(2, 2, 3, device="cuda"))
    res = torch_ops.swap(net)
    assert [n for n, _ in res.replaced] == ["1"]
    assert res.skipped == [("0", "float64 runs on CPU only in gpukern")]


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_swap_prunes_layers_the_policy_sends_to_torch(device):
    # CPU inputs run torch under swap's default cpu=False, so on CPU every decision is torch and
    # every in-place layer goes back to its torch class; with cpu=True they all stay gpukern's.
    # On CUDA, "rules" decides per layer; "all" never prunes.
    x = torch.randn(2, 8, 24, device=device)
    with torch.no_grad():
        ref = _net(device).eval()(x)
    for kwargs in ({}, {"cpu": True}, {"policy": "all"}, {"prune": False}):
        net = _net(device).eval()
        # (tune=False: the end-to-end check may give a CUDA model back whole, see
        # test_swap_fuse's test_end_to_end_check_gives_the_stock_model_back)
        res = torch_ops.swap(net, fuse=False, example_inputs=(x,), tune=False, **kwargs)
        convs = [m for m in net.modules() if isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d))]
        gk = [m for m in convs if type(m) in (torch_ops.nn.Conv1d, torch_ops.nn.Conv2d)]
        assert len(res.replaced) + len(res.pruned) == 7, kwargs  # 5 Conv1d, 2 Conv2d
        assert {id(m) for _, m in res.replaced} == {id(m) for m in gk}
        for _, m in res.pruned:
            assert type(m) in (torch.nn.Conv1d, torch.nn.Conv2d) and "_gk_fast" not in m.__dict__
        keep_all = (kwargs.get("policy") == "all" or kwargs.get("prune") is False
                    or (device == "cpu" and kwargs.get("cpu")))
        if keep_all:
            assert res.pruned == []
        elif device == "cpu":
            assert res.replaced == [] and len(res.pruned) == 7
        rows = res.rows()
        assert sum(r["reason"].startswith("pruned") for r in rows) == len(res.pruned)
        assert all("pruned" in line for line in res.summary().splitlines()[-len(res.pruned):]) \
            if res.pruned else True
        with torch.no_grad():
            torch.testing.assert_close(res.model(x), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_swap_converts_parametrized_convs(device):
    # weight_norm (torch.nn.utils.parametrize), as wav2vec2's positional conv: converted to a
    # class that keeps the parametrization's weight property and runs gpukern's convolution.
    from torch.nn.utils.parametrizations import weight_norm
    torch.manual_seed(0)
    net = torch.nn.Sequential(weight_norm(torch.nn.Conv1d(8, 8, 5, padding=2, groups=2), dim=2),
                              torch.nn.GELU(),
                              weight_norm(torch.nn.Conv2d(1, 4, 3))).to(device).eval()

    def run(model):
        with torch.no_grad():
            y = model[1](model[0](x1))
            return y, model[2](x2)

    x1, x2 = torch.randn(2, 8, 40, device=device), torch.randn(2, 1, 9, 9, device=device)
    ref = run(net)
    keys = sorted(net.state_dict())
    parametrized = [type(net[0]), type(net[2])]
    res = torch_ops.swap(net, cpu=True, policy="all")
    assert [n for n, _ in res.replaced] == ["0", "2"] and res.skipped == []
    for m, base, gk in ((net[0], torch.nn.Conv1d, torch_ops.nn.Conv1d),
                        (net[2], torch.nn.Conv2d, torch_ops.nn.Conv2d)):
        assert isinstance(m, gk) and isinstance(m, base)
        assert torch.nn.utils.parametrize.is_parametrized(m, "weight")
    assert sorted(net.state_dict()) == keys
    for got, want in zip(run(net), ref):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    # The parametrization is live: a new weight_g changes the output, as in torch's layer.
    with torch.no_grad():
        net[0].parametrizations.weight.original0.mul_(2)
    torch.testing.assert_close(run(net)[0], torch.nn.functional.gelu(
        torch.nn.functional.conv1d(x1, net[0].weight, net[0].bias, padding=2, groups=2)),
        rtol=1e-4, atol=1e-4)
    assert torch_ops.unswap(net) == 2 and [type(net[0]), type(net[2])] == parametrized
    res = torch_ops.swap(net, cpu=True)
    res.restore()
    assert [type(net[0]), type(net[2])] == parametrized


def test_swap_leaves_other_conv_subclasses_alone():
    class Custom(torch.nn.Conv1d):  # a subclass with its own forward is not converted
        def forward(self, x):
            return super().forward(x) + 1

    net = torch.nn.Sequential(Custom(2, 2, 3))
    res = torch_ops.swap(net)
    assert res.replaced == [] and "may override its forward" in res.skipped[0][1]
