"""Fusion for :func:`torch_ops.swap`: Conv -> BatchNorm -> residual add -> activation blocks
become one :class:`torch_ops.nn.FusedConv1d` / ``FusedConv2d``.

A block starts at a ``torch.nn.Conv1d`` / ``Conv2d`` (exactly those classes, or their
``torch_ops.nn`` conversions; padding_mode 'zeros') and takes, in this order and each optional:

* a ``BatchNorm1d`` / ``BatchNorm2d`` of the matching dimensionality (exactly those classes) in
  eval mode with running statistics, folded into the weights with
  ``torch.nn.utils.fusion.fuse_conv_bn_eval``;
* a residual add: ``operator.add`` / ``operator.iadd`` / ``torch.add`` (no ``alpha``) /
  ``Tensor.add`` / ``Tensor.add_`` of the block's value and another value, the block on either
  side. When the add writes in place into the *other* operand (``other += block``), that operand
  must have no other use (the rewrite does not mutate it);
* an activation: the modules ``nn.ReLU``, ``ReLU6``, ``SiLU``, ``GELU`` (approximate 'none' or
  'tanh'), ``Hardswish``, ``Sigmoid``, ``Hardsigmoid`` and the calls ``F.relu``, ``torch.relu``,
  ``torch.relu_``, ``F.relu6``, ``F.silu``, ``F.gelu``, ``F.hardswish``, ``F.hardsigmoid``,
  ``torch.sigmoid``, ``Tensor.relu(_)``, ``Tensor.sigmoid(_)``, in-place variants included.

Every intermediate value must be used only by the next step (a BatchNorm output read twice ends
the block before it). A block is at least the convolution plus one of the three.

Where :func:`torch.fx.symbolic_trace` traces the model (:func:`fuse_fx`), the blocks are found in
the graph and replaced by one ``call_module`` of the fused module (named as the conv it replaces)
taking ``(x, residual)``; the result is a new ``torch.fx.GraphModule`` sharing the model's other
submodules. The residual add's shapes are not known at trace time: given example inputs they are
checked with ``torch.fx.passes.shape_prop.ShapeProp`` (an add whose operands differ in shape is not
fused); at run time the fused module checks again and adds a residual whose shape or dtype differs
with torch's broadcasting add. Where fx cannot trace (data-dependent control flow, e.g.
torchaudio's Conformer), :func:`fuse_sequential` rewrites runs of Conv -> BatchNorm -> activation
inside ``nn.Sequential`` containers (exactly ``nn.Sequential`` or subclasses that keep its
forward, such as torchvision's ``Conv2dNormActivation``) in place: the conv's slot gets the fused
module, the BatchNorm's and the activation's slots ``nn.Identity``.

Training mode: BatchNorm in training mode normalises with batch statistics, which cannot be
folded; such blocks are left alone with a warning (:func:`torch_ops.swap` does not fuse a model
in training mode at all).
"""
import dataclasses
import operator
import warnings
from typing import Callable, List, Optional, Tuple

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from .nn import FUSED_CLASS, GPUKERN_CLASS, _FusedConvNd, torch_class_of

__all__ = ["Block", "fuse_fx", "fuse_sequential", "module_activation"]

_CONVS = tuple(FUSED_CLASS)
_BN_FOR = {nn.Conv1d: nn.BatchNorm1d, nn.Conv2d: nn.BatchNorm2d}
for _torch_cls, _gk_cls in GPUKERN_CLASS.items():
    _BN_FOR[_gk_cls] = _BN_FOR[_torch_cls]

_ACT_MODULES = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.SiLU: "silu", nn.Hardswish: "hardswish",
                nn.Sigmoid: "sigmoid", nn.Hardsigmoid: "hardsigmoid"}
_ACT_FUNCTIONS = {F.relu: "relu", torch.relu: "relu", torch.relu_: "relu", F.relu6: "relu6",
                  F.silu: "silu", F.hardswish: "hardswish", torch.sigmoid: "sigmoid",
                  F.sigmoid: "sigmoid", F.hardsigmoid: "hardsigmoid"}
_ACT_METHODS = {"relu": "relu", "relu_": "relu", "sigmoid": "sigmoid", "sigmoid_": "sigmoid"}
_ADD_FUNCTIONS = (operator.add, operator.iadd, torch.add)


@dataclasses.dataclass
class Block:
    """One fused block: the qualified names of what it replaced and what it does."""

    name: str                       # the fused module's name (the conv's)
    module: _FusedConvNd
    parts: List[str]                # qualified names (or fx node names) of conv, bn, add, act
    fused: str                      # e.g. "bn+add+relu"


def module_activation(m: nn.Module) -> Optional[str]:
    """The fused op's name for an activation module (exact classes), else None."""
    if type(m) is nn.GELU:
        return {"none": "gelu", "tanh": "gelu_tanh"}.get(m.approximate)
    return _ACT_MODULES.get(type(m))


def _bn_ok(conv: nn.Module, bn: nn.Module) -> bool:
    return (type(bn) is _BN_FOR.get(type(conv)) and bn.track_running_stats
            and bn.running_mean is not None and bn.running_var is not None
            and bn.num_features == conv.out_channels)


def _conv_ok(m: nn.Module) -> bool:
    return type(m) in _CONVS and m.padding_mode == "zeros"


class _Tracer(torch.fx.Tracer):
    """symbolic_trace's tracer, with gpukern's modules kept as leaves (a model swapped before)."""

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        if torch_class_of(type(m)) is not None or isinstance(m, _FusedConvNd):
            return True
        return super().is_leaf_module(m, qualname)


def _only_arg(node: torch.fx.Node) -> Optional[torch.fx.Node]:
    args = list(node.args) + list(node.kwargs.values())
    return args[0] if args and isinstance(args[0], torch.fx.Node) else None


def _act_of(node: torch.fx.Node, cur: torch.fx.Node, modules) -> Optional[str]:
    """The activation node applies to cur, by the fused op's name, or None."""
    if node.op == "call_module":
        m = modules.get(node.target)
        if m is None or node.args[:1] != (cur,) or len(node.args) + len(node.kwargs) != 1:
            return None
        return module_activation(m)
    if node.op == "call_function":
        if not node.args or node.args[0] is not cur:
            return None
        extra = dict(node.kwargs)
        if node.target is F.gelu:
            approx = extra.pop("approximate", node.args[1] if len(node.args) > 1 else "none")
            if len(node.args) > 2 or extra:
                return None
            return {"none": "gelu", "tanh": "gelu_tanh"}.get(approx)
        name = _ACT_FUNCTIONS.get(node.target)
        if name is None:
            return None
        extra.pop("inplace", None)  # F.relu(x, inplace=True) and the like
        positional_ok = len(node.args) == 1 or (len(node.args) == 2 and isinstance(
            node.args[1], bool) and node.target in (F.relu, F.relu6, F.silu, F.hardswish,
                                                    F.hardsigmoid))
        return name if positional_ok and not extra else None
    if node.op == "call_method":
        if node.args[:1] != (cur,) or len(node.args) != 1 or node.kwargs:
            return None
        return _ACT_METHODS.get(node.target)
    return None


def _add_other(node: torch.fx.Node, cur: torch.fx.Node) -> Optional[torch.fx.Node]:
    """The other operand when node is a residual add of cur and another node, else None."""
    inplace_into_first = False
    if node.op == "call_function" and node.target in _ADD_FUNCTIONS:
        if len(node.args) != 2:
            return None
        if node.target is torch.add and any(k != "alpha" for k in node.kwargs):
            return None
        if node.kwargs.get("alpha", 1) != 1:
            return None
        if node.target is not torch.add and node.kwargs:
            return None
        a, b = node.args
        inplace_into_first = node.target is operator.iadd
    elif node.op == "call_method" and node.target in ("add", "add_"):
        if len(node.args) != 2 or node.kwargs:
            return None
        a, b = node.args
        inplace_into_first = node.target == "add_"
    else:
        return None
    if a is cur and isinstance(b, torch.fx.Node) and b is not cur:
        return b
    if b is cur and isinstance(a, torch.fx.Node) and a is not cur:
        # `other += block` writes into other: only when nothing else reads it.
        if inplace_into_first and len(a.users) != 1:
            return None
        return a
    return None


def _same_shape(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    ma, mb = a.meta.get("tensor_meta"), b.meta.get("tensor_meta")
    if ma is None or mb is None:
        return True  # no shapes known: checked at run time
    return tuple(ma.shape) == tuple(mb.shape) and ma.dtype == mb.dtype


def _sole_user(node: torch.fx.Node) -> Optional[torch.fx.Node]:
    return next(iter(node.users)) if len(node.users) == 1 else None


def fuse_fx(model: nn.Module, accept: Callable[[str, nn.Module], bool],
            example_inputs: Optional[tuple] = None
            ) -> Tuple[Optional[torch.fx.GraphModule], List[Block], List[str]]:
    """(graph module, blocks, notes): ``model`` traced and its blocks fused, or ``(None, [],
    notes)`` where nothing was fused. Raises what ``torch.fx`` raises where it cannot trace.
    ``accept(qualified_name, conv)`` says whether a conv may be fused (swap's filter and skip
    rules). ``model`` is left unchanged."""
    tracer = _Tracer()
    graph = tracer.trace(model)
    gm = torch.fx.GraphModule(tracer.root, graph, type(model).__name__)
    modules = dict(gm.named_modules())
    notes: List[str] = []
    if example_inputs is not None:
        from torch.fx.passes.shape_prop import ShapeProp
        try:
            with torch.no_grad():
                ShapeProp(gm).propagate(*example_inputs)
        except Exception as e:  # noqa: BLE001  (shapes are then checked at run time only)
            notes.append(f"shape propagation failed ({type(e).__name__}); residual shapes are "
                         "checked at run time")

    chains = []
    claimed = set()
    train_bn = []
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or node in claimed:
            continue
        conv = modules.get(node.target)
        if conv is None or not _conv_ok(conv) or not accept(node.target, conv):
            continue
        if len(node.args) != 1 or node.kwargs or not isinstance(node.args[0], torch.fx.Node):
            continue
        chain = dict(conv=node, bn=None, add=None, residual=None, act=None, act_name="none")
        cur, parts = node, [node.target]
        nxt = _sole_user(cur)
        if (nxt is not None and nxt.op == "call_module" and nxt not in claimed
                and nxt.args == (cur,) and not nxt.kwargs):
            bn = modules.get(nxt.target)
            if bn is not None and _bn_ok(conv, bn):
                if bn.training or conv.training:
                    train_bn.append(nxt.target)
                    continue
                chain["bn"] = nxt
                parts.append(nxt.target)
                cur, nxt = nxt, _sole_user(nxt)
        if nxt is not None and nxt not in claimed:
            other = _add_other(nxt, cur)
            if other is not None and _same_shape(cur, other):
                chain["add"], chain["residual"] = nxt, other
                parts.append(nxt.name)
                cur, nxt = nxt, _sole_user(nxt)
        if nxt is not None and nxt not in claimed:
            act = _act_of(nxt, cur, modules)
            if act is not None:
                chain["act"], chain["act_name"] = nxt, act
                parts.append(nxt.target if nxt.op == "call_module" else nxt.name)
        steps = [n for n in (chain["bn"], chain["add"], chain["act"]) if n is not None]
        if not steps:
            continue
        claimed.update([node] + steps)
        chain["parts"] = parts
        chains.append(chain)
    if train_bn:
        warnings.warn(f"torch_ops.swap: {len(train_bn)} BatchNorm layer(s) in training mode "
                      f"(e.g. {train_bn[0]}) not fused: training-mode BatchNorm uses batch "
                      "statistics, which cannot be folded into the convolution; call "
                      "model.eval() before swap", stacklevel=3)
        notes.append(f"{len(train_bn)} block(s) with BatchNorm in training mode not fused")
    if not chains:
        return None, [], notes

    # Where a conv module has call sites left after the rewrite, the fused modules get new names.
    sites = {}
    for n in gm.graph.nodes:
        if n.op == "call_module":
            sites[n.target] = sites.get(n.target, 0) + 1
    fused_sites = {}
    for ch in chains:
        fused_sites[ch["conv"].target] = fused_sites.get(ch["conv"].target, 0) + 1

    blocks = []
    used_names = set()
    remap = {}
    for ch in chains:
        conv_node = ch["conv"]
        conv = modules[conv_node.target]
        bn = modules[ch["bn"].target] if ch["bn"] is not None else None
        what = (["bn"] if bn is not None else []) + (["add"] if ch["add"] is not None else []) \
            + ([ch["act_name"]] if ch["act"] is not None else [])
        fused = FUSED_CLASS[type(conv)].from_conv(conv, bn, ch["act_name"],
                                                  residual=ch["add"] is not None,
                                                  fused="+".join(what))
        name = conv_node.target
        if sites[name] > 1 or fused_sites[name] > 1 or name in used_names:
            i = 0
            while f"{name}_fused{i}" in used_names or f"{name}_fused{i}" in modules:
                i += 1
            name = f"{name}_fused{i}"
        used_names.add(name)
        gm.add_submodule(name, fused)
        last = ch["act"] or ch["add"] or ch["bn"]
        residual = ch["residual"]
        while residual in remap:  # the last node of a block rewritten before this one
            residual = remap[residual]
        args = (conv_node.args[0],) + ((residual,) if residual is not None else ())
        with gm.graph.inserting_before(last):
            new = gm.graph.call_module(name, args=args)
        new.meta.update(last.meta)
        last.replace_all_uses_with(new)
        remap[last] = new
        for n in (ch["act"], ch["add"], ch["bn"], conv_node):
            if n is not None:
                gm.graph.erase_node(n)
        blocks.append(Block(name, fused, ch["parts"], "+".join(what)))
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    return gm, blocks, notes


def _keeps_sequential_forward(m: nn.Module) -> bool:
    return isinstance(m, nn.Sequential) and type(m).forward is nn.Sequential.forward


def fuse_sequential(model: nn.Module, accept: Callable[[str, nn.Module], bool]
                    ) -> Tuple[List[Block], List[Tuple[nn.Module, str, nn.Module]], List[str]]:
    """Fuse Conv -> BatchNorm -> activation runs inside ``nn.Sequential`` containers of
    ``model``, in place. Returns (blocks, replaced slots as (container, key, old module) for
    undoing, notes)."""
    blocks: List[Block] = []
    undo: List[Tuple[nn.Module, str, nn.Module]] = []
    train_bn = []
    for pname, parent in list(model.named_modules()):
        if not _keeps_sequential_forward(parent):
            continue
        keys = list(parent._modules)
        i = 0
        while i < len(keys):
            conv = parent._modules[keys[i]]
            qual = f"{pname}.{keys[i]}" if pname else keys[i]
            if conv is None or not _conv_ok(conv) or not accept(qual, conv):
                i += 1
                continue
            j = i + 1
            bn = act_mod = None
            act = "none"
            if j < len(keys) and parent._modules[keys[j]] is not None \
                    and _bn_ok(conv, parent._modules[keys[j]]):
                if parent._modules[keys[j]].training or conv.training:
                    train_bn.append(f"{pname}.{keys[j]}" if pname else keys[j])
                    i += 1
                    continue
                bn = parent._modules[keys[j]]
                j += 1
            if j < len(keys) and parent._modules[keys[j]] is not None:
                name = module_activation(parent._modules[keys[j]])
                if name is not None:
                    act, act_mod = name, parent._modules[keys[j]]
                    j += 1
            if bn is None and act_mod is None:
                i += 1
                continue
            what = (["bn"] if bn is not None else []) + ([act] if act_mod is not None else [])
            fused = FUSED_CLASS[type(conv)].from_conv(conv, bn, act, fused="+".join(what))
            parts = []
            for k in range(i, j):
                key = keys[k]
                old = parent._modules[key]
                undo.append((parent, key, old))
                parts.append(f"{pname}.{key}" if pname else key)
                parent._modules[key] = fused if k == i else nn.Identity()
            blocks.append(Block(qual, fused, parts, "+".join(what)))
            i = j
    notes = []
    if train_bn:
        warnings.warn(f"torch_ops.swap: {len(train_bn)} BatchNorm layer(s) in training mode "
                      f"(e.g. {train_bn[0]}) not fused: training-mode BatchNorm uses batch "
                      "statistics, which cannot be folded into the convolution; call "
                      "model.eval() before swap", stacklevel=3)
        notes.append(f"{len(train_bn)} block(s) with BatchNorm in training mode not fused")
    return blocks, undo, notes
