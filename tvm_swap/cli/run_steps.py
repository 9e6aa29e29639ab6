"""`tvm-swap run` on a training step: each call is the next step (the module keeps the updated params and
optimizer state), so the run chains `steps` calls, reports the loss of each, and with --compare-unlimited
chains the unlimited build the same way (its new params fed back per the manifest's updates) and checks
every step's outputs bitwise."""
from __future__ import annotations

import numpy as np


def update_positions(manifest) -> dict[int, int]:
    """flat result index -> index of the function parameter that result replaces for the next step"""
    new_to_old = dict(manifest.updates)
    position = {p.tensor: i for i, p in enumerate(manifest.params) if p.tensor >= 0}
    out = {}
    for i, o in enumerate(manifest.outputs):
        old = new_to_old.get(o.tensor)
        if old is not None and old in position:
            out[i] = position[old]
    return out


def _bitwise_equal(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
                                    for x, y in zip(a, b))


def run_steps(m, library: str, feeds: dict, steps: int, compare_unlimited: bool) -> dict:
    """Chain `steps` training steps of SwapModule `m` (and of the unlimited build when asked) -> the facts."""
    from .unlimited import _flat, run_unlimited, unlimited_args

    ordered = [feeds[n] for n in m.input_names]
    steps = max(1, int(steps))
    losses, equal, t_unl = [], [], []
    if compare_unlimited:
        uargs = unlimited_args(m.manifest, feeds, m.params())
        feed_back = update_positions(m.manifest)
    for _ in range(steps):
        outs = _flat(m(*ordered))
        losses.append(float(np.asarray(outs[0]).reshape(-1)[0]))
        if compare_unlimited:
            ref, t = run_unlimited(library, uargs, m.manifest.func_name, m.build_info.get("recipe"))
            t_unl.append(t)
            equal.append(_bitwise_equal(outs, ref))
            for i, pos in feed_back.items():
                uargs[pos] = ref[i]
    info: dict = {"steps": steps, "loss_per_step": losses}
    if compare_unlimited:
        info["outputs_bitwise_equal"] = all(equal)
        info["bitwise_equal_per_step"] = equal
        info["unlimited_time_s"] = float(np.median(t_unl))
    return info
