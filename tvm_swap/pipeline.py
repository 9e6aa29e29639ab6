"""The steps behind `tvm_swap.build`: lower, extract, time, plan (verified), apply, relax.build; the result
is a SwapModule.

    m = tvm_swap.build(mod, target="llvm", mem_limit="60%", params=params)   # '60%' of the no-swap peak
    y = m(x)

Steps (each a module with one job):
    relay_passes.lower        TVM's pipeline up to fused kernels with explicit allocations
    tvm_swap.graph.extract    DataflowGraph of the lowered function
    tvm_swap.cost.profile          per-op seconds: kernels timed on llvm (profile=True or "insitu"), else the
                              roofline of tvm_swap.cost.roofline
    tvm_swap.planner.api      plan_graph: every plan it returns passed tvm_swap.verify (InfeasibleLimitError
                              below the smallest feasible limit)
    relay_passes.apply        the plan written into the program (order, pool objects, swap calls, plan JSON)
    relay_passes.lower.build_lowered   finalize passes + codegen (relax_pipeline=None)

The plan is verified once on this path (inside plan_graph); apply checks only the structure it relies on,
and the runtime checks what it relies on again when a library is loaded, since a library file is untrusted
input (runtime_ext.executor).

mem_limit=None plans with no limit: the "noswap" planner at the memory TVM's own static plan needs.
`compile_model` stops before the runtime (for targets with no runtime backend here, e.g. CUDA on a machine
without a GPU); `build` wraps its result in a SwapModule.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from .errors import TvmSwapError


@dataclass
class CompiledModel:
    executable: object           # relax VMExecutable with the plan and manifest inside
    plan: object                 # the verified Plan it executes
    graph: object                # DataflowGraph of the lowered function
    lowered: object              # relay_passes.lower output (the unplanned program)
    op_time: object              # seconds per op the plan was made with
    device: object               # DeviceSpec the plan was made for
    target: object               # tvm Target
    info: dict = field(default_factory=dict)


def _device_spec(device, target_kind: str, bandwidth):
    from .cost.devices import DeviceSpec, get_device
    from .units import parse_bandwidth

    spec = get_device(device if device is not None else ("cpu" if target_kind == "llvm" else "h100"))
    if bandwidth is None:
        return spec
    if isinstance(bandwidth, DeviceSpec):
        return spec.with_link(bandwidth.h2d_bandwidth, bandwidth.duplex_bandwidth)
    try:
        bw = parse_bandwidth(bandwidth)
    except ValueError as e:
        raise TvmSwapError(f"bandwidth {bandwidth!r}: {e}") from None
    if bw <= 0:
        raise TvmSwapError(f"bandwidth must be positive, got {bandwidth!r}")
    return spec.with_link(bw)


def micro_batched(mod, k: int, mem_limit, target="llvm", fuse_max_depth=None, func_name: str = "main"):
    """(the module with `func_name` in k slices of its batch (relay_passes.micro_batch.split_batch), the limit in
    bytes, the unsplit model's no-swap need). A percentage limit is of the unsplit model's need (lowered once
    more, unsplit, to know it), so 50% means what it means without micro-batches; ops that mix batch elements
    (a training step) are refused by name before anything is lowered."""
    from relay_passes.lower import lower
    from relay_passes.micro_batch import split_batch

    from .graph.extract import graph_from_relax
    from .limits.mem_limit import MemLimit, no_swap_bytes

    split = split_batch(mod, k, func_name)
    given = MemLimit.of(mem_limit)
    if given is None:
        return split, None, None
    unsplit = int(no_swap_bytes(graph_from_relax(lower(fold_frozen_layouts(mod, None, func_name)[0], target, fuse_max_depth=fuse_max_depth,
                                                       func_name=func_name), func_name, target=str(target))))
    try:
        limit = given.bytes_of(unsplit)
    except ValueError as e:
        raise TvmSwapError(f"mem_limit {given.given!r}: {e}") from None
    return split, MemLimit.of(limit), unsplit     # bytes from here on: the split model's checks read them


@contextlib.contextmanager
def _unless(skip: bool):
    """Run the block; when `skip`, a refusal inside it is dropped (the exact check after lowering decides)."""
    from .errors import InfeasibleLimitError

    try:
        yield
    except InfeasibleLimitError:
        if not skip:
            raise


def _may_split(mod, func_name: str) -> bool:
    """An inference function with a dense weight relay_passes.split_dense may split, or a training step with
    a trainable one relay_passes.split_dense_train may split."""
    from relay_passes.split_dense import splittable
    from relay_passes.split_dense_train import trainable_splittable

    func = mod[func_name]
    if not _is_inference(mod, func_name):
        return bool(trainable_splittable(func))
    return bool(splittable(func))


def _input_splits(mod, func_name: str) -> dict:
    """{input: [[slice, lo, hi], ...]} of the inputs a training step reads in batch slices (split_train)."""
    import json

    from relay_passes.split_input_train import INPUT_SPLITS_ATTR

    attrs = mod[func_name].attrs
    return json.loads(str(attrs[INPUT_SPLITS_ATTR])) if attrs is not None and INPUT_SPLITS_ATTR in attrs else {}


def _is_inference(mod, func_name: str) -> bool:
    func = mod[func_name]
    return not (func.attrs is not None and "tvm_swap.updates" in func.attrs)


def _split_may_help(mod, mem_limit, func_name: str, split_ops: bool = False) -> bool:
    """Whether a limit refused before lowering may still fit once dense weights are split: not when it is a
    byte limit below a tensor no split makes smaller (an input, a result, a weight that is not split)."""
    from relay_passes.split_dense import splittable
    from relay_passes.split_dense_train import split_param_names

    from .limits.mem_limit import MemLimit
    from .limits.model_checks import _nbytes

    given = MemLimit.of(mem_limit)
    limit = None if given is None else given.absolute
    if limit is None:
        return True
    func = mod[func_name]
    can = splittable(func) if _is_inference(mod, func_name) else split_param_names(func)
    n = int(func.attrs["num_input"]) if func.attrs is not None and "num_input" in func.attrs else len(func.params)
    if not _is_inference(mod, func_name):      # a 2-D input may be read in batch slices (split_train)
        can = set(can) | {p.name for p in func.params[:n]
                          if len(getattr(getattr(p.ty, "shape", None), "values", ())) == 2}
    whole = [_nbytes(p.ty) or 0 for i, p in enumerate(func.params) if p.name not in can and (i < n or not split_ops)]
    results = list(func.ret_ty.fields if hasattr(func.ret_ty, "fields") else [func.ret_ty])
    names = [p.name for p in func.params]
    news = {int(o) for o, p in func.attrs["tvm_swap.updates"] if names[int(p)] in can} \
        if not _is_inference(mod, func_name) else set()        # a split weight's new value: split too
    whole += [_nbytes(t) or 0 for i, t in enumerate(results) if i not in news]
    return limit >= max(whole, default=0)


def fold_frozen_layouts(mod, params=None, func_name: str = "main"):
    """(`mod` with its frozen params' layout changes folded into the params (relay_passes.param_layout),
    `params` (a dict in the user's layout, or None) in the folded module's layout)."""
    from relay_passes.param_layout import FoldParamLayouts, folded_layouts

    mod = FoldParamLayouts(func_name)(mod)
    layouts = folded_layouts(mod[func_name])
    if layouts is not None and isinstance(params, dict):
        params = layouts.to_compute(params)
    return mod, params


def _split(mod, limit: int, lower_graph, func_name: str, first, planner, pool, split_ops: bool):
    """(mod, lowered, graph, dense splits, regions): dense layers split by output features (a training step's
    trainable ones by rows) until `limit` fits (tvm_swap.limits.split_to_fit), then, with split_ops or in a
    training step, regions of ops on what that left (a training step's: per-sample ops along the batch)."""
    from .planner.api import resolve_pool
    from .limits.split_to_fit import split_regions_to_fit, split_to_fit

    pool_name = resolve_pool(planner, pool)
    mod, lowered, graph, splits = split_to_fit(mod, limit, lower_graph, func_name, pool_name, first=first)
    regions = []
    if split_ops or not _is_inference(mod, func_name):     # (a training step's regions ride on split_dense)
        mod, lowered, graph, regions = split_regions_to_fit(mod, int(limit), lower_graph, func_name, pool_name,
                                                            first=(lowered, graph))
    return mod, lowered, graph, splits, regions


def _check_limit(graph, mem_limit, planner, spec, planner_options, key=None):
    """InfeasibleLimitError when no plan of `graph` meets `mem_limit` (the floor, as plan_graph words it);
    returns the limit resolved against `graph` (a MemLimit). key: the graph's tvm_swap.caches.graph key, where
    its floor is kept once found."""
    from .caches.graph import FloorMemo
    from .limits.mem_limit import MemLimit
    from .planner.api import check_feasible, resolve_pool

    limit = MemLimit.of(mem_limit).resolve(graph)
    check_feasible(graph, limit.nbytes, resolve_pool(planner, planner_options.get("pool")),
                   planner=planner, device=spec, options=planner_options,
                   memo=FloorMemo(key) if key is not None else None)
    return limit


def _check_module(mod, func_name: str):
    import tvm

    if not isinstance(mod, tvm.IRModule):
        raise TvmSwapError(f"build needs a Relax tvm.IRModule, got {type(mod).__name__}")
    names = [gv.name_hint for gv in mod.functions]
    if func_name not in names:
        raise TvmSwapError(f"the module has no function {func_name!r}; it has: {', '.join(sorted(names))}")


@dataclass
class _Job:
    """What compile_model's steps share: the settings, and the module as the steps change it."""
    mod: object
    user_mod: object
    params: object
    user_params: object
    target: object
    mem_limit: object
    spec: object
    planner: str
    planner_options: dict
    func_name: str
    fuse_max_depth: object
    split_ops: bool
    may_split: bool = False
    key: object = None
    checked: bool = False
    base: object = None          # the folded module before any split (split_k re-splits it)

    def lower_graph(self, m):
        from relay_passes.lower import lower

        from .graph.extract import graph_from_relax

        low = lower(m, self.target, fuse_max_depth=self.fuse_max_depth, func_name=self.func_name)
        return low, graph_from_relax(low, self.func_name, target=str(self.target))


def _check_early(job: _Job):
    """Refuse an infeasible limit before lowering: exactly from the cached graph of this module when there is
    one (job.checked then), else where bounds from the Relax function prove it."""
    from .caches.graph import cached_graph
    from .limits.model_checks import check_limit_before_lowering

    if job.mem_limit is None:
        return
    skip = job.may_split and _split_may_help(job.mod, job.mem_limit, job.func_name, job.split_ops)
    if job.key is not None:
        early = cached_graph(job.key)      # this module lowered before: the exact check, before lowering again
        if early is not None:
            # below the unsplit floor, splitting a dense layer may still fit it
            with _unless(skip):
                _check_limit(early, job.mem_limit, job.planner, job.spec, job.planner_options, job.key)
                job.checked = True     # (on the very graph lowering makes again: no second check below)
                return
    # first compile of this module: refused now where bounds from the Relax function prove it (a tensor
    # bigger than the limit; tvm_swap.limits.early_floor: never a feasible limit; the rest gets the exact check
    # after lowering). Not before the cache lookup above: a lowered graph names the exact min instead
    from .limits.early_floor import check_before_lowering

    with _unless(skip):
        check_limit_before_lowering(job.user_mod, job.mem_limit, job.func_name)      # (names the user's params)
        check_before_lowering(job.mod, job.mem_limit, job.func_name, job.target)


def _lower_and_split(job: _Job):
    """(lowered, graph, splits, regions, unsplit need): `job.mod` lowered, its dense layers (then regions) split
    until the limit fits where the job may split; job.mod, job.params, job.mem_limit, job.key follow."""
    from .caches.graph import store_graph
    from .limits.mem_limit import no_swap_bytes, resolve_limit

    lowered, graph = job.lower_graph(job.mod)
    if job.key is not None:
        store_graph(job.key, graph)
    splits, regions, unsplit_need = {}, [], None
    job.base = job.mod
    if job.may_split and not job.checked:     # dense layers split by output features, then regions, until it fits
        job.mem_limit = resolve_limit(graph, job.mem_limit)        # a percentage: of the unsplit model's need
        unsplit_need = no_swap_bytes(graph)
        job.mod, lowered, graph, splits, regions = _split(job.mod, job.mem_limit, job.lower_graph, job.func_name,
                                                          (lowered, graph), job.planner,
                                                          job.planner_options.get("pool"), job.split_ops)
        if splits or regions:
            job.key = None                 # (the floor memo belongs to the unsplit graph)
            job.params = fold_frozen_layouts(job.mod, job.user_params, job.func_name)[1]
    return lowered, graph, splits, regions, unsplit_need


def _start(mod, target, mem_limit, device, bandwidth, planner, planner_options, func_name, fuse_max_depth,
           micro_batches, params, graph_cache: bool, split_dense: bool, split_ops: bool) -> _Job:
    """The checked settings of one compile, its module with frozen layouts folded, refused early where it can."""
    from relay_passes.cuda_build import resolve_target   # CUDA: kernels in a fatbin

    from .caches.graph import graph_key
    from .limits.mem_limit import MemLimit

    _check_module(mod, func_name)
    mem_limit = MemLimit.of(mem_limit)      # parsed once; every check below reads this value
    if micro_batches is not None and int(micro_batches) > 1:
        mod, mem_limit, _ = micro_batched(mod, int(micro_batches), mem_limit, target, fuse_max_depth, func_name)
    target = resolve_target(target)
    spec = _device_spec(device, target.kind.name, bandwidth)
    key = graph_key(mod, target, fuse_max_depth, func_name) if graph_cache else None
    folded, folded_params = fold_frozen_layouts(mod, params, func_name)   # (keyed above by the user's module)
    split_dense = bool(split_dense) or bool(split_ops)
    job = _Job(folded, mod, folded_params, params, target, mem_limit, spec, planner, planner_options, func_name,
               fuse_max_depth, bool(split_ops), key=key)
    # a training step may split regions of per-sample ops along the batch (split_dense=True) where it has no
    # trainable dense weight; inference splits regions with split_ops only
    job.may_split = mem_limit is not None and split_dense and (
        bool(split_ops) or not _is_inference(folded, func_name) or _may_split(folded, func_name))
    _check_early(job)
    return job


def _cost(job: _Job, lowered, graph, op_time, cost_kw: dict):
    """(seconds per op, where they came from): the given op_time, else tvm_swap.cost.profile's."""
    from .cost.profile import per_op_times

    if op_time is not None:
        return op_time, "given"
    return per_op_times(lowered, graph, job.target, job.spec, cost_kw["profile"], cost_kw["cost_cache"], job.params,
                        cost_kw["example_inputs"], job.func_name)


def _plan_k(job: _Job, first, splits: dict, mem_limit, cost_kw: dict, plan_kw: dict, budget_s: float):
    """(lowered, graph, splits, op_time, cost source, plan, rows): the dense splits' K chosen among 1x, 2x and 4x
    the fewest that fit (tvm_swap.limits.split_k): each lowered, timed and planned, the fastest plan kept."""
    from .limits.split_k import candidate_splits, choose_k
    from .limits.split_to_fit import resplit, split_maxima
    from .planner.api import infeasible_floor, plan_graph, resolve_pool
    from .planner.bounds import lower_bound
    from .limits.split_train import fits

    limit = int(_limit_bytes(mem_limit))
    pool = resolve_pool(job.planner, job.planner_options.get("pool"))

    def build(ks):
        if ks == splits:
            lowered, graph, mod = first[0], first[1], job.mod
        else:
            mod = resplit(job.base, ks, job.func_name)
            lowered, graph = job.lower_graph(mod)
            if not fits(graph, limit, pool, 256, infeasible_floor):
                return "its graph does not fit the limit"
        params = fold_frozen_layouts(mod, job.user_params, job.func_name)[1]
        saved, job.params = job.params, params
        op_time, source = _cost(job, lowered, graph, None, cost_kw)
        job.params = saved
        return {"mod": mod, "lowered": lowered, "graph": graph, "splits": ks, "op_time": op_time,
                "source": source, "params": params}

    def bound(b):
        if job.planner_options.get("host_ops") is not None:     # (the device-only bound does not hold there)
            return 0.0
        return lower_bound(b["graph"], getattr(b["op_time"], "times", b["op_time"]), job.spec, limit)

    def plan_one(b, share):
        return plan_graph(b["graph"], mem_limit, op_time=b["op_time"], budget_s=share, **plan_kw)

    best, rows = choose_k(candidate_splits(splits, split_maxima(job.base, job.func_name)), build, bound, plan_one,
                          budget_s)
    b = best.built
    job.mod, job.params = b["mod"], b["params"]
    return b["lowered"], b["graph"], b["splits"], b["op_time"], b["source"], best.plan, rows


def _limit_bytes(mem_limit) -> int:
    return int(getattr(mem_limit, "nbytes", mem_limit))


def compile_model(mod, target="llvm", mem_limit=None, device=None, planner: str = "swapadvisor",
                  budget_s: float = 10.0, seed: int = 0, generations: int | None = None, fuse_max_depth=None,
                  profile: bool = True, bandwidth=None, func_name: str = "main", workers: int | None = 1,
                  progress: bool = False, cost_cache=None, op_time=None, params=None, example_inputs=None,
                  debug_poison: bool = False, graph_cache: bool = True, _plan_hook=None, micro_batches=None,
                  split_dense: bool = False, split_ops: bool = False, split_k: str | None = None,
                  **planner_options) -> CompiledModel:
    """Everything `build` does except creating the runtime. See `build` for the arguments (params and
    example_inputs only feed in-situ profiling here). graph_cache: keep the lowered graph on disk
    (tvm_swap.caches.graph), so compiling this module again refuses an infeasible limit before lowering.
    micro_batches: inference in that many slices of the batch (see micro_batched). split_dense: inference
    below the floor runs the dense layers whose weights set it in slices of their output features
    (tvm_swap.limits.split_to_fit); a training step's trainable dense weights in row chunks through the whole
    step (tvm_swap.limits.split_train); a percentage limit stays a share of the unsplit model's need. split_k:
    "fewest" (the fewest slices that fit) or "auto" (the default: the fastest plan of 1x, 2x and 4x that many,
    the search budget shared; tvm_swap.limits.split_k). split_ops: inference below the floor also runs regions
    of ops in slices of the batch, channels or rows (relay_passes.split_region, chosen by
    tvm_swap.limits.split_to_fit.split_regions_to_fit), dense splits first."""
    from .limits.split_k import check_split_k

    split_k = check_split_k(split_k)
    if planner == "zero-offload":     # the runtime runs device ops only (yet): its optimizer on the device
        planner_options = {"zero_update": "device", **planner_options}

    from relay_passes.apply import ApplySwapPlan
    from relay_passes.cuda_build import build_lowered

    from .planner.api import plan_graph
    from .planner.baselines.noswap import noswap_need

    times = {}
    t0 = time.perf_counter()
    job = _start(mod, target, mem_limit, device, bandwidth, planner, planner_options, func_name, fuse_max_depth,
                 micro_batches, params, graph_cache, split_dense, split_ops)
    target, spec, kind = job.target, job.spec, job.target.kind.name
    lowered, graph, splits, regions, unsplit_need = _lower_and_split(job)
    times["lower_s"] = time.perf_counter() - t0
    mem_limit = job.mem_limit
    if mem_limit is not None and not job.checked:
        # a limit no plan can meet is refused now, before any kernel is profiled
        mem_limit = _check_limit(graph, mem_limit, planner, spec, planner_options, job.key)   # (resolved on `graph`)
    cost_kw = {"profile": profile, "cost_cache": cost_cache, "example_inputs": example_inputs}
    plan_kw = {"device": spec, "planner": planner, "seed": seed, "generations": generations, "workers": workers,
               "progress": progress, **planner_options}
    k_rows = None
    t1 = time.perf_counter()
    sliced_inputs = _input_splits(job.mod, func_name)       # (split_k re-splits the weights only)
    if split_k == "auto" and splits and not regions and not sliced_inputs and op_time is None:
        lowered, graph, splits, op_time, cost_source, plan, k_rows = _plan_k(job, (lowered, graph), splits,
                                                                             mem_limit, cost_kw, plan_kw, budget_s)
        times["cost_plan_s"] = time.perf_counter() - t1
    else:
        op_time, cost_source = _cost(job, lowered, graph, op_time, cost_kw)
        times["cost_s"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        if mem_limit is None:
            plan_kw["planner"] = "noswap"
            mem_limit = noswap_need(graph, 256)
        plan = plan_graph(graph, mem_limit, op_time=op_time, budget_s=budget_s, **plan_kw)
        times["plan_s"] = time.perf_counter() - t2
    if _plan_hook is not None:   # private: tests corrupt a verified plan on purpose to prove the runtime's checks
        plan = _plan_hook(plan)
    t3 = time.perf_counter()
    applied = ApplySwapPlan(graph, plan, func_name, target=kind, debug_poison=debug_poison)(lowered)
    executable = build_lowered(applied, target)
    times["codegen_s"] = time.perf_counter() - t3
    info = {"target": kind, "planner": plan.planner, "cost": cost_source, "num_ops": graph.num_ops,
            "device": spec.name, **{k: round(v, 4) for k, v in times.items()},
            **({"dense_splits": dict(splits)} if splits else {}),
            **({"split_k": {"mode": split_k, "candidates": k_rows}} if k_rows else {}),
            **({"split_regions": [[r.start, r.end, r.axis, r.k] for r in regions]} if regions else {}),
            **({"input_splits": {n: len(p) for n, p in sliced_inputs.items()}} if sliced_inputs else {}),
            **({"unsplit_no_swap_bytes": int(unsplit_need)} if splits or regions else {})}
    return CompiledModel(executable, plan, graph, lowered, op_time, spec, target, info)


def build(mod, target="llvm", mem_limit=None, params=None, device=None, planner: str = "swapadvisor",
          budget_s: float = 10.0, seed: int = 0, generations: int | None = None, fuse_max_depth=None,
          profile: bool = True, bandwidth=None, debug_poison: bool = False, func_name: str = "main",
          workers: int | None = 1, progress: bool = False, example_inputs=None, cost_cache=None, op_time=None,
          _plan_hook=None, split_dense: bool = False, split_ops: bool = False, split_k: str | None = None,
          **planner_options):
    """Compile `mod` to run inside `mem_limit` and return a SwapModule holding `params`.

    mem_limit: bytes, '8GB', '512MiB', a percentage of the no-swap peak ('60%'), or None (no limit).
    params: name -> array (or a list in parameter order) for every parameter after the inputs.
    device: DeviceSpec or name the plan is made for (default: 'cpu' on llvm, 'h100' on cuda); bandwidth
    (bytes/s one way, '2GB/s', or a DeviceSpec) replaces its link, and on llvm also throttles the emulated
    link so copies really take that long. planner/budget_s/seed/generations/workers/planner_options go to
    tvm_swap.planner.api.plan_graph. fuse_max_depth caps kernel fusion (deep fusion stretches lifetimes).
    split_dense=True (inference): a limit below the floor set by a dense layer's weight is met by running that
    layer as K slices of its output features, the weight cut into K params at compile time (the user still
    gives and gets it whole), K as small as fits (tvm_swap.limits.split_to_fit); results bitwise equal.
    split_k: "auto" (default) plans 1x, 2x and 4x the fewest slices that fit, each on a share of the budget, and
    keeps the fastest plan (build_info["split_k"] lists each K's predicted time); "fewest" keeps the fewest. A
    training step: its trainable dense weights (and their optimizer state) as K chunks of their rows through
    forward, dX, dW and update (relay_passes.split_dense_train), then regions of its per-sample ops (pools,
    ReLU, their gradients) in K slices of the batch (relay_passes.split_region; never an op that reduces over
    the batch), and a 2-D input in batch slices (relay_passes.split_input_train; the user still gives it
    whole), bitwise equal to the unsplit step.
    split_ops=True (inference): also regions of ops in K slices of the batch, channels or rows (a conv by output
    channels), so a limit below the largest op needs no micro_batches (relay_passes.split_region).
    micro_batches=K (inference): run the batch in K slices (relay_passes.micro_batch), each op then holds 1/K
    of its activations; a percentage limit stays a share of the unsplit model's no-swap need.
    profile: True times each kernel alone on llvm (tvm_swap.cost.roofline.profile_times); "insitu" times each kernel
    inside a traced no-swap run of this very runtime (what the simulator must match; uses params and
    example_inputs, random data where missing); False: roofline times of `device`. op_time overrides all three.
    debug_poison: every dropped pool object is overwritten with 0xFF (NaN) and copies land at the end of their
    window, so a missing wait shows up as wrong numbers.
    graph_cache (default True): keep the lowered graph on disk (tvm_swap.caches.graph, in the folder
    tvm_swap.cost.timing_cache.cache_dir() names), so building this module again refuses an infeasible limit
    before lowering; False neither reads nor writes it. progress=True prints the search's progress.

    Raises InfeasibleLimitError (with the smallest feasible limit) when no plan can meet mem_limit, and
    UnsupportedModelError for dynamic shapes or constructs the planner cannot place.
    """
    from relay_passes.cuda_build import resolve_target
    from runtime_ext.swap_module import SwapModule

    kind = resolve_target(target).kind.name
    if kind == "cuda":
        from .cuda_env import why_no_gpu

        if why_no_gpu():
            raise TvmSwapError(f"no CUDA GPU to run on ({why_no_gpu()}); tvm_swap.pipeline.compile_model(...) "
                               f"plans and builds the library without running it (export it with "
                               f".executable.export_library(path))")
    elif kind != "llvm":
        raise TvmSwapError(f"there is no tvm_swap runtime backend for {kind!r}; use 'llvm' or 'cuda'; "
                           f"tvm_swap.pipeline.compile_model(...) plans and builds the library without running it "
                           f"(export it with .executable.export_library(path))")
    from .limits.model_checks import check_params

    check_params(mod, params, func_name)      # before lowering: a missing param is known now, not after search
    params_dict = params if isinstance(params, dict) else None
    cm = compile_model(mod, target=target, mem_limit=mem_limit, device=device, planner=planner, budget_s=budget_s,
                       seed=seed, generations=generations, fuse_max_depth=fuse_max_depth, profile=profile,
                       bandwidth=bandwidth, func_name=func_name, workers=workers, progress=progress,
                       cost_cache=cost_cache, op_time=op_time, params=params_dict, example_inputs=example_inputs,
                       debug_poison=debug_poison, _plan_hook=_plan_hook, split_dense=split_dense, split_ops=split_ops,
                       split_k=split_k, **planner_options)
    link = cm.device if bandwidth is not None else None
    m = SwapModule(cm.executable, params, plan=cm.plan, bandwidth=link, debug_poison=debug_poison,
                   build_info=cm.info)
    m.compiled = cm
    return m

