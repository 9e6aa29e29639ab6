"""`tvm-swap compile --target cuda ...` on a machine without a GPU (a build server): plan with the device
spec's costs (roofline: no kernel can be timed), build the fatbin and export the library without running
anything. It carries its params as a normal compile's library does, with its example inputs beside it, so
`tvm-swap run MODEL.so` works unchanged on the GPU machine the library is copied to."""
from __future__ import annotations


DEFAULT_CUDA_DEVICE = "h100"


def gpu_missing_for(target) -> str:
    """Why `target` cannot run here ('' when it can or is not CUDA)."""
    from relay_passes.cuda_build import is_cuda

    if not is_cuda(target):
        return ""
    from ..cuda_env import why_no_gpu

    return why_no_gpu()


def _persistent_names(mod, func_name: str = "main") -> list[str]:
    f = mod[func_name]
    k = int(f.attrs["num_input"]) if f.attrs is not None and "num_input" in f.attrs else len(f.params)
    return [p.name for p in f.params[k:]]


def params_archive_for(mod, params: dict, info: dict | None = None) -> bytes:
    """The params the library carries (runtime_ext.params_bundle), in the order of the function's params."""
    from runtime_ext.params_bundle import params_archive
    from runtime_ext.swap_module import STORED_INFO

    names = [n for n in _persistent_names(mod) if n in params]
    return params_archive(names, params, {k: v for k, v in (info or {}).items() if k in STORED_INFO})


def cross_compile(mod, params: dict, output: str, *, target, mem_limit, device=None, planner="swapadvisor",
                  budget_s=10.0, seed=0, generations=None, fuse_max_depth=None, progress=False, pool=None,
                  notes: dict | None = None, recompute=None, split_dense: bool = False, host_ops=None,
                  split_ops: bool = False, split_k=None) -> dict:
    """Plan (roofline costs of `device`), build and export; returns the facts `tvm-swap compile` prints.
    recompute: "on" / "off", or None for the planner's default."""
    from runtime_ext.library_check import write_check
    from runtime_ext.params_bundle import append_params

    from ..limits.mem_limit import limit_facts
    from ..pipeline import compile_model

    spec = device or DEFAULT_CUDA_DEVICE
    cm = compile_model(mod, target=target, mem_limit=mem_limit, device=spec, planner=planner, budget_s=budget_s,
                       seed=seed, generations=generations, fuse_max_depth=fuse_max_depth, profile=False,
                       progress=progress, pool=pool, split_dense=split_dense, split_ops=split_ops, split_k=split_k,
                       **({} if recompute is None else {"recompute": recompute}),
                       **({} if host_ops is None else {"host_ops": host_ops}))
    cm.executable.export_library(output)
    # frozen weights ship in their compute layout (relay_passes.param_layout), as SwapModule.export_library's
    from relay_passes.param_layout import folded_layouts

    layouts = folded_layouts(cm.lowered["main"])
    shipped = layouts.to_compute(params or {}) if layouts is not None else (params or {})
    append_params(output, params_archive_for(cm.lowered if layouts is not None else mod, shipped, notes))
    write_check(output)
    plan = cm.plan
    counts = {k: sum(1 for a in plan.actions if a.kind == k) for k in ("swap_out", "swap_in")}
    return {"planner": plan.planner, "pool": plan.pool.kind, "mem_limit_bytes": int(plan.mem_limit),
            "pool_bytes": int(plan.pool.total_bytes()), "predicted_time_s": plan.predicted.get("time_s"),
            "swap_out_count": counts["swap_out"], "swap_in_count": counts["swap_in"],
            "swap_out_bytes": plan.predicted.get("swap_out_bytes"), "swap_in_bytes": plan.predicted.get("swap_in_bytes"),
            **({"host_ops": len(plan.host_ops)} if plan.host_ops else {}),
            **cm.info, "cost": f"roofline of the {cm.device.name} spec (cross-compiled: nothing was run)",
            "ran": False, **limit_facts(cm.graph, plan.mem_limit),
            **{k: v for k, v in (notes or {}).items() if k != "recipe"}}
