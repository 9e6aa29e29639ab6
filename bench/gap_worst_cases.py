#!/usr/bin/env python
"""Where does the GA lose on its worst gap instances: its schedule, or its swap planning?

For each instance (graph index from bench.gap.instance_graph and a limit fraction), prints the GA's plan and
the exact stage model's best plan for the GA's own schedule (so the schedule is the same): simulated time,
bytes copied in and out, the tensors resident at the start, and what a cheap local search on the GA's best
memory genes (a keep x split grid, then a +-bias hill climb per tensor) would gain. A stage plan much faster
on the same schedule means the loss is in the swap planning / memory model, not in the schedule.
Then the schedule-free stage model's best plan, and the GA rerun (same seed and generations) with that plan's
schedule added to its first generation (every memory seed): if the seeded GA stays well above the stage plan,
a better schedule alone does not close the gap.

    python -m bench gap-worst-cases 17:0.4 59:0.4 31:0.4 23:0.4
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
from bench.gap import DEVICE, instance_graph  # noqa: E402
from tvm_swap.cost.devices import get_device  # noqa: E402
from tvm_swap.planner.bounds import noswap_peak  # noqa: E402
from tvm_swap.planner.exact import solve_exact  # noqa: E402
from tvm_swap.planner.feasibility import min_feasible_limit  # noqa: E402
from tvm_swap.planner.simulator import simulate  # noqa: E402
from tvm_swap.planner.swapadvisor.arena import plan_arena  # noqa: E402
from tvm_swap.planner.swapadvisor.ga import Evaluator, GeneticSearch, Genome  # noqa: E402
from tvm_swap.testing import random_op_times  # noqa: E402
from tvm_swap.verify import verify_plan  # noqa: E402


def local_search(ev: Evaluator, schedule, alloc, t_best: float) -> float:
    """The best time a keep x split grid and then a per-tensor +-bias hill climb reach from `alloc`."""
    cur, cur_t = alloc, t_best
    for keep in np.linspace(0, 1, 11):
        for split in (-1.0, 0.3, 0.5, 0.7):
            a = alloc.copy()
            a.keep, a.split = float(keep), split
            t = ev.time_of(schedule, a)
            if t < cur_t:
                cur, cur_t = a, t
    for i in range(ev.space.n_t):
        for b in (-ev.space.scale, ev.space.scale):
            a = cur.copy()
            a.bias[i] = b
            t = ev.time_of(schedule, a)
            if t < cur_t:
                cur, cur_t = a, t
    return cur_t


class SeededSearch(GeneticSearch):
    """The GA with one more schedule (e.g. the stage model's) in its first generation, with every memory seed."""

    def __init__(self, *a, extra_schedule=None, **kw):
        super().__init__(*a, **kw)
        self.extra = np.asarray(extra_schedule, dtype=np.int64)

    def seed_genomes(self):
        return super().seed_genomes() + [(f"extra+{n}", Genome(self.extra.copy(), al.copy()))
                                         for n, al in self.space.seeds()]


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instances", nargs="*", default=["17:0.4", "59:0.4", "31:0.4", "23:0.4"],
                    help="GRAPH:FRACTION pairs (bench.gap.instance_graph index, limit fraction)")
    argv = ap.parse_args(argv).instances
    dev = get_device(DEVICE)
    for spec in argv:
        i, frac = spec.split(":")
        g = instance_graph(int(i))
        t = random_op_times(g, 0)
        lo, hi = min_feasible_limit(g), noswap_peak(g)
        limit = int(lo + float(frac) * (hi - lo))
        ev = Evaluator(g, t, dev, limit, 256, pool="arena")
        search = GeneticSearch(g, t, dev, limit, 256, 0, evaluator=ev)
        best = search.run(generations=30, workers=1).best
        ga = plan_arena(search.gi, best.schedule, limit, best.alloc, t, dev).to_plan(g, "swapadvisor", limit, dev)
        ex = solve_exact(g, t, dev, limit, time_limit_s=20, schedule=best.schedule.tolist(), workers=1)
        ls = local_search(ev, best.schedule, best.alloc, best.time_s)
        print(f"{g.name} ({g.num_ops} ops) at {frac}: local search on the GA's memory genes {best.time_s * 1e3:.3f}"
              f" -> {ls * 1e3:.3f} ms")
        for name, p in (("GA", ga), ("stage plan, GA schedule", ex.plan)):
            if p is None or verify_plan(g, p, limit):
                print(f"  {name}: none ({ex.status})")
                continue
            mb = lambda kind: sum(g.tensors[a.tensor].nbytes for a in p.actions if a.kind == kind) / 1e6  # noqa
            kept = sorted(g.tensors[x].name for x, _ in p.initial_residents)
            print(f"  {name}: {simulate(g, p, t, dev).time_s * 1e3:.3f} ms, in {mb('swap_in'):.1f} MB, "
                  f"out {mb('swap_out'):.1f} MB, resident at the start: {kept}")
        free = solve_exact(g, t, dev, limit, time_limit_s=20, workers=1)
        if free.plan is None or verify_plan(g, free.plan, limit):
            print(f"  stage plan, schedule free: none ({free.status})")
            continue
        seeded = SeededSearch(g, t, dev, limit, 256, 0, evaluator=ev, extra_schedule=free.plan.schedule)
        sb = seeded.run(generations=30, workers=1).best
        print(f"  stage plan, schedule free ({free.status}): {simulate(g, free.plan, t, dev).time_s * 1e3:.3f} ms, "
              f"schedule {free.plan.schedule}; GA seeded with that schedule: {sb.time_s * 1e3:.3f} ms "
              f"(GA alone {best.time_s * 1e3:.3f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
