"""How `tvm-swap compile` made a model, carried inside the library (runtime_ext.swap_module.RECIPE), so that
`tvm-swap run --compare-unlimited` builds the unlimited reference on demand instead of a second library
being left beside the first: the same import, params, training step and fusion, compiled with TVM's own
memory plan."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import asdict

from ..errors import TvmSwapError

_BUILT: dict[str, object] = {}       # library path -> its unlimited build's module (one build per process)


def make_recipe(model: str, *, shapes, params, init, seed, train, target, fuse_max_depth) -> str:
    absolute = os.path.abspath(model) if os.path.exists(model) else model
    return json.dumps({"model": absolute, "cwd": os.getcwd(), "shapes": {k: list(v) for k, v in (shapes or {}).items()},
                       "params": os.path.abspath(params) if params else None, "init": init, "seed": seed,
                       "train": asdict(train) if train is not None else None, "target": str(target),
                       "fuse_max_depth": fuse_max_depth})


def unlimited_module(library: str, recipe: str | None):
    """The unlimited build of the model `library` was compiled from, built now (once per process)."""
    import tvm

    from .train_args import TrainOptions, prepare_model

    if library in _BUILT:
        return _BUILT[library]
    if not recipe:
        raise TvmSwapError(f"--compare-unlimited needs the model {library!r} was compiled from, and the library does "
                           f"not say which (it was not made by `tvm-swap compile`); compare in Python with "
                           f"relay_passes.lower.lower_unlimited_build(mod, target)")
    r = json.loads(recipe)
    train = r["train"]
    if train is not None:
        train = TrainOptions(**{**train, "label_shape": tuple(train["label_shape"]) if train["label_shape"] else None})
    sys.path.insert(0, r["cwd"])       # a `package.module:factory` spec is imported as it was at compile time
    try:
        mod, _, _, _ = prepare_model(r["model"], shapes={k: tuple(v) for k, v in r["shapes"].items()},
                                     params=r["params"], init=r["init"], seed=r["seed"], train=train)
    except (OSError, TvmSwapError) as e:
        raise TvmSwapError(f"--compare-unlimited rebuilds the model {library!r} was compiled from "
                           f"({r['model']!r}), which failed here: {e}") from None
    finally:
        sys.path.remove(r["cwd"])
    from ..caches.build import export_unlimited_build

    # from the disk cache when this model was compared before (tvm_swap.caches.build)
    path = os.path.join(tempfile.mkdtemp(prefix="tvm_swap_unlimited_"), "unlimited.so")
    export_unlimited_build(mod, r["target"], path, r["fuse_max_depth"])
    _BUILT[library] = tvm.runtime.load_module(path)
    return _BUILT[library]
