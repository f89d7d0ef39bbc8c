"""``torch_ops.swap(model)``: run a model's convolutions on gpukern, fused, where that is faster.

What ``swap`` does, in order:

1. **Fusion** (``fuse=True``, the default, for a model in eval mode): Conv -> BatchNorm ->
   residual add -> activation blocks become one :class:`torch_ops.nn.FusedConv1d` /
   ``FusedConv2d`` computing ``act(conv(x, w') + b' [+ residual])``, the BatchNorm folded into
   ``w', b'`` by ``torch.nn.utils.fusion.fuse_conv_bn_eval`` (:mod:`torch_ops.fuse` lists the
   patterns). Where ``torch.fx.symbolic_trace`` traces the model, the fused model is a new
   ``torch.fx.GraphModule``, ``result.model``; the model passed in is not rewritten (its
   unfused layers are converted in place as in 2., and it stays usable). Where fx cannot trace,
   blocks inside ``nn.Sequential`` containers are fused in place and ``result.model`` is
   ``model`` itself. Where nothing is fused, ``result.model`` is ``model``. A model in training
   mode is not fused (a warning says so), nor is a block whose BatchNorm is in training mode.
2. **Conversion in place** (as before fusion existed): every ``torch.nn.Conv1d`` / ``Conv2d``
   that gpukern can run is converted by reassigning its ``__class__`` to
   ``torch_ops.nn.Conv1d`` / ``Conv2d`` (subclasses that add no state and only replace the
   convolution call). The layer stays the same object, so everything that refers to it stays
   valid: its Parameters, buffers, forward hooks and pre-hooks, its training flag, a layer
   reachable under two names, and any outside reference. ``swap(model, fuse=False)`` does only
   this (and ``result.model is model``). :meth:`SwapResult.restore` (or :func:`unswap`) turns
   the layers back.
3. **Policy** (``policy="rules"`` default, ``"autotune"``, ``"all"``; :mod:`torch_ops.policy`):
   which CUDA calls of the converted and fused layers run gpukern and which torch, decided per
   layer at the first call with each input signature and cached; a fused block whose policy
   picks torch runs the torch sequence it replaced (conv with the folded weights, + residual,
   activation), so fusion alone never forces gpukern. ``"all"`` runs gpukern everywhere.
4. ``channels_last=True`` converts the 4-D parameters and buffers of ``result.model`` (shared
   with ``model``) to ``torch.channels_last`` and registers a forward pre-hook on
   ``result.model`` converting its 4-D tensor inputs to channels_last (the hook's handle is kept;
   ``restore`` removes it; the parameters stay channels_last). The default, ``"auto"``, does so
   for a model on a tensor-core GPU (sm_80+) whose 2-D convolutions are at least half dense
   (ResNet, MobileNet: their NHWC convolutions are faster in cuDNN and gpukern alike), and
   leaves depthwise-dominated models (ConvNeXt), 1-D models and CPU models alone; a note says
   which.
5. ``example_inputs=(x, ...)`` runs ``result.model`` once on them under ``torch.inference_mode()``
   so every layer's decision for that signature is made (and, for ``"autotune"``, timed) now,
   before any ``torch.compile`` or CUDA graph capture; with it, residual adds whose operands
   differ in shape are also recognised at fusion time, and (``prune=True``, the default) a layer
   converted in place that the policy sends to torch for every example input is turned back into
   its torch class: a host-bound model (batch 1) then pays no per-call policy lookup for it.
   Before pruning, for ``policy="rules"`` on CUDA inputs, ``tune=True`` (the default) times the
   whole model on the example inputs under the rule table's choices and three alternatives
   (every fused block on gpukern, every layer on gpukern, every layer on torch) and keeps the
   fastest for those signatures (:mod:`torch_ops.tune`). Where the model's parameters were
   not moved to channels_last, the check also times the model as it was before swap; when that
   is the fastest, swap gives the model back unchanged (as :meth:`SwapResult.restore` does;
   ``result.model is model``, ``result.kept_stock``, a note says so): on a model whose layers
   gain nothing (a host-bound model at batch 1) the swap is then the stock model, not a slower
   copy of it.
   ``verbose=True`` prints :meth:`SwapResult.table`: per layer its name, input shape, chosen path (gpukern's algorithm,
   or torch) and the ops fused into it.

state_dict: a fused model's ``state_dict`` differs from the original's: each fused block holds
``weight`` and ``bias`` under the conv's name (the BatchNorm's parameters and buffers are gone,
folded into them; a conv without bias gains one), and Identity slots (Sequential fusion) have no
state. Load checkpoints into the original model and swap after loading. Fused blocks drop the
forward hooks of the modules they replace; the GraphModule keeps the model's ``forward`` only (not
its other methods or attributes): keep calling those on ``model``. Folded weights are new
Parameters (the only memory swap allocates); blocks without BatchNorm share the conv's.

Layers gpukern cannot run are left alone and listed with a one-line reason: subclasses of the
torch classes (they may override ``forward``), complex or non-floating weights, float64 on CUDA,
devices other than cpu/cuda, CUDA tensors in a build without CUDA kernels. The check looks at the
weight as it is now: swap after moving the model to its final device and dtype.

CPU: by default a converted or fused layer runs torch on CPU inputs (gpukern's CPU kernels are
reference kernels, several times slower than torch's); ``swap(model, cpu=True)`` makes CPU inputs
run gpukern's CPU kernels (the fused op's too). The policy applies to CUDA inputs. The choice is
made per call from the input's device, so a model swapped on CPU and moved to CUDA afterwards runs
the policy there.

``swap(model, filter=torch_ops.has_fast_path)`` converts (and fuses) only the layers with a
specialised kernel (see :mod:`torch_ops.fastpath`), listing the others as skipped with the
reason.
"""
import dataclasses
import warnings
from typing import Callable, List, Optional, Tuple, Union

import torch

from . import _checks
from . import policy as _policy
from .fastpath import fast_path_reason, has_fast_path
from .nn import GPUKERN_CLASS, gpukern_class, torch_class_of

__all__ = ["swap", "unswap", "SwapResult", "skip_reason"]


@dataclasses.dataclass
class SwapResult:
    """What :func:`swap` did.

    ``model``: the module to run (the fused GraphModule, or ``model`` itself; see :func:`swap`).
    ``replaced``: ``(qualified_name, layer)`` for every layer converted in place, in
    ``named_modules`` order; ``layer`` is the layer object itself (its torch class is kept in
    ``original_class``). ``fused``: :class:`torch_ops.fuse.Block` per fused block (``name``,
    ``module``, ``parts``: the names of what it replaced, ``fused``: e.g. "bn+add+relu").
    ``skipped``: ``(qualified_name, reason)`` for every torch convolution left alone.
    ``pruned``: ``(qualified_name, layer)`` for every layer converted and then turned back
    because the policy chose torch for all the example inputs (``swap(..., prune=True)``).
    ``tuned``: the end-to-end check's result (``{"choice": configuration, "ms": {configuration:
    ms per forward}}``, :mod:`torch_ops.tune`), or None where it did not run.
    ``kept_stock``: the check found the model before swap the fastest and swap gave it back
    (nothing converted or fused is left in use; ``replaced`` and ``fused`` are then empty).
    ``notes``: how fusion went (e.g. why it did not happen). ``len(result)`` is the number of layers
    converted in place (as before fusion existed); ``len(result.fused)`` the fused blocks.
    """

    replaced: List[Tuple[str, torch.nn.Module]] = dataclasses.field(default_factory=list)
    skipped: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    original_class: dict = dataclasses.field(default_factory=dict, repr=False)
    model: Optional[torch.nn.Module] = dataclasses.field(default=None, repr=False)
    fused: list = dataclasses.field(default_factory=list)
    notes: List[str] = dataclasses.field(default_factory=list)
    policy: str = "rules"
    pruned: List[Tuple[str, torch.nn.Module]] = dataclasses.field(default_factory=list)
    tuned: Optional[dict] = None
    kept_stock: bool = False
    _undo_slots: list = dataclasses.field(default_factory=list, repr=False)
    _hooks: list = dataclasses.field(default_factory=list, repr=False)

    def __len__(self) -> int:
        return len(self.replaced)

    def restore(self) -> None:
        """Turn the layers converted in place back into their torch classes (same objects
        again), put back the modules that in-place (nn.Sequential) fusion replaced, and remove the
        channels_last input hook. A fused GraphModule stays as it is (its unconverted layers are
        the model's own, now torch's again)."""
        for _, layer in self.replaced:
            cls = self.original_class.get(id(layer))
            if cls is not None:
                layer.__class__ = cls
                _policy.unregister(layer)
        for parent, key, old in reversed(self._undo_slots):
            parent._modules[key] = old
        self._undo_slots.clear()
        for h in self._hooks:
            h.remove()
        self._hooks.clear()

    def summary(self) -> str:
        lines = [f"gpukern.swap: replaced {len(self.replaced)} layer(s), fused "
                 f"{len(self.fused)} block(s), skipped {len(self.skipped)}; policy "
                 f"{self.policy!r}"]
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  skipped {name or '<root>'}: {reason}" for name, reason in self.skipped]
        lines += [f"  pruned {name or '<root>'}: torch for every example input, left a torch layer"
                  for name, _ in self.pruned]
        return "\n".join(lines)

    def rows(self) -> List[dict]:
        """One dict per layer and input signature decided so far: layer, kind, fused, input
        (shape, dtype, layout), path ("gpukern:<algorithm>" / "gpukern" / "torch"; "-" before
        the first call), reason."""
        out = []
        layers = [(b.name, b.module, b.fused) for b in self.fused]
        running = None if self.model is None else {id(m) for m in self.model.modules()}
        layers += [(n, m, "") for n, m in self.replaced if running is None or id(m) in running]
        for name, m, fused in layers + [(n, m, None) for n, m in self.pruned]:
            kind = _policy.layer_kind(m.in_channels, m.out_channels, m.groups, m.kernel_size)
            base = dict(layer=name or "<root>", kind=kind, fused=fused or "-")
            if fused is None:
                out.append(dict(base, input="-", path="torch", reason="pruned: the policy chose "
                                "torch for every example input"))
                continue
            decided = _policy.decisions(m)
            if not decided:
                base.update(input="-", path="-", reason="decided at the first call")
                out.append(base)
            for (shape, strides, dtype, device, has_res), d in decided.items():
                path = d.path if d.algorithm is None or d.path != "gpukern" \
                    else f"gpukern:{d.algorithm}"
                layout = _policy.layout_of(shape, strides)
                out.append(dict(base, input=f"{'x'.join(map(str, shape))} "
                                f"{str(dtype).replace('torch.', '')} {layout} {device}",
                                path=path, reason=d.reason))
        return out

    def table(self) -> str:
        """The per-layer table (what ``verbose=True`` prints): layer, kind, input, path, fused
        ops, reason."""
        rows = self.rows()
        cols = ("layer", "kind", "input", "path", "fused", "reason")
        width = {c: max([len(c)] + [len(str(r[c])) for r in rows]) for c in cols[:-1]}
        lines = ["  ".join(f"{c:<{width[c]}}" for c in cols[:-1]) + "  reason"]
        for r in rows:
            lines.append("  ".join(f"{str(r[c]):<{width[c]}}" for c in cols[:-1])
                         + f"  {r['reason']}")
        return "\n".join(lines)


def skip_reason(module: torch.nn.Module) -> Optional[str]:
    """None if :func:`swap` can convert ``module``, else a one-line reason why not."""
    cls = type(module)
    if torch_class_of(cls) is not None:
        return "already a gpukern layer"
    if gpukern_class(cls) is None:
        for base in GPUKERN_CLASS:
            if isinstance(module, base):
                return (f"{cls.__module__}.{cls.__qualname__} subclasses "
                        f"torch.nn.{base.__name__} and may override its forward")
        return f"{cls.__qualname__} is not a torch.nn.Conv1d or Conv2d"
    weight = module.weight
    if isinstance(weight, torch.nn.parameter.UninitializedParameter):
        return "weight is not initialised (lazy layer)"
    tensors = [weight] + ([module.bias] if module.bias is not None else [])
    dev = weight.device
    if dev.type not in ("cpu", "cuda"):
        return f"device {dev} is not supported (gpukern runs on cpu and cuda)"
    if any(t.device != dev or t.dtype != weight.dtype for t in tensors):
        return "weight and bias differ in device or dtype"
    if type(weight) not in (torch.nn.Parameter, torch.Tensor):
        return f"weight is a tensor subclass ({type(weight).__qualname__})"
    if weight.dtype.is_complex:
        return f"complex dtype {weight.dtype} is not supported"
    if weight.dtype == torch.float64:
        if dev.type != "cpu":
            return "float64 runs on CPU only in gpukern"
    elif weight.dtype not in _checks.FLOAT_DTYPES:
        return f"dtype {weight.dtype} is not supported (float32, float16, bfloat16, float64 on CPU)"
    if dev.type == "cuda":
        from . import has_cuda_kernels
        if not has_cuda_kernels():
            return "gpukern was built without CUDA kernels"
    return None


def _prune(result: SwapResult) -> None:
    """Turn back into torch's class every layer converted in place whose decisions (made by the
    example inputs) all say torch: it would run torch's convolution anyway, and the converted
    layer's per-call policy lookup is host time a host-bound model pays for nothing."""
    kept = []
    for name, layer in result.replaced:
        decided = _policy.decisions(layer)
        if decided and all(d.path == "torch" for d in decided.values()):
            layer.__class__ = result.original_class.pop(id(layer))
            _policy.unregister(layer)
            result.pruned.append((name, layer))
        else:
            kept.append((name, layer))
    result.replaced = kept


def _updates_state(model: torch.nn.Module) -> bool:
    """Whether a forward of `model` changes its state: a BatchNorm in training mode tracking
    running statistics. (Not `training` itself: torch.fx's GraphModule builds its container
    modules afresh, in training mode, around an eval-mode model's leaves.)"""
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training
               and m.track_running_stats for m in model.modules())


def _on_cuda(inputs: tuple) -> bool:
    return any(isinstance(v, torch.Tensor) and v.is_cuda for v in inputs)


def _stock(result: SwapResult, model: torch.nn.Module, example_inputs: tuple):
    """The model before swap as a configuration of the end-to-end check (torch_ops.tune.Stock):
    the converted layers back in their torch classes and the slots that in-place fusion
    replaced given their modules back, for the time of a measurement."""
    from . import tune as _tune
    swapped_classes, fused_in_slots = [], []

    def enter():
        swapped_classes[:] = [type(layer) for _, layer in result.replaced]
        for _, layer in result.replaced:
            layer.__class__ = result.original_class[id(layer)]
        fused_in_slots[:] = [parent._modules[key] for parent, key, _ in result._undo_slots]
        for parent, key, old in result._undo_slots:
            parent._modules[key] = old

    def leave():
        for (parent, key, _), new in zip(result._undo_slots, fused_in_slots):
            parent._modules[key] = new
        for (_, layer), cls in zip(result.replaced, swapped_classes):
            layer.__class__ = cls

    return _tune.Stock(enter, leave, lambda: model(*example_inputs))


def _give_back(result: SwapResult, model: torch.nn.Module) -> None:
    """The end-to-end check kept the stock model: undo the swap (restore) and say so."""
    result.restore()
    for block in result.fused:
        _policy.unregister(block.module)
    result.notes.append(f"the model before swap was the fastest: swap gave it back unchanged "
                        f"({len(result.replaced)} converted layer(s) and {len(result.fused)} "
                        f"fused block(s) undone)")
    result.replaced, result.fused, result.model, result.kept_stock = [], [], model, True


def _tune_end_to_end(result: SwapResult, model: torch.nn.Module, target: torch.nn.Module,
                     example_inputs: tuple, stock_ok: bool) -> None:
    """swap's end-to-end check (torch_ops.tune) over the converted and fused layers, and the
    model before swap where ``stock_ok`` (its parameters are as they were)."""
    from . import tune as _tune
    layers = [m for _, m in result.replaced] + [b.module for b in result.fused]
    stock = _stock(result, model, example_inputs) if stock_ok else None
    with torch.inference_mode():
        tuned = _tune.tune_end_to_end(layers, lambda: target(*example_inputs), stock=stock)
    if tuned is None:
        return
    result.tuned = tuned
    times = ", ".join(f"{n} {ms:.3f}" for n, ms in tuned["ms"].items())
    result.notes.append(f"end-to-end check on the example inputs (ms per forward: {times}): "
                        f"kept '{tuned['choice']}'")
    if tuned["choice"] == "stock":
        _give_back(result, model)


@torch.compiler.disable
def _channels_last_inputs(module, args, kwargs):
    """Forward pre-hook: 4-D tensor inputs to channels_last. Run eagerly under torch.compile
    (``torch.compiler.disable``): dynamo otherwise compiled the hook as a graph of its own, so a
    compiled swapped model ran two graphs a forward (``torch._dynamo.explain``: 2 graphs, 1
    break) and paid a second graph call's host time each forward."""
    def cl(v):
        if isinstance(v, torch.Tensor) and v.dim() == 4:
            return v.contiguous(memory_format=torch.channels_last)
        return v
    return tuple(cl(a) for a in args), {k: cl(v) for k, v in kwargs.items()}


def _auto_channels_last(model: torch.nn.Module) -> Tuple[bool, str]:
    """(convert?, why) for swap's channels_last='auto' (see :func:`swap`)."""
    from .nn import _FusedConvNd
    convs = [m for m in model.modules()
             if isinstance(m, torch.nn.Conv2d) or (isinstance(m, _FusedConvNd) and m._nsp == 2)]
    if not convs:
        return False, "no 2-D convolution: memory format left alone"
    dense = sum(1 for m in convs if m.groups == 1 and m.in_channels > 4)
    devices = {p.device for p in model.parameters()}
    cuda = [d for d in devices if d.type == "cuda"]
    if not cuda:
        return False, "parameters not on a CUDA device: memory format left alone"
    if min(torch.cuda.get_device_capability(d) for d in cuda) < (8, 0):
        return False, "GPU without sm_80 tensor cores: memory format left alone"
    if 2 * dense < len(convs):
        return False, (f"{dense} of {len(convs)} 2-D convolutions dense (under half): memory "
                       f"format left alone")
    return True, (f"{dense} of {len(convs)} 2-D convolutions dense: model and 4-D inputs moved "
                  f"to channels_last")


def swap(model: torch.nn.Module,
         filter: Optional[Callable[[str, torch.nn.Module], bool]] = None,  # noqa: A002
         cpu: bool = False, *, fuse: bool = True, policy: str = "rules",
         channels_last: Union[bool, str] = "auto", verbose: bool = False,
         example_inputs: Optional[tuple] = None, prune: bool = True,
         tune: bool = True) -> SwapResult:
    """Run ``model``'s convolutions on gpukern where that is faster, fusing Conv -> BatchNorm ->
    residual add -> activation blocks (module docstring: what happens, in order).

    - ``fuse`` (default True): fuse blocks (eval-mode models only); ``result.model`` is the
      model to run. ``fuse=False``: only the in-place conversion (``result.model is model``).
    - ``policy``: ``"rules"`` (default: the measured rule table, torch where no rule says
      gpukern is faster), ``"autotune"`` (time both on the first call of each input signature)
      or ``"all"`` (gpukern on every CUDA call). See :mod:`torch_ops.policy`.
    - ``cpu=True``: CPU inputs run gpukern's CPU kernels (reference kernels, slower than
      torch's); by default CPU inputs run torch.
    - ``filter(qualified_name, layer) -> bool`` limits conversion and fusion to the layers it
      accepts (the others are listed as skipped, "excluded by filter");
      ``filter=torch_ops.has_fast_path`` keeps only the layers gpukern has a specialised kernel
      for (depthwise with multiplier 1 or single-channel, stride 1).
    - ``channels_last``: ``True`` puts the 4-D parameters and inputs of ``result.model`` in
      channels_last (a forward pre-hook converts 4-D inputs; values are unchanged, and the
      model's own non-fused parameters are converted in place); ``False`` leaves the memory
      format alone; ``"auto"`` (default) does it where tensor cores gain from it: the model's
      parameters are on a CUDA GPU with tensor cores (sm_80+) and at least half of its 2-D
      convolutions are dense (groups = 1, more than 4 input channels: ResNet's and MobileNet's
      channel-mixing layers, which cuDNN and gpukern run faster over NHWC), else nothing.
      ``result.notes`` says what was done.
    - ``example_inputs``: a tuple of inputs to run once after swapping (decisions made now).
    - ``prune`` (default True; with ``example_inputs`` and a policy other than ``"all"``): a
      layer converted in place whose every decision for the example inputs is torch is turned
      back into its torch class (listed in ``result.pruned``), so it costs a host-bound model
      nothing per call; other input shapes then run torch on it too. ``prune=False`` keeps it
      converted, deciding again for each new input signature.
    - ``tune`` (default True; with CUDA ``example_inputs``, ``policy="rules"`` and no BatchNorm
      in training mode, whose running statistics each forward would change): time the whole
      model on the example inputs with the rule table's choices, with every fused block on
      gpukern, with every layer on gpukern and with every layer on torch, and keep the fastest
      (a tie keeps the table's) for those input signatures
      (:mod:`torch_ops.tune`; ``result.tuned`` and ``result.notes`` give the times). The table
      judges each layer by its GPU time alone; a host-bound model gains from the launches a
      fused block saves even where its kernel is no faster.
    - ``verbose=True``: print the per-layer table (:meth:`SwapResult.table`).

    Returns a :class:`SwapResult`.
    """
    if channels_last not in (True, False, "auto"):
        raise ValueError(f"torch_ops.swap: channels_last={channels_last!r}; expected True, False "
                         f"or 'auto'")
    if policy not in _policy.POLICIES:
        raise ValueError(f"torch_ops.swap: policy={policy!r}; expected one of "
                         f"{', '.join(_policy.POLICIES)}")
    if example_inputs is not None and not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    result = SwapResult(policy=policy)
    reasons = {}

    def reason_of(name: str, module: torch.nn.Module) -> Optional[str]:
        if id(module) in reasons:
            return reasons[id(module)]
        reason = skip_reason(module)
        if reason is None and filter is not None and not filter(name, module):
            reason = "excluded by filter"
            if filter is has_fast_path:
                reason = f"excluded by has_fast_path: {fast_path_reason(module)}"
        reasons[id(module)] = reason
        return reason

    def accept(name: str, module: torch.nn.Module) -> bool:
        return reason_of(name, module) in (None, "already a gpukern layer")

    target = model
    if fuse and model.training:
        if any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
            warnings.warn("torch_ops.swap: the model is in training mode: nothing fused "
                          "(BatchNorm folding needs eval mode's running statistics, and gpukern is "
                          "inference-only); call model.eval() before swap to fuse",
                          stacklevel=2)
        result.notes.append("model in training mode: not fused")
    elif fuse:
        from . import fuse as _fuse
        try:
            gm, blocks, notes = _fuse.fuse_fx(model, accept, example_inputs)
            result.notes += notes
            if gm is not None:
                target = gm
                result.fused = blocks
        except Exception as e:  # noqa: BLE001  (untraceable: control flow, unsupported ops)
            first = (str(e).splitlines() or [""])[0][:120]
            result.notes.append(f"torch.fx cannot trace the model ({type(e).__name__}: "
                                f"{first}); fused inside nn.Sequential containers only")
            blocks, undo, notes = _fuse.fuse_sequential(model, accept)
            result.fused, result._undo_slots = blocks, undo
            result.notes += notes
        for block in result.fused:
            _policy.register(block.module, policy, cpu)
    result.model = target

    seen = set()
    for root in ([model] if target is model else [model, target]):
        for name, module in root.named_modules(remove_duplicate=False):
            if not isinstance(module, tuple(GPUKERN_CLASS)) or id(module) in seen:
                continue
            seen.add(id(module))
            if torch_class_of(type(module)) is not None:
                continue
            reason = reason_of(name, module)
            if reason is not None:
                result.skipped.append((name, reason))
                continue
            result.original_class[id(module)] = type(module)
            module.__class__ = gpukern_class(type(module))
            _policy.register(module, policy, cpu)
            result.replaced.append((name, module))

    if channels_last == "auto":
        channels_last, why = _auto_channels_last(target)
        result.notes.append(f"channels_last='auto': {why}")
    if channels_last:
        target.to(memory_format=torch.channels_last)
        result._hooks.append(target.register_forward_pre_hook(_channels_last_inputs,
                                                              with_kwargs=True))
    if example_inputs is not None:
        with torch.inference_mode():
            target(*example_inputs)
        if tune and policy == "rules" and _on_cuda(example_inputs):
            if _updates_state(target):
                result.notes.append("end-to-end check skipped: a BatchNorm in training mode "
                                    "(each forward would update its running statistics)")
            else:
                _tune_end_to_end(result, model, target, example_inputs,
                                 stock_ok=not channels_last)
        if prune and policy != "all" and not result.kept_stock:
            _prune(result)
    if verbose:
        print(result.summary())
        print(result.table())
    return result


def unswap(model: torch.nn.Module) -> int:
    """Turn every ``torch_ops.nn`` layer of ``model`` converted in place back into its torch
    class; returns how many. (Fused blocks are not undone: use :meth:`SwapResult.restore`.)"""
    n = 0
    for module in model.modules():
        cls = torch_class_of(type(module))
        if cls is not None:
            module.__class__ = cls
            _policy.unregister(module)
            n += 1
    return n
