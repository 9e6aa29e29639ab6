"""Values for every parameter of a model from its shapes alone: for sizing and benchmarking an architecture
that has no trained weights yet (`tvm-swap compile MODEL --init random|zeros`, or `params=init_params(mod)`).

    from tvm_swap.frontends.init_params import init_params
    mod, _ = from_mxnet("resnet18_v1-symbol.json", shapes={"data": (1, 3, 224, 224)})   # graph only
    m = tvm_swap.build(mod, mem_limit="50%", params=init_params(mod, "random", seed=0))

"random" is seeded and deterministic: uniform(-1, 1) / sqrt(fan_in) (so activations stay in range through
deep stacks), uniform(0.5, 1.5) for BatchNorm variances (which must be positive), zeros for integer
parameters. "zeros" is zeros except ones for BatchNorm variances (a zero variance divides by eps alone).
The weights are not trained: `weights_note` says so in the words a library records.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import TvmSwapError

INIT_KINDS = ("random", "zeros")


def _is_variance(name: str) -> bool:
    return name.endswith("_var") or name.endswith("running_var") or name.endswith("moving_var")


def _param_specs(mod, func_name: str):
    """[(name, shape, dtype)] of func_name's parameters after its `num_input` data inputs."""
    f = mod[func_name]
    k = int(f.attrs["num_input"]) if f.attrs is not None and "num_input" in f.attrs else 0
    out = []
    for p in f.params[k:]:
        ty = p.ty
        if not hasattr(ty, "shape") or ty.shape is None:
            raise TvmSwapError(f"parameter {p.name!r} has no static shape ({ty}); give its value instead")
        out.append((p.name, [int(d) for d in ty.shape.values], str(ty.dtype.dtype)))
    return out


def init_params(mod, how: str = "random", seed: int = 0, func_name: str = "main",
                only: set | None = None) -> dict[str, np.ndarray]:
    """{name: array} for the parameters of `func_name` after its `num_input` inputs (only those in `only`
    when given), made from their shapes: how = "random" (seeded) or "zeros"."""
    if how not in INIT_KINDS:
        raise TvmSwapError(f"unknown init {how!r}; choose one of {', '.join(INIT_KINDS)}")
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, dtype in _param_specs(mod, func_name):
        if only is not None and name not in only:
            continue
        if not dtype.startswith("float"):
            out[name] = np.zeros(shape, dtype)
        elif _is_variance(name):
            out[name] = (rng.uniform(0.5, 1.5, shape) if how == "random" else np.ones(shape)).astype(dtype)
        elif how == "zeros":
            out[name] = np.zeros(shape, dtype)
        else:
            fan_in = math.prod(shape[1:]) if len(shape) > 1 else max(shape[0] if shape else 1, 1)
            out[name] = (rng.uniform(-1.0, 1.0, shape) / math.sqrt(fan_in)).astype(dtype)
    return out


def weights_note(how: str, seed: int, count: int) -> str:
    """What a library built with initialised params records about its weights."""
    what = f"random (seed {seed})" if how == "random" else "zeros"
    return f"{count} params initialised {what}: NOT trained weights (for sizing and benchmarking)"
