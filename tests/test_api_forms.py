"""Issue 30, defect 1: argument forms.

torch_ops.conv1d/conv2d and the torch_ops.nn modules take every form F.conv1d/F.conv2d and
torch.nn.Conv1d/Conv2d take (ints, tuples, lists, numpy integers, 'same'/'valid'), checked against
F directly: the same result, or an exception of the same type. The raw ops
torch.ops.gpukern.conv1d/conv2d take aten's schema: they accept and reject exactly what
torch.ops.aten.conv1d/conv2d accept and reject (lists; a bare int is rejected by both)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch_ops
from conftest import DEVICE_PARAMS

FORMS = [1, 2, 0, -1, True, np.int64(2), torch.tensor(2), (2,), [2], (1, 2), [2, 1], [], (1, 1, 1),
         [True], [2.0], 2.0, "same", "valid", "foo", None, torch.Size([2])]
ARGS = ("stride", "padding", "dilation")


def _outcome(fn, *args, **kwargs):
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        return type(e), e


def _assert_same(ref, got, what):
    assert ref[0] == got[0], f"{what}: torch gave {ref}, gpukern gave {got}"
    if ref[0] == "ok":
        assert got[1].shape == ref[1].shape, what
        torch.testing.assert_close(got[1], ref[1], rtol=1e-4, atol=1e-5, msg=what)


def _tensors(nsp, device):
    g = torch.Generator().manual_seed(nsp)
    if nsp == 1:
        x, w = torch.randn(2, 4, 16, generator=g), torch.randn(4, 2, 3, generator=g)
    else:
        x, w = torch.randn(2, 4, 9, 10, generator=g), torch.randn(4, 2, 3, 3, generator=g)
    return x.to(device), w.to(device)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("nsp", [1, 2])
@pytest.mark.parametrize("arg", ARGS)
def test_functional_takes_every_form_of_F(device, nsp, arg):
    x, w = _tensors(nsp, device)
    ref_fn, gk_fn = (F.conv1d, torch_ops.conv1d) if nsp == 1 else (F.conv2d, torch_ops.conv2d)
    for v in FORMS:
        ref = _outcome(ref_fn, x, w, None, groups=2, **{arg: v})
        got = _outcome(gk_fn, x, w, None, groups=2, **{arg: v})
        _assert_same(ref, got, f"conv{nsp}d({arg}={v!r})")
    # Positional forms, as in the issue: F.conv1d(x, w, None, 1, 15, 1, groups).
    pos = (1, 3, 1, 2) if nsp == 1 else ((1, 2), 1, [1, 2], 2)
    _assert_same(_outcome(ref_fn, x, w, None, *pos), _outcome(gk_fn, x, w, None, *pos),
                 f"conv{nsp}d positional")


@pytest.mark.parametrize("nsp", [1, 2])
@pytest.mark.parametrize("arg", ARGS)
def test_raw_op_accepts_and_rejects_what_aten_does(nsp, arg):
    x, w = _tensors(nsp, "cpu")
    aten, gk = ((torch.ops.aten.conv1d, torch.ops.gpukern.conv1d) if nsp == 1 else
                (torch.ops.aten.conv2d, torch.ops.gpukern.conv2d))
    for v in FORMS:
        for style in ("keyword", "positional"):
            if style == "keyword":
                call = dict(kwargs={arg: v})
                args = (x, w, None)
            else:
                values = {"stride": [1], "padding": [0], "dilation": [1]}
                values[arg] = v
                args = (x, w, None, values["stride"], values["padding"], values["dilation"])
                call = dict(kwargs={})
            ref = _outcome(aten, *args, groups=2, **call["kwargs"])
            got = _outcome(gk, *args, groups=2, **call["kwargs"])
            _assert_same(ref, got, f"raw conv{nsp}d {style} {arg}={v!r}")
    # The call: ints where the schema has lists, rejected by both.
    ref = _outcome(aten, x, w, None, 1, 1, 1, 2)
    got = _outcome(gk, x, w, None, 1, 1, 1, 2)
    assert ref[0] is RuntimeError and got[0] is RuntimeError
    # The list form works.
    ones = [1] * nsp
    torch.testing.assert_close(gk(x, w, None, ones, ones, ones, 2),
                               aten(x, w, None, ones, ones, ones, 2), rtol=1e-4, atol=1e-5)


CONSTRUCTOR_FORMS = [
    dict(stride=2), dict(stride=(2,)), dict(stride=[2]), dict(padding=1), dict(padding=(1,)),
    dict(padding="same"), dict(padding="valid"), dict(dilation=[2]), dict(dilation=(2,)),
    dict(padding="same", dilation=2), dict(padding=[1], padding_mode="reflect"),
]


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("nsp", [1, 2])
@pytest.mark.parametrize("kwargs", CONSTRUCTOR_FORMS, ids=str)
def test_modules_take_every_constructor_form(device, nsp, kwargs):
    if nsp == 2:
        kwargs = {k: (v * 2 if isinstance(v, (tuple, list)) else v) for k, v in kwargs.items()}
    stock_cls = torch.nn.Conv1d if nsp == 1 else torch.nn.Conv2d
    gk_cls = torch_ops.nn.Conv1d if nsp == 1 else torch_ops.nn.Conv2d
    torch.manual_seed(0)
    stock = stock_cls(4, 6, 3, groups=2, **kwargs).to(device)
    mine = gk_cls(4, 6, 3, groups=2, **kwargs).to(device)
    mine.load_state_dict(stock.state_dict())
    x, _ = _tensors(nsp, device)
    with torch.no_grad():
        torch.testing.assert_close(mine(x), stock(x), rtol=1e-4, atol=1e-5)


def test_docstrings_say_raw_op_takes_lists():
    for fn in (torch_ops.conv1d, torch_ops.conv2d):
        assert "aten's schema" in fn.__doc__ and "[1" in fn.__doc__
    assert "lists" in torch_ops.functional.__doc__
