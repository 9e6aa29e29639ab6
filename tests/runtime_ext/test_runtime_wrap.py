"""A plan over the wrap index (planner/wrap_keep.py) runs: the params updated last and read first stay on the
device across calls (renamed objects), one the plan evicts is copied out at the start of the step and read
back from that copy, and 3 chained steps give bitwise the losses and params of the unlimited build."""
from __future__ import annotations

import numpy as np

import tvm  # noqa: F401

import tvm_swap  # noqa: E402
from swap_models import MODELS, assert_steps_match_unlimited  # noqa: E402

FAST = dict(planner="swapadvisor", generations=1, workers=1, keep_updated=True)


def test_a_wrap_plan_matches_the_unlimited_build(monkeypatch):
    from relay_passes.lower import lower
    from tvm_swap.cost.devices import DeviceSpec
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.planner import wrap_keep
    from tvm_swap.planner.graphindex import GraphIndex
    from tvm_swap.planner.swapadvisor.arena import plan_arena
    from tvm_swap.planner.swapadvisor.encoding import WrapAllocation
    from tvm_swap.verify import check_plan

    ex = MODELS["mlp-train"]()
    graph = graph_from_relax(lower(ex.mod, "llvm"))
    # a small graph: keep the half of its pairs nearest the iteration's boundary (the default keeps those
    # within 2% of the ops of it: a large graph's first layer)
    kept = GraphIndex.of(graph, keep_updated=True)
    monkeypatch.setattr(wrap_keep, "WRAP_GAP_FRACTION", 1.0)
    gaps = sorted(_gap(kept, new) for _, new in wrap_keep.wrap_pairs(kept))
    monkeypatch.setattr(wrap_keep, "WRAP_GAP_FRACTION", (gaps[len(gaps) // 2 - 1] + 0.5) / kept.n_ops)
    wrapped = {}

    def on_wrap_index(plan):
        gi = GraphIndex.build(graph, plan.pool.alignment, keep_updated=False)
        alloc = WrapAllocation(np.searchsorted(np.asarray(plan.pool.class_bytes), gi.ts).astype(np.int64),
                               np.asarray(plan.pool.class_count, dtype=np.int64))
        ap = plan_arena(gi, plan.schedule, plan.mem_limit, alloc)
        out = ap.to_plan(graph, plan.planner, plan.mem_limit, DeviceSpec.from_dict(plan.device))
        out.graph_name, out.graph_fingerprint, out.predicted = plan.graph_name, plan.graph_fingerprint, plan.predicted
        wrapped["stats"] = ap.stats
        return check_plan(graph, out)

    m = tvm_swap.build(ex.mod, target="llvm", mem_limit="60%", params=ex.params, pool="size-classes",
                       _plan_hook=on_wrap_index, **FAST)
    assert wrapped["stats"]["wrap"]
    acts = m.plan.actions
    init = {t for t, _ in m.plan.initial_residents}
    assert init and m.executor.next_backing != list(range(len(m.executor.next_backing)))
    # an initial resident read back during the step was copied out before the first kernel (its update is not)
    first = next(k for k, a in enumerate(acts) if a.kind == "compute")
    back = {a.tensor for a in acts if a.kind == "swap_in"} & init
    upd_of = {old: new for new, old in graph.updates.items()}
    assert back, "no kept param is read back during the step"
    for p in back:
        assert any(a.kind == "swap_out" and a.tensor == p for a in acts[:first])
        assert not any(a.kind == "swap_out" and a.tensor == upd_of[p] for a in acts)
    assert_steps_match_unlimited(m, ex.mod, list(ex.inputs.values()), list(ex.params.values()))


def _gap(gi, new) -> int:
    """Ops after the update `new` is made plus ops before its param is first read (op ids: the graph's order)."""
    prod = next(op for op in range(gi.n_ops)
                if new in gi.op_tensors[gi.op_ptr[op] + gi.op_nin[op]:gi.op_ptr[op + 1]].tolist())
    old = int(gi.old_of[new])
    return (gi.n_ops - 1 - prod) + int(gi.readers[gi.reader_ptr[old]])
