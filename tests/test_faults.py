"""Faults a user meets (issue 11), each refused early with a message that says what to do.

Planner-side faults only here (no TVM needed); the library faults are in tests/runtime_ext/test_library_faults.py."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tvm_swap.plan import Action, Plan
from tvm_swap.testing import random_training_graph

ROOT = Path(__file__).resolve().parent.parent


def _cli_env():
    # this checkout only: not the test process's sys.path, which other tests in the same worker extend
    # (scripts/, tmp folders holding model factories) and which the CLI has no use for
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# ---------------------------------------------------------------- Ctrl-C during a long search
# slow: it waits on wall-clock moments (4-36 s, then up to 60 s for the exit). Standalone, under three CPU-bound
# processes and beside the model-matrix tests it passes (exit 0.1-1.2 s after Ctrl-C at 0.05-10 s into the
# search), but inside the whole `-n 2` suite the CLI did not exit within 60 s three runs in a row (2026-12-06,
# not yet understood; see the closing note of issue 29): run it on an unshared machine with `-m slow`.
@pytest.mark.slow
def test_ctrl_c_during_the_search_writes_the_best_verified_plan_and_exits_130(tmp_path):
    g = random_training_graph(3, n_layers=12)
    g.save(tmp_path / "g.json")
    out = tmp_path / "plan.json"
    cmd = [sys.executable, "-m", "tvm_swap.cli", "plan", str(tmp_path / "g.json"), "--mem-limit", "50%",
           "--budget-s", "600", "--workers", "2", "-o", str(out)]
    # its own session, as a terminal's foreground job: Ctrl-C reaches the CLI and its workers at once.
    # On a loaded machine the seeds may not be evaluated yet when Ctrl-C comes (then nothing is written,
    # which is right too, and checked): wait longer and try again.
    for wait_s in (4.0, 12.0, 36.0):
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_cli_env(),
                             cwd=tmp_path, start_new_session=True)
        try:
            line = p.stderr.readline()                 # "graph ..." once the graph is loaded: the search starts
            assert line.startswith("graph"), line
            time.sleep(wait_s)
            os.killpg(p.pid, signal.SIGINT)
            stdout, stderr = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        assert p.returncode == 130, stderr
        if "before a verified plan existed" not in stderr:
            break
        assert not out.exists(), "nothing is written when no verified plan exists yet"
    assert "search cut by Ctrl-C" in stderr and "best verified plan" in stderr
    plan = Plan.load(out)
    assert plan.search["interrupted"] is True and plan.verified
    from tvm_swap.verify import verify_plan

    assert verify_plan(g, plan) == []
    deadline = time.time() + 15                  # no orphan workers left in the job (the forkserver and its
    while time.time() < deadline:                 # resource tracker leave once their pipe to the CLI closes)
        try:
            os.killpg(p.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.killpg(p.pid, 0)


def test_ctrl_c_before_any_plan_writes_nothing_and_exits_130(monkeypatch, capsys, tmp_path):
    from tvm_swap import cli

    def interrupted(args):
        raise KeyboardInterrupt

    import tvm_swap.cli.commands as commands

    monkeypatch.setattr(commands, "cmd_plan", interrupted)
    g = random_training_graph(1, n_layers=2)
    g.save(tmp_path / "g.json")
    assert cli.main(["plan", str(tmp_path / "g.json"), "--mem-limit", "50%"]) == 130
    assert "nothing was written" in capsys.readouterr().err


# ---------------------------------------------------------------- corrupt plans are refused, not drawn
def _remove_action(plan: Plan, i: int) -> Plan:
    acts = [Action(a.kind, a.op, a.tensor, a.obj, tuple(d - (d > i) for d in a.deps if d != i), a.out_objs)
            for j, a in enumerate(plan.actions) if j != i]
    p = Plan.from_dict(plan.to_dict())
    p.actions = acts
    return p


def _corruptions(plan: Plan) -> dict:
    dup = Plan.from_dict(plan.to_dict())
    dup.schedule[1] = dup.schedule[0]
    twice = Plan.from_dict(plan.to_dict())
    computes = [i for i, a in enumerate(twice.actions) if a.kind == "compute"]
    a, b = twice.actions[computes[0]], twice.actions[computes[1]]
    twice.actions[computes[1]] = Action("compute", op=a.op, deps=b.deps, out_objs=b.out_objs)
    no_in = _remove_action(plan, next(i for i, a in enumerate(plan.actions) if a.kind == "swap_in"))
    return {"duplicated op in the schedule": (dup, "schedule is not a permutation"),
            "op computed twice": (twice, "computed twice"),
            "deleted swap-in": (no_in, "not resident")}


def test_report_refuses_a_corrupt_plan_naming_the_first_violation(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from tvm_swap import cli
    from tvm_swap.planner import plan_graph

    g = random_training_graph(2, n_layers=4)
    g.save(tmp_path / "g.json")
    plan = plan_graph(g, "80%", planner="swapadvisor-nosearch")
    for what, (bad, needle) in _corruptions(plan).items():
        bad.verified = True                        # what the file claims counts for nothing
        bad.save(tmp_path / "bad.json")
        code = cli.main(["report", str(tmp_path / "bad.json"), "--graph", str(tmp_path / "g.json"),
                         "-o", str(tmp_path / "bad.svg")])
        err = capsys.readouterr().err
        assert code == 1, what
        assert "will not draw a plan that fails verification" in err and needle in err, (what, err)
        assert not (tmp_path / "bad.svg").exists()
    plan.save(tmp_path / "ok.json")
    assert cli.main(["report", str(tmp_path / "ok.json"), "--graph", str(tmp_path / "g.json"),
                     "-o", str(tmp_path / "ok.svg")]) == 0
    assert (tmp_path / "ok.svg").stat().st_size > 0


# ---------------------------------------------------------------- a refusal names a limit that then works
@pytest.mark.parametrize("planner", ["noswap", "odswap", "vdnn", "swapadvisor-nosearch"])
def test_a_refused_limit_names_a_min_this_planner_then_meets(planner):
    from tvm_swap.errors import InfeasibleLimitError
    from tvm_swap.planner import plan_graph
    from tvm_swap.planner.api import feasible_floor, resolve_pool

    g = random_training_graph(5, n_layers=6)
    floor, _ = feasible_floor(g, resolve_pool(planner, None))     # the floor of the planner's memory model
    with pytest.raises(InfeasibleLimitError) as e:
        plan_graph(g, floor // 2, planner=planner)
    assert e.value.min_feasible >= floor
    if planner == "noswap":
        assert e.value.min_feasible > floor      # everything resident needs more than the general floor
    plan = plan_graph(g, e.value.min_feasible, planner=planner)
    assert plan.verified and plan.pool.total_bytes() <= e.value.min_feasible


def test_a_plan_made_for_another_graph_is_refused(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from tvm_swap import cli
    from tvm_swap.planner import plan_graph

    a, b = random_training_graph(2, n_layers=4), random_training_graph(3, n_layers=4)
    b.save(tmp_path / "b.json")
    plan_graph(a, "80%", planner="swapadvisor-nosearch").save(tmp_path / "a_plan.json")
    assert cli.main(["report", str(tmp_path / "a_plan.json"), "--graph", str(tmp_path / "b.json"),
                     "-o", str(tmp_path / "x.svg")]) == 1
    err = capsys.readouterr().err
    assert "was made for graph" in err and "plan" in err and len(err.splitlines()) == 1
