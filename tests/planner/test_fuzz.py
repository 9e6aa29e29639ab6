"""scripts/fuzz.py: the planner fuzz finds nothing on a few hundred cases, and it does catch what it checks."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import fuzz  # noqa: E402

from tvm_swap.errors import InfeasibleLimitError  # noqa: E402
from tvm_swap.planner import PLANNERS  # noqa: E402


def _failures(results):
    table, lines = fuzz.summarize(results, list(fuzz.ALL_PLANNERS))
    return lines, table


def test_fuzz_a_few_dozen_cases_every_planner():
    results, _ = fuzz.fuzz(range(1000, 1024), determinism_every=4)
    lines, table = _failures(results)
    assert not lines, "\n".join(lines[:20]) + "\n" + table
    # the cases are wide: tiny and large graphs, planned and refused limits
    ops = [r["ops"] for r in results]
    assert min(ops) <= 5 and max(ops) >= 60
    assert any(o == "refused" for r in results for o in r["outcomes"].values())
    # the summary says where the time went: CPU seconds per planner, and per case
    assert all(set(r["planner_s"]) == set(fuzz.ALL_PLANNERS) for r in results)
    assert "cpu s" in table.splitlines()[0] and "cpu s per case: median" in table


def test_a_case_plans_each_planner_at_each_limit_once(monkeypatch):
    """Checks share their plans: the refusal check does not plan again at a min the case already planned
    and checked (case 1004's limit is the min feasible, so the baselines' refusals name it)."""
    calls = []
    real = fuzz._plan
    monkeypatch.setattr(fuzz, "_plan", lambda case, pl, limit, *a: calls.append((pl, limit)) or real(case, pl, limit, *a))
    case = fuzz.draw_case(1004)
    assert case.limit == case.min_feasible
    r = fuzz.run_case(1004, determinism=False)
    assert not r["failures"]
    assert len(calls) == len(set(calls)), sorted(c for c in set(calls) if calls.count(c) > 1)


@pytest.mark.slow
def test_fuzz_three_hundred_cases():
    results, _ = fuzz.fuzz(range(300), workers=2, determinism_every=3)
    lines, table = _failures(results)
    assert not lines, "\n".join(lines[:20]) + "\n" + table


def test_the_checks_catch_a_false_peak_and_a_plan_faster_than_the_bound():
    case = fuzz.draw_case(7)
    plan = fuzz._plan(case, "swapadvisor-nosearch", case.limit)
    assert fuzz.check_plan_claims(case, plan, case.limit) == []
    plan.predicted["peak_bytes"] = plan.predicted["pool_bytes"] + 1
    plan.predicted["time_s"] = plan.predicted["lower_bound_s"] * 0.5
    checks = {c for c, _ in fuzz.check_plan_claims(case, plan, case.limit)}
    assert checks == {"peak", "bound", "verified"}    # the verifier refuses the false peak too


def test_the_fuzz_reports_a_refusal_of_a_feasible_limit_and_a_nondeterministic_planner(monkeypatch):
    calls = []

    def refuses(ctx):
        raise InfeasibleLimitError(ctx.mem_limit, ctx.mem_limit + 1)

    def flaky(ctx):                       # a search whose result depends on more than its seed
        calls.append(1)
        seed = ctx.seed
        ctx.seed += 1000 * len(calls)
        plan = real(ctx)
        plan.search["seed"] = seed
        # another seed may well find the same plan on a small graph: what it counted differs for sure
        plan.search["flaky_calls"] = len(calls)
        return plan

    real = PLANNERS["swapadvisor"]
    monkeypatch.setitem(PLANNERS, "swapadvisor-nosearch", refuses)
    monkeypatch.setitem(PLANNERS, "swapadvisor", flaky)
    r = fuzz.run_case(10, ["swapadvisor-nosearch", "swapadvisor"], determinism=True)
    got = {(pl, check) for pl, check, _ in r["failures"]}
    assert ("swapadvisor-nosearch", "refusal") in got
    assert ("swapadvisor", "same seed") in got


def test_the_determinism_replan_does_not_reuse_what_a_planner_remembered_with_the_graph(monkeypatch):
    """A planner whose answer comes from something computed once per graph object (as the floors, fits,
    offload needs and bounds are) and differs each time it is computed: the re-plan, on a fresh copy of
    the graph, computes it again and the check sees the difference."""
    real = PLANNERS["swapadvisor-nosearch"]
    draws = iter(range(1, 10 ** 6))

    def remembers(ctx):
        plan = real(ctx)
        plan.search["remembered"] = ctx.graph._cache.setdefault("test_nondeterministic", next(draws))
        return plan

    monkeypatch.setitem(PLANNERS, "swapadvisor-nosearch", remembers)
    r = fuzz.run_case(10, ["swapadvisor-nosearch"], determinism=True)
    assert ("swapadvisor-nosearch", "same seed") in {(pl, check) for pl, check, _ in r["failures"]}
    case = fuzz.draw_case(10)
    copy = fuzz.fresh_copy(case.graph)
    assert copy is not case.graph and not copy._cache and copy.to_dict() == case.graph.to_dict()


def test_a_rebuild_never_reads_a_param_updated_since_its_input_was_rebuilt():
    """Fuzz seed 1920 (found by the 10^4-case run): a rebuild chain at the last slot re-ran an op whose input was
    pending when the chain was judged (so not checked at that slot) but dead by then, and that op read a param
    updated in between; the plan failed verification instead of planning."""
    r = fuzz.run_case(1920, planners=["swapadvisor-nosearch+recompute", "swapadvisor"], determinism=False)
    assert r["outcomes"]["swapadvisor-nosearch+recompute"] == "planned", r
    assert not r["failures"], r["failures"]


def test_a_run_cut_by_a_timeout_still_summarizes_when_the_signal_comes_again(tmp_path):
    """`timeout` signals the whole process group, and a user presses Ctrl-C twice: the cases done so far are
    summarized and written all the same (exit 130), and no worker is left behind."""
    import json
    import os
    import signal
    import subprocess
    import time

    out = tmp_path / "fuzz.json"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "fuzz.py"), "--n", "100000", "--workers", "2",
         "--planner", "swapadvisor-nosearch", "--determinism-every", "0", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        for line in proc.stderr:                      # a progress line: at least 100 cases are done
            if "/100000 cases" in line:
                break
        for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
            os.killpg(proc.pid, sig)
            time.sleep(0.01)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (proc.returncode, stdout[-2000:])
    assert "CUT SHORT" in stdout
    data = json.loads(out.read_text())
    assert data["cut_short"] and data["cases_done"] >= 100
    time.sleep(0.5)
    left = [d for d in os.listdir("/proc") if d.isdigit() and str(out).encode() in _cmdline(d)]
    assert not left, f"workers left behind: {left}"   # forked workers share the run's command line


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.slow
def test_the_first_signal_is_never_lost_at_any_moment_of_a_one_worker_run(tmp_path):
    """`timeout 420` once left a 1-worker fuzz running past its SIGTERM with no summary: the GA caught the
    signal's KeyboardInterrupt and the run went on, every later signal ignored; a signal during the imports or
    the warm-up killed it outright. One SIGTERM at a random moment (imports, warm-up, inside the GA, between
    cases), many times: each run stops within seconds, exits 130 and writes its summary."""
    import json
    import os
    import random
    import signal
    import subprocess
    import time

    rng = random.Random(29)
    delays = [rng.uniform(0.0, 1.0) for _ in range(4)] + [rng.uniform(1.0, 8.0) for _ in range(8)]
    for k, delay in enumerate(delays):
        out = tmp_path / f"fuzz{k}.json"
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "fuzz.py"), "--n", "100000", "--workers", "1",
             "--planner", "swapadvisor", "--planner", "swapadvisor-nosearch", "--determinism-every", "2",
             "--json", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGTERM)       # as `timeout` does
            t0 = time.perf_counter()
            stdout, stderr = proc.communicate(timeout=90)
            stopped_s = time.perf_counter() - t0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        what = (k, round(delay, 2), proc.returncode, stdout[-600:], stderr[-600:])
        assert proc.returncode == 130, what
        assert stopped_s < 60, what
        data = json.loads(out.read_text())
        assert data["cut_short"] and data["cases_done"] >= 0, what
        assert "CUT SHORT" in stdout, what


def test_the_host_aware_bound_counts_ops_run_in_place():
    """Case 1853: at the min its refusal names, the limit holds an op only with its outputs written over its
    inputs (in place); the host-aware bound counted the op's whole working set, so it claimed bytes had to
    cross that did not and came out above the plan's simulated time."""
    r = fuzz.run_case(1853, planners=["swapadvisor-nosearch+host"], determinism=False)
    assert r["outcomes"]["swapadvisor-nosearch+host"] == "planned" and not r["failures"], r["failures"]
    assert fuzz.draw_case(1853).graph.inplace_pairs(), "the case no longer runs an op in place"


def _sliced(g):
    """Tensors that are slices of a split op's output (not the partial results a reduction accumulates)."""
    return {t.id for t in g.tensors if "/" in t.name and "/partial" not in t.name}


def test_the_fuzz_draws_split_chains_with_slices_run_in_place_and_every_planner_plans_them(monkeypatch):
    """Issue 26: the fuzz's graphs have ops run as K slices (zoo/batch_split.py), slices feeding slices, and
    in-place kernels on slices; every planner's plan of such a case passes the checks (the verifier's included).
    Seeds 199 and 68 draw a split with both; a seed without a split draw keeps its graph and case."""
    monkeypatch.setattr(fuzz, "SPLIT_PROB", fuzz.CLI_SPLIT_PROB)
    for seed in (199, 68):
        g = fuzz.draw_graph(seed)
        assert g.meta["batch_split"]["ops"] >= 2, g.meta.get("batch_split")
        sliced = _sliced(g)
        assert any(set(op.inputs) & sliced and set(op.outputs) & sliced for op in g.ops)     # a split chain
        assert any(x in sliced for _, _, x in g.meta["inplace"])                              # in place on a slice
        r = fuzz.run_case(seed, determinism=seed == 199)
        assert r["split"] and r["inplace"]
        assert not r["failures"], r["failures"]
    unsplit = next(s for s in range(20) if "batch_split" not in fuzz.draw_graph(s).meta)
    drawn = fuzz.draw_case(unsplit)
    monkeypatch.setattr(fuzz, "SPLIT_PROB", 0.0)
    before = fuzz.draw_case(unsplit)
    assert drawn.graph.to_dict() == before.graph.to_dict() and drawn.limit == before.limit


def test_a_share_of_the_command_lines_cases_are_split_and_the_summary_counts_them(monkeypatch):
    monkeypatch.setattr(fuzz, "SPLIT_PROB", fuzz.CLI_SPLIT_PROB)
    split = [s for s in range(200) if "batch_split" in fuzz.draw_graph(s).meta]
    assert 40 <= len(split) <= 80 and all(fuzz.draw_graph(s).num_ops <= fuzz.MAX_SPLIT_OPS for s in split)
    monkeypatch.setattr(fuzz, "SPLIT_PROB", 0.0)            # what importers draw: the graphs seeds always drew
    assert not any("batch_split" in fuzz.draw_graph(s).meta for s in split)
    results = [{"seed": 1, "outcomes": {"noswap": "planned"}, "failures": [], "split": True, "inplace": True},
               {"seed": 2, "outcomes": {"noswap": "planned"}, "failures": [("noswap", "peak", "x")], "split": False}]
    table, _ = fuzz.summarize(results, ["noswap"])
    assert "graphs with split ops: 1 of 2 (1 of them with in-place ops too), 0 failures in them" in table


def test_a_host_search_on_a_graph_whose_every_op_may_run_on_the_host(monkeypatch):
    """Seed 40713 of the command line's fuzz (3 ops, every one host-eligible): the placement search reached the
    placement with every op on the host, whose empty device part crashed the GA (an IndexError that also ended
    the whole run, at the min named below the floor). Such a placement is now no candidate (host_policy.
    check_device_part), a user's list naming every op falls back to the device and says why, and a crash below
    the floor fails its case instead of the run."""
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.planner.host_split import host_eligible

    monkeypatch.setattr(fuzz, "SPLIT_PROB", fuzz.CLI_SPLIT_PROB)
    case = fuzz.draw_case(40713)
    assert sorted(host_eligible(case.graph)) == list(range(case.graph.num_ops))
    r = fuzz.run_case(40713, planners=["swapadvisor+host-search", "swapadvisor-nosearch+host"], determinism=False)
    assert r["failures"] == [] and set(r["outcomes"].values()) == {"planned"}
    # a user's list naming every op: the plan falls back to every op on the device and says why
    p = plan_graph(case.graph, case.limit, device=case.device, op_time=case.op_time, planner="swapadvisor-nosearch",
                   host_ops=list(range(case.graph.num_ops)))
    assert p.verified and not p.host_ops and "no op on the device" in p.search["host_policy"]["fell_back"]

    def boom(*a, **k):
        raise IndexError("deep inside a planner")
    monkeypatch.setattr(fuzz, "_check_below_floor", boom)
    r = fuzz.run_case(40713, planners=["swapadvisor-nosearch"], determinism=False)
    assert [f[1] for f in r["failures"]] == ["crash"] and "below its floor" in r["failures"][0][2]


def test_on_a_device_without_a_host_the_host_variants_are_planned_once(monkeypatch):
    """Issue 28 (fuzzfast): on v100 (no host spec) swapadvisor+host-search and swapadvisor-nosearch+host make
    exactly the plan_graph calls of swapadvisor and swapadvisor-nosearch; a case plans them once and gives the
    variants their twins' outcomes. With the twin not run, the variant is planned as before."""
    seed = next(s for s in range(7000, 7100) if fuzz.draw_case(s).device == "v100-16gb")
    case = fuzz.draw_case(seed)
    for variant, twin in fuzz.SAME_WITHOUT_HOST.items():
        assert fuzz._comparable(fuzz._plan(case, variant, case.limit)) == \
            fuzz._comparable(fuzz._plan(case, twin, case.limit))
    calls = []
    real = fuzz._plan
    monkeypatch.setattr(fuzz, "_plan", lambda case, pl, *a, **k: calls.append(pl) or real(case, pl, *a, **k))
    planners = ["swapadvisor-nosearch", "swapadvisor-nosearch+host"]
    r = fuzz.run_case(seed, planners, determinism=False)
    assert not r["failures"] and r["outcomes"]["swapadvisor-nosearch+host"] == r["outcomes"]["swapadvisor-nosearch"]
    assert "swapadvisor-nosearch+host" not in calls and calls
    calls.clear()
    r = fuzz.run_case(seed, ["swapadvisor-nosearch+host"], determinism=False)
    assert not r["failures"] and "swapadvisor-nosearch+host" in calls


def test_the_min_named_below_the_floor_is_planned_with_seeds_only_and_the_summary_says_where_cpu_went(monkeypatch):
    """Issue 28 (fuzzfast): a search planner's plan at the min its refusal below the floor names is of its seeds
    only (AT_MIN_GENERATIONS; it was most of a case's CPU), at the case's own limit with the case's generations;
    the table splits a run's CPU by check and by split / unsplit graphs."""
    seen = []
    real = fuzz._plan
    monkeypatch.setattr(fuzz, "_plan", lambda case, pl, limit, graph=None, generations=None:
                        seen.append((limit, generations)) or real(case, pl, limit, graph, generations))
    for seed in range(1000, 1100):
        case = fuzz.draw_case(seed)
        floor = fuzz.floors(case, "swapadvisor")[0]
        if case.ga["generations"] == 0 or case.limit == floor:
            continue
        seen.clear()
        r = fuzz.run_case(seed, ["swapadvisor"], determinism=True)
        if any(limit == floor for limit, _ in seen):
            break
    assert not r["failures"], r["failures"]
    assert seen[0] == (case.limit, None) and seen[1] == (case.limit, None)        # the limit, the re-plan
    assert (floor, fuzz.AT_MIN_GENERATIONS) in seen and fuzz.AT_MIN_GENERATIONS == 0
    assert set(r["check_s"]) == set(fuzz.CHECKS) and all(v > 0 for v in r["check_s"].values())
    table, _ = fuzz.summarize([r], ["swapadvisor"])
    assert "cpu s by check: limit" in table and "cpu s per case: split 0.000, not split" in table


def test_on_a_graph_without_an_update_the_host_variants_are_their_planners(monkeypatch):
    """Issue 28: with no optimizer update no op may run on the host, and plan_with_host makes the planner's own
    plan (its summary says so), so the fuzz plans the host variants once there, as on a device without a host."""
    monkeypatch.setattr(fuzz, "SPLIT_PROB", fuzz.CLI_SPLIT_PROB)
    from tvm_swap.planner.host_split import optimizer_host_ops

    seed = next(s for s in range(7000, 7100) if fuzz.DEVICES[fuzz.draw_case(s).device].host
                and not optimizer_host_ops(fuzz.draw_case(s).graph))
    case = fuzz.draw_case(seed)
    assert fuzz.nothing_for_the_host(case)
    for variant, twin in fuzz.SAME_WITHOUT_HOST.items():
        got = fuzz._comparable(fuzz._plan(case, variant, case.limit))
        assert got["search"].pop("host_policy")["host_ops"] == 0
        assert got == fuzz._comparable(fuzz._plan(case, twin, case.limit))


def test_the_command_lines_thin_run(monkeypatch):
    """Issue 28: the command line's run is thin (THIN): the host-placement search variant in every THIN_EVERY-th
    case, the plans at the mins named below the floor in a share of the cases (the refusal itself in every case);
    run_case and fuzz(), as the tests call them, check everything."""
    monkeypatch.setattr(fuzz, "SPLIT_PROB", fuzz.CLI_SPLIT_PROB)
    calls = []
    real = fuzz._plan
    monkeypatch.setattr(fuzz, "_plan", lambda case, pl, limit, graph=None, generations=None:
                        calls.append((pl, generations)) or real(case, pl, limit, graph, generations))
    planners = ["swapadvisor-nosearch", "swapadvisor+host-search"]

    def run(seed, thin):
        calls.clear()
        r = fuzz.run_case(seed, planners, determinism=False, thin=thin)
        assert not r["failures"]
        return set(r["outcomes"]), {pl for pl, _ in calls}, sum(g == fuzz.AT_MIN_GENERATIONS for _, g in calls)

    hosted = [s for s in range(7000, 7200) if not fuzz.nothing_for_the_host(fuzz.draw_case(s))]
    every = fuzz.THIN_EVERY
    odd = next(s for s in hosted if s % every)
    assert run(odd, True)[:2] == ({"swapadvisor-nosearch"},) * 2
    assert run(odd, False)[:2] == (set(planners),) * 2
    # a case without the plans at the min, where the full check makes some
    seed = next(s for s in hosted if s % every == 0 and s // every % every and run(s, False)[2])
    outcomes, planned, at_min = run(seed, True)
    assert outcomes == planned == set(planners) and at_min == 0
    assert fuzz.THIN and every > 1
