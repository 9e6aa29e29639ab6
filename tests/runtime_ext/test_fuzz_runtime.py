"""scripts/fuzz_runtime.py: random small models built under random limits run bitwise equal to the unlimited
build, and the fuzz notices when they do not."""
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tvm  # noqa: F401
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


def test_a_training_case_runs_optimizer_updates_on_the_host_and_matches():
    """Seed 4: an MLP training step with a random subset of its updates on the host (scripts/fuzz_runtime.py
    draw_host_ops), two chained steps bitwise equal to the unlimited build."""
    assert fuzz_runtime.draws_host_ops(4)
    r = fuzz_runtime.run_case(4)
    assert r["ok"] and r["kind"] is None, r
    assert r["host_ops_drawn"] not in (None, "optimizer") and r["host_ops"] > 0


def test_an_inference_case_below_the_min_runs_a_region_of_ops_in_slices_and_matches():
    """Seed 92: a CNN built below the unsplit planner's min with split_ops=True (scripts/fuzz_runtime.py
    draws_split) plans a region of ops in slices, bitwise equal to the unlimited build within its limit."""
    assert fuzz_runtime.draws_split(92) is not None
    r = fuzz_runtime.run_case(92)
    assert r["ok"] and r["kind"] is None, r
    s = r["split"]
    assert s["outcome"] == "planned" and s["regions"] >= 1 and s["limit"] < r["min"], s


def test_a_training_case_below_the_min_splits_a_dense_weight_and_matches():
    """Seed 84: an MLP training step built below the unsplit planner's min with split_dense=True
    (scripts/fuzz_runtime.py draws_split_dense): a trainable weight in row chunks, two chained steps bitwise
    equal to the unlimited build (the chunks joined into the user's weights), within its limit."""
    assert fuzz_runtime.draws_split_dense(84) is not None and not fuzz_runtime.draws_host_ops(84)
    r = fuzz_runtime.run_case(84)
    assert r["ok"] and r["kind"] is None, r
    s = r["split_dense"]
    assert s["outcome"] == "planned" and s["weights"] >= 1 and s["limit"] < r["min"], s
    table, _ = fuzz_runtime.summarize([r], 1.0)
    assert re.search(r"\| split_dense training below the min: planned +\| +1 \|", table), table


def test_a_split_dense_case_whose_chunks_differ_is_a_failure(monkeypatch):
    """The joined chunks of a split training step compared with the unlimited build: one changed bit in the
    reference's updated weights fails the case as 'split' (the unsplit build, compared first, matches)."""
    real = fuzz_runtime._compare

    def compare(m, ref, inputs, params, train):
        if m.build_info.get("dense_splits"):
            def flipped(args):
                out = [a.copy() for a in ref(args)]
                out[-1].reshape(-1).view(np.uint32)[0] ^= 1
                return out
            return real(m, flipped, inputs, params, train)
        return real(m, ref, inputs, params, train)

    monkeypatch.setattr(fuzz_runtime, "_compare", compare)
    r = fuzz_runtime.run_case(84)
    assert not r["ok"] and r["kind"] == "split" and "differ" in r["why"], r


def test_a_limit_above_the_no_swap_need_but_below_the_size_class_floor_plans():
    """Seed 1151: a limit at or above TVM's static plan but below the size-class pool's floor (objects per class
    plus the workspace) was refused: plan_graph took the no-swap shortcut into a pool that does not fit there."""
    r = fuzz_runtime.run_case(1151)
    assert r["ok"] and r["kind"] is None, r
    assert r["limit"] >= r["no_swap"], r


def test_a_split_case_that_differs_is_a_failure(monkeypatch):
    real = fuzz_runtime._compare
    monkeypatch.setattr(fuzz_runtime, "_check_split", lambda *a: {"limit": 1, "outcome": "planned", "regions": 1,
                                                                   "dense": 0, "failure": "outputs differ"})
    r = fuzz_runtime.run_case(92)
    assert not r["ok"] and r["kind"] == "split", r
    assert fuzz_runtime._compare is real


@pytest.mark.parametrize("first", [True, False])
def test_below_the_min_a_first_compile_and_a_cached_graph_are_both_refused(monkeypatch, first):
    """A first compile may be refused before lowering with a lower bound (tvm_swap.limits.early_floor, seed 6: 1408 B
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


class _Unhandled(Exception):
    """SIGTERM reached the test's own guard: the fuzz did not handle it."""


@pytest.mark.parametrize("tvm_wraps_it", [False, True])
def test_a_run_cut_short_still_summarizes_what_it_finished(monkeypatch, tmp_path, capsys, tvm_wraps_it):
    """The second case gets a SIGTERM (a timeout), then another and a Ctrl-C while the summary is written: the
    finished case is summarized and written all the same, the cut case is not counted (also when the signal
    surfaced inside TVM as a case's error), and the exit code is 130."""
    import json
    import os
    import signal

    def guard(signum, frame):
        raise _Unhandled(signum)

    def fake_case(seed):
        if seed == 1:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)                     # (the handler runs here)
            except KeyboardInterrupt:
                if not tvm_wraps_it:
                    raise
                return {"seed": seed, "ok": False, "kind": "crash", "below": None, "why": "TVMError: interrupted"}
        return {"seed": seed, "ok": True, "kind": None, "below": None, "why": ""}

    real_summarize = fuzz_runtime.summarize

    def summarize_under_fire(results, wall):
        os.kill(os.getpid(), signal.SIGTERM)      # both ignored while the summary is written
        os.kill(os.getpid(), signal.SIGINT)
        return real_summarize(results, wall)

    monkeypatch.setattr(fuzz_runtime, "run_case", fake_case)
    monkeypatch.setattr(fuzz_runtime, "summarize", summarize_under_fire)
    old = signal.signal(signal.SIGTERM, guard), signal.getsignal(signal.SIGINT)
    try:
        rc = fuzz_runtime.main(["--n", "5", "--json", str(tmp_path / "out.json")])
    finally:
        signal.signal(signal.SIGTERM, old[0])
        signal.signal(signal.SIGINT, old[1])
    out = capsys.readouterr().out
    assert rc == 130, out
    assert "CUT SHORT: 1 of 5 cases" in out and "1/1 cases passed" in out
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["cut_short"] and data["cases_done"] == 1 and [c["seed"] for c in data["cases"]] == [0]


@pytest.mark.slow          # two fresh processes importing TVM, and a case or more each
def test_a_run_cut_by_a_timeout_in_worker_processes_leaves_no_worker_behind(tmp_path):
    """`timeout` signals the whole process group, and a user presses Ctrl-C twice: the cases done so far are
    summarized and written (exit 130), no case is reported as a crash, and no worker is left running."""
    import json
    import os
    import signal
    import subprocess

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "fuzz_runtime.json"
    proc = subprocess.Popen([sys.executable, str(root / "scripts" / "fuzz_runtime.py"), "--n", "1000", "--workers",
                             "2", "--json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(root)})
    lines = []
    try:
        for line in proc.stdout:                   # a case line: one case is done
            lines.append(line)
            if " seed " in line:
                break
        for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
            os.killpg(proc.pid, sig)
            time.sleep(0.01)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = "".join(lines) + rest
    assert proc.returncode == 130, text[-3000:]
    assert "CUT SHORT" in text
    data = json.loads(out.read_text())
    assert data["cut_short"] and data["cases_done"] >= 1
    assert not data["by_kind"]["crash"], [c for c in data["cases"] if c["kind"] == "crash"]
    time.sleep(1.0)
    left = [p for p in os.listdir("/proc") if p.isdigit() and _worker_of(p, proc.pid)]
    assert not left, f"workers left behind: {left}"


def _worker_of(pid: str, sid: int) -> bool:
    """Whether process `pid` is a spawned worker of the run in session `sid` (workers stay in it)."""
    try:
        return os.getsid(int(pid)) == sid and b"multiprocessing.spawn" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
