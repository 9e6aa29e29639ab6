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


def result_groups(manifest) -> list[tuple]:
    """[(the user parameter a result replaces, or None; [flat output indices])], one per result of the user's
    step: a trainable weight split into row chunks (relay_passes.split_dense_train) returns one result per
    chunk, consecutive, joined here into the user's one (so the unsplit reference build lines up)."""
    from tvm_swap.param_layouts import layouts_of

    layouts = layouts_of(manifest.meta)
    chunk_of = {f.name: f for f in layouts.folds if f.chunk is not None} if layouts is not None else {}
    new_to_old = dict(manifest.updates)
    name_of = {p.tensor: p.name for p in manifest.params if p.tensor >= 0}
    groups: list = []
    for i, o in enumerate(manifest.outputs):
        name = name_of.get(new_to_old.get(o.tensor))
        fold = chunk_of.get(name)
        if fold is not None and groups and groups[-1][0] == fold.source:
            groups[-1][1].append(i)
        else:
            groups.append((fold.source if fold is not None else name, [i]))
    return groups


def _joined(manifest, outs: list, groups: list) -> list:
    """The step's results in the user's layout: each split weight's chunks concatenated along their axis."""
    from tvm_swap.param_layouts import layouts_of

    layouts = layouts_of(manifest.meta)
    axis = {f.source: f.chunk[0] for f in layouts.folds if f.chunk is not None} if layouts is not None else {}
    return [outs[ix[0]] if len(ix) == 1 else np.concatenate([outs[i] for i in ix], axis=axis[src])
            for src, ix in groups]


def _user_params(manifest) -> tuple:
    from tvm_swap.param_layouts import layouts_of

    return layouts_of(manifest.meta).user


def _bitwise_equal(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
                                    for x, y in zip(a, b))


def run_steps(m, library: str, feeds: dict, steps: int, compare_unlimited: bool) -> dict:
    """Chain `steps` training steps of SwapModule `m` (and of the unlimited build when asked) -> the facts."""
    from .unlimited import _flat, run_unlimited, unlimited_args

    ordered = [feeds[n] for n in m.input_names]
    steps = max(1, int(steps))
    losses, equal, t_unl = [], [], []
    groups = result_groups(m.manifest)
    split = any(len(ix) > 1 for _, ix in groups)      # weights in row chunks: compare in the user's layout
    if compare_unlimited:
        uargs = unlimited_args(m.manifest, feeds, m.params())
        feed_back = update_positions(m.manifest)
        if split:
            user = [n for n, _, _ in _user_params(m.manifest)]
            feed_back = {j: len(m.input_names) + user.index(src) for j, (src, _) in enumerate(groups) if src in user}
    for _ in range(steps):
        outs = _flat(m(*ordered))
        losses.append(float(np.asarray(outs[0]).reshape(-1)[0]))
        if compare_unlimited:
            ref, t = run_unlimited(library, uargs, m.manifest.func_name, m.build_info.get("recipe"))
            t_unl.append(t)
            equal.append(_bitwise_equal(_joined(m.manifest, outs, groups) if split else outs, ref))
            for i, pos in feed_back.items():
                uargs[pos] = ref[i]
    info: dict = {"steps": steps, "loss_per_step": losses}
    if compare_unlimited:
        info["outputs_bitwise_equal"] = all(equal)
        info["bitwise_equal_per_step"] = equal
        info["unlimited_time_s"] = float(np.median(t_unl))
    return info
