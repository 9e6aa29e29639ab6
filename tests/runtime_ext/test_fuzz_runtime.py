"""scripts/fuzz_runtime.py: random small models built under random limits run bitwise equal to the unlimited
build, and the fuzz notices when they do not."""
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import fuzz_runtime  # noqa: E402


@pytest.mark.parametrize("seed", [pytest.param(3, marks=pytest.mark.slow), 6])
def test_a_handful_of_random_models_match_the_unlimited_build(seed):
    r = fuzz_runtime.run_case(seed)
    assert r["ok"] and r["kind"] is None, r
    assert r["swaps"] > 0
    # the limit was drawn from the planner's own min, and a limit below it was refused naming that min
    assert r["min"] <= r["limit"] <= max(r["min"], int(1.2 * r["no_swap"]))
    b = r["below"]
    assert b["outcome"] == "refused" and b["named"] > b["limit"]
    assert b["named"] == r["min"] if b["exact"] else b["named"] <= r["min"]


@pytest.mark.parametrize("first", [True, False])
def test_below_the_min_a_first_compile_and_a_cached_graph_are_both_refused(monkeypatch, first):
    """A first compile may be refused before lowering with a lower bound (tvm_swap.early_floor, seed 6: 1408 B
    against its min 3072 B); with the graph cached the refusal names the min itself."""
    monkeypatch.setattr(fuzz_runtime, "first_compile", lambda seed: first)
    r = fuzz_runtime.run_case(6)
    assert r["ok"], r
    b = r["below"]
    assert b["first_compile"] is first and b["outcome"] == "refused" and b["limit"] < b["named"] <= r["min"]
    if not first:
        assert b["exact"] and b["named"] == r["min"]


@pytest.mark.slow
def test_more_random_models_match_the_unlimited_build():
    bad = [r for r in map(fuzz_runtime.run_case, range(10, 20)) if not r["ok"]]
    assert not bad, bad


def test_the_runtime_fuzz_notices_a_wrong_output(monkeypatch):
    real = fuzz_runtime._unlimited

    def off_by_one_bit(mod):
        ref = real(mod)

        def call(args):
            out = ref(args)
            out[0] = out[0].copy()
            out[0].reshape(-1).view(np.uint32)[0] ^= 1
            return out
        return call

    monkeypatch.setattr(fuzz_runtime, "_unlimited", off_by_one_bit)
    r = fuzz_runtime.run_case(6)
    assert not r["ok"] and "differ" in r["why"]


def _min_times(monkeypatch, factor):
    """planner_min_limit as the fuzz sees it, off by `factor` (a floor the fuzz disagrees with)."""
    import tvm_swap.testing

    real = tvm_swap.testing.planner_min_limit
    monkeypatch.setattr(tvm_swap.testing, "planner_min_limit",
                        lambda *a, **k: (int(real(*a, **k)[0] * factor), "patched"))


def test_a_refusal_at_the_min_is_a_failure(monkeypatch):
    """Seed 6 (odswap, a size-class pool): at half its real min the build is refused, which the fuzz must
    report as a failure, not replace by the min the refusal names as it did before."""
    _min_times(monkeypatch, 0.5)
    monkeypatch.setattr(fuzz_runtime, "draw_limit", lambda rng, lo, hi: lo)
    r = fuzz_runtime.run_case(6)
    assert not r["ok"] and r["kind"] == "refused-at-min", r
    assert r["kind"] in fuzz_runtime.FAILURE_KINDS


def test_a_refusal_below_the_min_naming_another_min_is_a_failure(monkeypatch):
    """With the fuzz's min twice the real one, the limit below it is either refused naming the real min (not
    the one the fuzz holds) or planned below a size-class min: a failure either way."""
    _min_times(monkeypatch, 2.0)
    monkeypatch.setattr(fuzz_runtime, "first_compile", lambda seed: False)   # the exact refusal (graph cached)
    r = fuzz_runtime.run_case(6)
    assert not r["ok"] and r["kind"] == "below-min", r
    assert r["below"]["failure"]


def test_a_tvm_codegen_failure_is_a_known_limitation_counted_apart(monkeypatch):
    import tvm_swap
    from tvm_swap.errors import KernelCodegenError

    def codegen_fails(*a, **k):
        raise KernelCodegenError("TVM's llvm code generator failed on kernel 'k' (x); change that op's shapes", ["k"])

    monkeypatch.setattr(tvm_swap, "build", codegen_fails)
    r = fuzz_runtime.run_case(6)
    assert not r["ok"] and r["kind"] == "tvm-codegen" and r["workaround"] == "not advised", r
    table, counts = fuzz_runtime.summarize([r], 1.0)
    assert counts["passed"] == 0 and counts["failed"] == 0 and counts["by_kind"]["tvm-codegen"] == 1
    assert "| known limitation: tvm-codegen" in table


def test_advice_that_does_not_work_is_a_failure(monkeypatch):
    """A codegen error whose advice (fuse_max_depth=1) then fails too is a failure of its own."""
    import tvm_swap
    from tvm_swap.errors import KernelCodegenError

    def codegen_fails(*a, **k):
        raise KernelCodegenError("TVM's llvm code generator failed on kernel 'fused_k' (x); build with "
                                 "fuse_max_depth=1", ["fused_k"])

    monkeypatch.setattr(tvm_swap, "build", codegen_fails)
    r = fuzz_runtime.run_case(6)
    assert not r["ok"] and r["kind"] == "workaround", r


def test_a_long_codegen_message_is_a_crash_not_a_known_limitation(monkeypatch):
    import tvm_swap
    from tvm_swap.errors import KernelCodegenError

    def traceback_inside(*a, **k):
        raise KernelCodegenError("failed\nTraceback (most recent call last):\n  File \"x.py\", line 1", [])

    monkeypatch.setattr(tvm_swap, "build", traceback_inside)
    r = fuzz_runtime.run_case(6)
    assert r["kind"] == "crash", r


@pytest.mark.slow          # a fresh process importing TVM for each worker
def test_cases_run_in_worker_processes_as_in_this_one():
    here = {r["seed"]: r for r in map(fuzz_runtime.run_case, [6, 7])}
    there = {r["seed"]: r for r in fuzz_runtime.run_cases([6, 7], workers=2)}
    assert sorted(there) == [6, 7]
    for s in (6, 7):
        assert {k: v for k, v in there[s].items() if k != "why"} == {k: v for k, v in here[s].items() if k != "why"}
