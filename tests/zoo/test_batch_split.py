"""zoo/batch_split.py: the ops that set a zoo graph's floor as K slices of the batch lower the floor, keep
the work (flops, the bytes each split tensor holds), and plan (verified) under a limit the unsplit graph is
refused at."""
from __future__ import annotations

import math

import pytest

from tvm_swap.errors import InfeasibleLimitError
from tvm_swap.planner.api import feasible_floor, plan_graph
from tvm_swap.zoo import ZooError, load_zoo
from tvm_swap.zoo.batch_split import working_sets

SPEC = "zoo:wresnet-152-10@batch=128"     # its largest kernels are batch-bound (at 16, weight-bound)


@pytest.fixture(scope="module")
def graphs():
    return load_zoo(SPEC), load_zoo(SPEC + ",split=2")


def test_split_keeps_the_work_and_lowers_the_largest_working_set(graphs):
    g, s = graphs
    info = s.meta["batch_split"]
    assert info["k"] == 2 and info["ops"] > 0 and s.num_ops > g.num_ops
    assert math.isclose(s.total_flops(), g.total_flops(), rel_tol=1e-9)
    assert working_sets(s).max() < working_sets(g).max()
    by_name = {t.name: t.nbytes for t in s.tensors}
    split = [t for t in g.tensors if f"{t.name}/0" in by_name]
    assert split and all(by_name[f"{t.name}/0"] + by_name[f"{t.name}/1"] == t.nbytes for t in split)
    assert s.updates == g.updates and s.outputs == g.outputs


def test_split_lowers_the_floor(graphs):
    g, s = graphs
    old, _ = feasible_floor(g, "arena")
    new, _ = feasible_floor(s, "arena")
    assert new < old
    with pytest.raises(InfeasibleLimitError):
        plan_graph(g, new, planner="swapadvisor", pool="arena", generations=1, workers=1)


@pytest.mark.slow
def test_split_plans_verified_below_the_unsplit_floor(graphs):
    _, s = graphs
    new, _ = feasible_floor(s, "arena")
    plan = plan_graph(s, new, planner="swapadvisor", pool="arena", generations=1, workers=1)   # verified inside
    assert plan.predicted["peak_bytes"] <= new


def test_split_spec_errors_are_clear():
    with pytest.raises(ZooError, match="split=K"):
        load_zoo("zoo:llama-7b@batch=1,seq=128,split=2")


def test_uneven_cuts_tensors_k_does_not_divide_into_near_equal_slices_that_sum_to_them():
    """The fuzz's random sizes (scripts/fuzz.py): `uneven` cuts a tensor of 10 bytes in 3 slices of 3, 3 and 4;
    without it (the zoo's rule) the op's output is not cut and accumulates through full-size partials."""
    import numpy as np

    from tvm_swap.testing import random_dag
    from tvm_swap.zoo.batch_split import split_batch

    g = random_dag(np.random.default_rng(3), n_ops=6, n_params=1, n_inputs=1, sizes=[10, 1000], name="u")
    prod = g.producer()
    batch = {t for t in range(g.num_tensors) if prod[t] >= 0 and t not in set(g.outputs) | set(g.updates)}
    ops = {int(prod[t]) for t in batch}
    assert ops
    s = split_batch(g, ops, batch, 3, uneven=True)
    by_name = {t.name: t.nbytes for t in s.tensors}
    for t in batch:
        parts = [by_name[f"{g.tensors[t].name}/{i}"] for i in range(3)]
        assert sum(parts) == g.tensors[t].nbytes and max(parts) - min(parts) <= 1, (t, parts)
    even = split_batch(g, ops, batch, 3)
    assert not any(f"{g.tensors[t].name}/0" in {x.name for x in even.tensors} for t in batch if g.tensors[t].nbytes % 3)
    assert math.isclose(s.total_flops(), g.total_flops(), rel_tol=1e-9) and s.outputs == g.outputs
