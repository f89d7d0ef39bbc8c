"""swap's end-to-end check: the rule table's choices against whole-model alternatives, timed on
the example inputs.

The rule table (:mod:`torch_ops.policy`) decides each layer from the GPU time of that layer alone
(the census's graph-replayed times). An eager model is often host-bound instead: MobileNetV3 on
an H100 takes about as long per forward at batch 16 as at batch 1, and there a fused block that
runs one gpukern kernel where torch's sequence runs two or three saves a launch's host time even
when its kernel is no faster. So ``swap(model, example_inputs=...)`` (``policy="rules"``, CUDA
inputs) times the whole model on those inputs under a few configurations of the layers' choices
for the example signatures:

- ``rules``: as the table decided;
- ``fused``: every fused block that runs gpukern's fused op on gpukern, the rest as the table;
- ``all``: every converted layer on gpukern;
- ``torch``: every layer on torch (BatchNorm still folded into the fused blocks);
- ``stock``: the model as it was before swap (the converted layers back in their torch classes,
  the unfused model's forward), where swap can give it back exactly (:class:`Stock`). Unless
  the chosen configuration runs below ``KEEP_BELOW_STOCK`` of stock's time (paired per round)
  and faster than stock in at least ``KEEP_ROUNDS_FASTER`` of the rounds, swap gives the model
  back unchanged: a swapped model is then the stock one, never slower than
  it (a host-bound model whose layers gain nothing, e.g. ConvNeXt-T at batch 1).

Each configuration is warmed up, then timed in interleaved rounds (the order rotated each round;
9 to 31 of them, as many as fill about 2 s: :func:`rounds_for`): CUDA events around a few
back-to-back forwards issued with the GPU idle, so that host time counts where the model is
host-bound; per configuration the median. A configuration whose single call is
over ``PRESCREEN`` times the rules' is dropped without the rounds (gpukern's general kernels on
layers the table keeps on torch can be many times slower). The table's choice stays unless another
configuration is faster (``SWITCH``); the choice is applied to the example
signatures only (other input signatures keep deciding by the table), each decision's reason says
so, ``result.notes`` lists the times and ``result.tuned`` holds them.
"""
import statistics
import time
from typing import Callable, Dict, List, Optional

import torch

from . import policy as _policy

__all__ = ["CONFIGURATIONS", "Stock", "tune_end_to_end"]

CONFIGURATIONS = ("rules", "fused", "all", "torch")
#: Another configuration replaces the rules' choices when its median forward time is below this
#: fraction of theirs. 1.0: the fastest measured wins (a tie keeps the rules). Configurations
#: within the run-to-run spread of each other (a few % for a host-bound model) are equally good
#: choices; a margin here only kept measured-slower ones (an H100 run: Conformer at batch 1 in
#: fp32 kept the rules at 9.84 ms per forward against every layer on gpukern at 9.56, 2.9%
#: faster, and ran 0.99x of stock).
SWITCH = 1.0
#: Where the stock model is timed too, swap keeps its configuration only when it runs below this
#: fraction of stock's time (paired: per round, the configuration's time over stock's, then the
#: median over the rounds); otherwise it gives the model back. The stock model is exactly as fast
#: as itself, while the fastest of four configurations a few % apart is as often a lucky draw: a
#: host-bound ConvNeXt-T (bf16, batch 16, channels_last, H100) kept the rules on a check that
#: timed them at or below stock and then ran 0.96x of stock in benchmarks/models.py's paired rounds.
KEEP_BELOW_STOCK = 0.97
#: ... and only when it ran faster than stock in at least this fraction of the rounds: on a noisy
#: host (Conformer at batch 1, bf16, H100: the stock model timed 21.5 ms and again 27.4 ms in
#: one run) a median ratio below KEEP_BELOW_STOCK can be a few lucky rounds, and the stock model
#: given back is exactly as fast as itself.
KEEP_ROUNDS_FASTER = 0.75
#: Timed rounds per configuration (interleaved) and the target length of one timed sample. The
#: rounds fill about CHECK_MS (at least ROUNDS, at most MAX_ROUNDS): a host-bound model's forward
#: varies by 5-10% from call to call on a busy host (Conformer at batch 1: 20 ms a forward on an
#: H100's host, one forward a sample), and 9 samples of it did not separate configurations a few
#: % apart.
ROUNDS = 9
MAX_ROUNDS = 31
CHECK_MS = 2000.0
SAMPLE_MS = 15.0
#: Configurations whose single warmed-up call is over this multiple of the rules' are not timed.
PRESCREEN = 1.5
#: The device types whose decided signatures the check covers (tests add "cpu").
DEVICE_TYPES = ("cuda",)


def _cuda_keys(layer) -> List[tuple]:
    return [k for k in layer.__dict__.get("_gk_fast", {})
            if getattr(k[3], "type", None) in DEVICE_TYPES]


def _signature(key: tuple) -> tuple:
    """The decision cache's signature of an eager-cache key (policy._eager_choice's form)."""
    shape, strides, dtype, device, has_res = key
    return (tuple(shape), tuple(strides), dtype, f"{device.type}:{device.index}", has_res)


def configurations(layers) -> Dict[str, Dict[int, Dict[tuple, bool]]]:
    """{configuration name: {id(layer): {eager-cache key: gpukern?}}} over the CUDA signatures
    the layers have decided; configurations equal to an earlier one are left out."""
    from .nn import _FusedConvNd
    byid = {id(layer): layer for layer in layers}
    rules = {}
    for layer in layers:
        keys = _cuda_keys(layer)
        if keys:
            rules[id(layer)] = {k: bool(layer._gk_fast[k]) for k in keys}

    def fused_op(i):
        return isinstance(byid[i], _FusedConvNd) and byid[i]._gk_runs_fused_op()

    cands = {
        "fused": {i: {k: v or fused_op(i) for k, v in d.items()} for i, d in rules.items()},
        "all": {i: dict.fromkeys(d, True) for i, d in rules.items()},
        "torch": {i: dict.fromkeys(d, False) for i, d in rules.items()},
    }
    out = {"rules": rules}
    for name in CONFIGURATIONS[1:]:
        if all(cands[name] != seen for seen in out.values()):
            out[name] = cands[name]
    return out


class Stock:
    """The stock model as a configuration of the check: ``enter()`` turns the swapped model back
    into the stock one (in place, reversibly), ``forward()`` runs the stock model on the example
    inputs, ``leave()`` undoes ``enter()``."""

    def __init__(self, enter: Callable[[], None], leave: Callable[[], None],
                 forward: Callable[[], object]):
        self.enter, self.leave, self.forward = enter, leave, forward


def _apply(layers, config) -> None:
    if isinstance(config, Stock):
        return
    for layer in layers:
        choices = config.get(id(layer))
        if choices:
            layer._gk_fast.update(choices)


def _forward_ms(forward: Callable[[], object], reps: int) -> float:
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        forward()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / reps


def _single_ms(forward: Callable[[], object]) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    forward()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def _measure(layers, config, forward: Callable[[], object], measure: Callable):
    """measure(forward) with the layers in ``config`` (a Stock: the stock model, left again)."""
    if not isinstance(config, Stock):
        _apply(layers, config)
        return measure(forward)
    config.enter()
    try:
        return measure(config.forward)
    finally:
        config.leave()


def rounds_for(configs: int, reps: int, forward_ms: float) -> int:
    """Rounds of the check: as many as fill CHECK_MS, at least ROUNDS, at most MAX_ROUNDS."""
    budget = CHECK_MS / max(configs * reps * forward_ms, 1e-3)
    return int(min(MAX_ROUNDS, max(ROUNDS, budget)))


def time_configurations(layers, configs: Dict[str, object],
                        forward: Callable[[], object]) -> Dict[str, float]:
    """{name: median ms per forward} of the configurations timed (module docstring); the
    layers are left in the rules' configuration."""
    def warm_single(fwd):
        for _ in range(2):
            fwd()
        return min(_single_ms(fwd) for _ in range(2))

    single = {name: _measure(layers, config, forward, warm_single)
              for name, config in configs.items()}
    timed = [n for n in configs if n == "rules" or single[n] <= PRESCREEN * single["rules"]]
    reps = max(1, min(10, round(SAMPLE_MS / max(single["rules"], 1e-3))))
    rounds = rounds_for(len(timed), reps, single["rules"])
    samples = {n: [] for n in timed}
    for r in range(rounds):
        for name in timed[r % len(timed):] + timed[:r % len(timed)]:
            samples[name].append(_measure(layers, configs[name], forward,
                                          lambda fwd: _forward_ms(fwd, reps)))
    _apply(layers, configs["rules"])
    times = Times({n: statistics.median(v) for n, v in samples.items()})
    if "stock" in samples:
        ratios = {n: [a / b for a, b in zip(v, samples["stock"])] for n, v in samples.items()}
        times.vs_stock = {n: statistics.median(r) for n, r in ratios.items()}
        times.faster_than_stock = {n: sum(x < 1.0 for x in r) / len(r)
                                   for n, r in ratios.items()}
    return times


class Times(dict):
    """{configuration: median ms per forward}; where stock was timed, ``vs_stock``:
    {configuration: the median over the rounds of its time over stock's in the same round} and
    ``faster_than_stock``: {configuration: the fraction of the rounds in which it ran faster}."""
    vs_stock: Optional[Dict[str, float]] = None
    faster_than_stock: Optional[Dict[str, float]] = None


def choose(times: Dict[str, float]) -> str:
    """The configuration to keep: of the swapped ones, the fastest where it beats the rules' by
    SWITCH; then "stock" (swap gives the model back) where stock was timed and that one does not
    run below KEEP_BELOW_STOCK of stock's time (the paired ratio where the timer kept one) or,
    where the timer counted them, ran faster than stock in fewer than KEEP_ROUNDS_FASTER of the
    rounds."""
    swapped = {n: t for n, t in times.items() if n != "stock"}
    best = min(swapped, key=swapped.get)
    if not swapped[best] < SWITCH * swapped["rules"]:
        best = "rules"
    if "stock" in times:
        paired = getattr(times, "vs_stock", None) or {}
        ratio = paired.get(best, times[best] / times["stock"])
        if not ratio < KEEP_BELOW_STOCK:
            return "stock"
        faster = (getattr(times, "faster_than_stock", None) or {}).get(best)
        if faster is not None and faster < KEEP_ROUNDS_FASTER:
            return "stock"
    return best


def _record(layers, configs, choice: str, times: Dict[str, float]) -> None:
    """Apply the chosen configuration to the example signatures and rewrite their decisions
    (the stock model: nothing here, swap gives the model back)."""
    config = configs[choice]
    if isinstance(config, Stock):
        return
    _apply(layers, config)
    reason = (f"swap's end-to-end check: '{choice}' ran {times[choice]:.3f} ms per forward "
              f"against the rule table's {times['rules']:.3f}")
    for layer in layers:
        for k, gk in config.get(id(layer), {}).items():
            if gk == configs["rules"][id(layer)][k]:
                continue
            algo = _policy._algorithm(layer, k[0], k[1], k[2]) if gk else None
            layer._gk_decisions[_signature(k)] = _policy.Decision(
                "gpukern" if gk else "torch", reason, algorithm=algo)


def tune_end_to_end(layers, forward: Callable[[], object],
                    timer: Optional[Callable] = None,
                    stock: Optional[Stock] = None) -> Optional[dict]:
    """Time the configurations of ``layers`` (swapped layers decided on CUDA example inputs) with
    ``forward`` (one forward of the model on them), and ``stock`` (the model before swap) where
    given, keep the best (module docstring). Returns ``{"choice": name, "ms": {name: ms}}``
    ("stock": the caller gives the model back), or None when there was nothing to choose."""
    configs = configurations(layers)
    if stock is not None:
        configs["stock"] = stock
    if len(configs) < 2:
        return None
    times = (timer or time_configurations)(layers, configs, forward)
    choice = choose(times)
    _record(layers, configs, choice, times)
    return {"choice": choice, "ms": times}
