"""K, the number of chunks of a split dense weight, as the plan's choice (tvm_swap.limits.split_k; issue 26)."""
from __future__ import annotations

import numpy as np
import pytest
from tvm import relax

import tvm_swap
from tvm_swap.errors import TvmSwapError
from tvm_swap.limits.split_k import Candidate, candidate_splits, check_split_k, choose_k
from tvm_swap.training import train_step

B, IN, HID, OUT = 2, 32, 512, 2048       # a 4 MiB head: its chunks' copies dominate an H100's step


def head_model():
    """x (B, IN) -> linear(w1) -> relu -> linear(w2): the second weight 16x the first."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([B, IN], "float32"))
    w1 = relax.Var("w1", relax.TensorType([HID, IN], "float32"))
    w2 = relax.Var("w2", relax.TensorType([OUT, HID], "float32"))
    with bb.function("main", [x, w1, w2], attrs={"num_input": 1}):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.relu(relax.op.linear(x, w1)))
            y = bb.emit_output(relax.op.linear(h, w2))
        bb.emit_func_output(y)
    rng = np.random.default_rng(0)
    params = {"w1": (rng.standard_normal((HID, IN)) * 0.1).astype("float32"),
              "w2": (rng.standard_normal((OUT, HID)) * 0.1).astype("float32")}
    return bb.get(), params


def _step():
    mod, params = head_model()
    return train_step(mod, params, loss="mse", optimizer="sgd", lr=0.05)


def _build(step, state, limit, split_k):
    return tvm_swap.build(step, mem_limit=limit, params=state, device="h100", profile=False, generations=3,
                          split_dense=True, split_k=split_k, graph_cache=False)


def _bitwise_over_three_steps(ref, m):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((B, IN)).astype("float32")
    labels = rng.standard_normal((B, OUT)).astype("float32")
    for _ in range(3):
        assert np.array_equal(ref(x, labels)[0], m(x, labels)[0])
    want, got = ref.params(), m.params()
    assert sorted(want) == sorted(got) and all(np.array_equal(want[k], got[k]) for k in want)


@pytest.mark.slow       # two compiles, each planning up to three K, and the unlimited build (~55 s loaded)
@pytest.mark.parametrize("limit, more", [("70%", True), ("30%", False)])
def test_auto_picks_more_chunks_where_that_plans_faster_and_keeps_the_fewest_where_not(limit, more):
    """At 70% the head in the fewest chunks (2) leaves no room to keep one resident or overlap copies: 2x as
    many plan faster on an H100, and auto takes them; at 30% the fewest plan fastest and auto keeps them. Both:
    verified, results bitwise equal to the unlimited build over three chained steps, each K's time reported."""
    step, state = _step()
    fewest = _build(step, state, limit, "fewest")
    auto = _build(step, state, limit, "auto")
    k_min = fewest.compiled.info["dense_splits"]
    assert "split_k" not in fewest.compiled.info and k_min["w2"] >= 2
    rows = auto.compiled.info["split_k"]["candidates"]
    assert [r["scale"] for r in rows] == [1, 2, 4] and rows[0]["splits"] == k_min
    times = {r["scale"]: r.get("predicted_time_s") for r in rows}
    assert times[1] == pytest.approx(fewest.plan.predicted["time_s"])      # (the same search on K_min)
    chosen = auto.compiled.info["dense_splits"]
    best = min((t, s) for s, t in times.items() if t is not None)[1]
    assert chosen == {w: k * best for w, k in k_min.items()}
    assert auto.plan.predicted["time_s"] == min(t for t in times.values() if t is not None)
    assert (chosen["w2"] > k_min["w2"]) == more
    if more:
        assert auto.plan.predicted["time_s"] < 0.9 * fewest.plan.predicted["time_s"]
    assert auto.plan.verified
    _bitwise_over_three_steps(tvm_swap.build(step, mem_limit=None, params=state, profile=False), auto)


def test_a_limit_that_needs_no_split_plans_as_before():
    """No split (K_min = 1): auto tries nothing else; the plan is the one split_k='fewest' makes."""
    step, state = _step()
    auto = _build(step, state, "100%", "auto")
    fewest = _build(step, state, "100%", "fewest")
    assert "dense_splits" not in auto.compiled.info and "split_k" not in auto.compiled.info
    a, f = auto.plan.to_dict(), fewest.plan.to_dict()
    a.pop("search"), f.pop("search")         # (its wall-clock seconds)
    assert a == f


def test_a_bad_split_k_is_refused_with_what_it_may_be():
    with pytest.raises(TvmSwapError, match=r"split_k must be one of 'fewest', 'auto'.*got 'most'"):
        check_split_k("most")
    step, state = _step()
    with pytest.raises(TvmSwapError, match="split_k must be one of"):
        tvm_swap.build(step, mem_limit="70%", params=state, split_dense=True, split_k=3)
    assert check_split_k(None) == "auto" and check_split_k("Fewest") == "fewest"


def test_cli_refuses_a_bad_split_k_before_loading_the_model(tmp_path):
    from tvm_swap.cli.commands import compile_to_library

    with pytest.raises(TvmSwapError, match="split_k must be one of"):
        compile_to_library(str(tmp_path / "missing-symbol.json"), str(tmp_path / "m.so"), split_k="many")


class _Plan:
    def __init__(self, t):
        self.predicted = {"time_s": t}


def test_choose_k_skips_a_candidate_whose_bound_is_no_faster_and_shares_the_budget():
    planned = []

    def plan_one(built, share):
        planned.append((built, share))
        return _Plan({10: 2.0, 20: 1.5}[built])

    bounds = {10: 1.0, 20: 1.2, 40: 1.6}
    cands = [(1, {"w": 2}), (2, {"w": 4}), (4, {"w": 8})]
    best, rows = choose_k(cands, lambda ks: 5 * ks["w"], bounds.__getitem__, plan_one, 3.0)
    assert best.scale == 2 and planned == [(10, 1.0), (20, 1.0)]
    assert "no faster" in rows[2]["not_planned"] and rows[1]["predicted_time_s"] == 1.5
    best, rows = choose_k(cands[:2], lambda ks: 10 if ks["w"] == 2 else "its graph does not fit the limit",
                          bounds.__getitem__, plan_one, 3.0)
    assert best.scale == 1 and rows[1]["not_planned"] == "its graph does not fit the limit"


def test_candidates_stop_at_a_weights_rows():
    assert candidate_splits({"w": 3}, {"w": 8}) == [(1, {"w": 3}), (2, {"w": 6}), (4, {"w": 8})]
    assert candidate_splits({"w": 4}, {"w": 4}) == [(1, {"w": 4})]
    assert Candidate(1, {"w": 2}, why="x").row() == {"scale": 1, "splits": {"w": 2}, "not_planned": "x"}


def test_cli_says_what_split_k_may_be():
    from tests.cli.test_cli import tvm_swap as cli

    r = cli("compile", "mlp-train", "--split-dense", "--split-k", "most", "--mem-limit", "30%", "-o", "x.so", "-q")
    assert r.returncode != 0 and "--split-k must be one of 'fewest', 'auto'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_larger_k_the_planner_refuses_is_not_chosen():
    def plan_one(built, share):
        if built == 2:
            raise TvmSwapError("every island refused")
        return _Plan(1.0)

    best, rows = choose_k([(1, {"w": 2}), (2, {"w": 4})], lambda ks: ks["w"] // 2, lambda b: 0.0, plan_one, 1.0)
    assert best.scale == 1 and rows[1]["not_planned"] == "no plan: every island refused"
