"""The arena package's parts: a knob switched in arena.tuning is what the walk reads (at call time), and a
walk's recompute bookkeeping (soundness.RebuildCheck) ends with every drop for recompute rebuilt."""
from tvm_swap.planner.graphindex import GraphIndex
from tvm_swap.planner.swapadvisor.arena import recompute_candidates, tuning, working_set_floor
from tvm_swap.planner.swapadvisor.arena.walk import ArenaWalk
from tvm_swap.planner.swapadvisor.arena.walk_state import WalkState
from tvm_swap.testing import random_training_graph


def _walks(seeds=range(8)):
    """(walk, capacity) for random training graphs, at a capacity tight enough to evict."""
    for seed in seeds:
        g = random_training_graph(seed)
        gi = GraphIndex.build(g, 256, keep_updated=False)
        walk = ArenaWalk(gi, gi.default_schedule())
        yield gi, walk, max(walk.floor(), working_set_floor(gi)) * 3 // 2


def test_the_prefetch_window_knob_is_read_when_the_walk_runs(monkeypatch):
    differ = 0
    for gi, walk, cap in _walks():
        bias = [0] * gi.n_tensors
        early = walk.run(cap, bias).swap_ins
        monkeypatch.setattr(tuning, "PREFETCH_WINDOW", 1)
        late = walk.run(cap, bias).swap_ins
        monkeypatch.undo()
        assert late == walk.run(cap, bias, window=1).swap_ins
        differ += late != early
    assert differ > 0, "no walk prefetched: the test would show nothing"


def test_a_walk_that_rebuilds_leaves_nothing_pending(monkeypatch):
    states = []
    real_init = WalkState.__init__

    def keep(self, *a, **k):
        real_init(self, *a, **k)
        states.append(self)

    monkeypatch.setattr(WalkState, "__init__", keep)
    rebuilt = 0
    for gi, walk, cap in _walks():
        for c in (cap * 2 // 3, cap, cap * 2):     # from the floor up: some capacity evicts and rebuilds
            d = walk.run(c, [0] * gi.n_tensors, recompute=recompute_candidates(gi))
            rebuilt += len(d.recomputes)
            _check_done(states[-1], d)
    assert rebuilt > 0, "no walk rebuilt anything: the test would show nothing"


def _check_done(st, d) -> None:
    if st.check is None:
        return
    # every tensor dropped for recompute was rebuilt before the op that next read it
    assert st.check.pending == {} and st.check.reads_of == {}
    assert not any(st.check.dependents.values())
    # a rebuild is a stay that starts at its slot, like a compute output
    for slot, _, sids in d.recomputes:
        assert all(d.stay_first[s] == slot for s in sids)


def test_importing_the_planner_loads_no_numba():
    """The arena's compiled parts (slot_usage, placement) load numba when a walk or a placement runs, not at
    import: the command line's early refusals import the planner and answer in well under a second
    (tests/frontends/test_mxnet_early.py times one; under load that timing is noisy, this is not)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    code = "import sys; import tvm_swap.planner.api, tvm_swap.planner.swapadvisor.arena; print('numba' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert r.stdout.split() == ["False"], r.stdout + r.stderr[-2000:]
