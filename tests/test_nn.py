"""torch_ops.nn.Conv1d / Conv2d: torch's constructor and state_dict, gpukern's convolution,
padding modes as torch handles them, from_module sharing the Parameters."""
import pytest
import torch

import torch_ops
from conftest import DEVICE_PARAMS, FLOAT_DTYPES, assert_close_ref, skip_unsupported

# (in, out, kernel, constructor kwargs), covering every argument of nn.Conv1d/nn.Conv2d.
CONV1D = [
    (4, 6, 5, {}),
    (4, 4, 7, dict(groups=4, padding="same", bias=False)),
    (6, 9, 3, dict(stride=2, padding=2, dilation=3, groups=3)),
    (3, 5, 4, dict(padding="valid")),
    (4, 4, 3, dict(padding=2, padding_mode="reflect", groups=2)),
    (4, 4, 5, dict(padding="same", padding_mode="circular", groups=4)),
    (3, 2, 3, dict(padding=1, padding_mode="replicate", stride=2)),
]
CONV2D = [
    (3, 8, 3, dict(padding=1)),
    (8, 8, (7, 5), dict(groups=8, padding="same", bias=False)),
    (4, 6, (3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
    (4, 4, 3, dict(padding=(1, 2), padding_mode="reflect", groups=4)),
    (2, 3, 3, dict(padding="same", padding_mode="circular")),
    (3, 3, 3, dict(padding=1, padding_mode="replicate", stride=2, groups=3)),
]


def _pair(nsp, cin, cout, k, kwargs, device, dtype, seed):
    torch.manual_seed(seed)
    stock_cls = torch.nn.Conv1d if nsp == 1 else torch.nn.Conv2d
    gk_cls = torch_ops.nn.Conv1d if nsp == 1 else torch_ops.nn.Conv2d
    stock = stock_cls(cin, cout, k, **kwargs)
    mine = gk_cls(cin, cout, k, device=device, dtype=dtype, **kwargs)
    mine.load_state_dict(stock.state_dict())
    stock.load_state_dict(mine.state_dict())  # the reference uses the weights rounded to dtype
    return stock, mine


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.float64])
@pytest.mark.parametrize("nsp,case", [(1, c) for c in range(len(CONV1D))] +
                         [(2, c) for c in range(len(CONV2D))])
def test_parity_with_torch_module(device, dtype, nsp, case):
    skip_unsupported(device, dtype)
    cin, cout, k, kwargs = (CONV1D if nsp == 1 else CONV2D)[case]
    stock, mine = _pair(nsp, cin, cout, k, kwargs, device, dtype, seed=case)
    assert type(mine).__mro__[1:].count(type(stock)) == 1
    g = torch.Generator().manual_seed(100 + case)
    shape = (2, cin, 23) if nsp == 1 else (2, cin, 11, 9)
    x = torch.randn(*shape, generator=g).to(dtype)
    with torch.no_grad():
        ref = stock.double()(x.double())
        out = mine(x.to(device))
    assert out.dtype == dtype and out.device.type == device
    assert_close_ref(out, ref, dtype)


def test_constructor_and_state_dict_are_torchs():
    torch.manual_seed(0)
    stock = torch.nn.Conv2d(4, 8, 3, stride=2, padding=1, dilation=1, groups=2, bias=True,
                            padding_mode="reflect")
    mine = torch_ops.nn.Conv2d(4, 8, 3, stride=2, padding=1, dilation=1, groups=2, bias=True,
                               padding_mode="reflect")
    assert isinstance(mine, torch.nn.Conv2d)
    assert mine.extra_repr() == stock.extra_repr()
    assert list(mine.state_dict()) == list(stock.state_dict())
    mine.load_state_dict(stock.state_dict(), strict=True)
    stock.load_state_dict(mine.state_dict(), strict=True)
    assert torch.equal(mine.weight, stock.weight)
    with pytest.raises(ValueError):
        torch_ops.nn.Conv1d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(ValueError):
        torch_ops.nn.Conv1d(2, 2, 3, stride=2, padding="same")


@pytest.mark.parametrize("nsp", [1, 2])
def test_from_module_shares_parameters(nsp):
    torch.manual_seed(1)
    stock = (torch.nn.Conv1d(4, 4, 3, padding=1, groups=4) if nsp == 1
             else torch.nn.Conv2d(4, 6, 3, padding=1)).eval()
    calls = []
    stock.register_forward_hook(lambda m, i, o: calls.append("hook"))
    cls = torch_ops.nn.Conv1d if nsp == 1 else torch_ops.nn.Conv2d
    mine = cls.from_module(stock)
    assert type(mine) is cls and type(stock) is not cls
    assert mine.weight is stock.weight and mine.bias is stock.bias
    assert mine.training is False
    assert [p is q for p, q in zip(mine.parameters(), stock.parameters())] == [True, True]
    x = torch.randn(2, 4, 17) if nsp == 1 else torch.randn(2, 4, 9, 8)
    with torch.no_grad():
        torch.testing.assert_close(mine(x), stock(x), rtol=1e-4, atol=1e-5)
    assert calls == ["hook", "hook"]
    # Fresh containers: registering on the new layer leaves the old one alone.
    mine.register_forward_pre_hook(lambda m, i: calls.append("pre"))
    with torch.no_grad():
        stock(x)
    assert "pre" not in calls
    with pytest.raises(TypeError, match="from_module expects"):
        cls.from_module(torch.nn.Linear(3, 3))
    with pytest.raises(TypeError, match="from_module expects"):
        cls.from_module(torch.nn.Conv2d(2, 2, 1) if nsp == 1 else torch.nn.Conv1d(2, 2, 1))


def test_forward_needs_no_grad():
    m = torch_ops.nn.Conv1d(3, 3, 3, groups=3)
    x = torch.randn(1, 3, 10)
    with pytest.raises(RuntimeError, match="gpukern::conv1d: gpukern is inference-only"):
        m(x)
    with torch.no_grad():
        y = m(x)
    assert not y.requires_grad
    with torch.inference_mode():
        z = m(x)
    torch.testing.assert_close(y, z)
