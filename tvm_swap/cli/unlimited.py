"""The unlimited reference build beside a library: its arguments, one call of it, outputs flattened. Shared by
`tvm-swap run` (cli/run.py) and its chained training steps (cli/run_steps.py)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

UNLIMITED_SUFFIX = ".unlimited.so"      # written beside the library by older compiles


def _flat(res) -> list[np.ndarray]:
    import tvm

    if isinstance(res, tvm.runtime.Tensor):
        return [res.numpy()]
    if isinstance(res, np.ndarray):
        return [res]
    out = []
    for r in res:
        out.extend(_flat(r))
    return out


def unlimited_args(manifest, feeds: dict, params: dict) -> list[np.ndarray]:
    """The plain function's arguments in its own parameter order (unused params get zeros). Params the
    program folded into their compute layout (tvm_swap.param_layouts) are the user's here, as the plain
    build takes them: `params` is in the user's layout (SwapModule.params)."""
    from tvm_swap.input_slices import input_slices_of
    from tvm_swap.param_layouts import layouts_of

    layouts = layouts_of(manifest.meta)
    slices = input_slices_of(manifest.meta)     # (an input the program reads in batch slices: the user's whole)
    if slices is not None:
        users = slices.user_specs([(p.name, p.shape, p.dtype) for p in manifest.inputs])
        args = [feeds[n] for n, _, _ in users]
        if layouts is None:
            return args + [params[p.name] if p.name in params else np.zeros(p.shape, p.dtype)
                           for p in manifest.params if p.role != "input"]
        return args + [params[n] if n in params else np.zeros(s, d) for n, s, d in layouts.user]
    if layouts is not None:
        args = [feeds[p.name] for p in manifest.inputs]
        return args + [params[n] if n in params else np.zeros(s, d) for n, s, d in layouts.user]
    args = []
    for p in manifest.params:
        if p.role == "input":
            args.append(feeds[p.name])
        elif p.name in params:
            args.append(params[p.name])
        else:
            args.append(np.zeros(p.shape, p.dtype))
    return args


def run_unlimited(library: str, args: list[np.ndarray], func_name: str, recipe: str | None = None) -> tuple:
    """One call of the unlimited build on the same arguments -> (outputs, seconds). The build is the
    `.unlimited.so` beside the library when there is one (older compiles), else made now from the recipe the
    library carries (cli/recipe.py)."""
    import tvm
    from tvm import relax

    side = library + UNLIMITED_SUFFIX
    if Path(side).exists():
        lib = tvm.runtime.load_module(side)
    else:
        from .recipe import unlimited_module

        lib = unlimited_module(library, recipe)
    vm = relax.VirtualMachine(lib, tvm.cpu())
    args = [tvm.runtime.tensor(np.ascontiguousarray(a)) for a in args]
    t0 = time.perf_counter()
    res = vm[func_name](*args)
    return _flat(res), time.perf_counter() - t0
