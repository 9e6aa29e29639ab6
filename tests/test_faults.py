"""Faults a user meets (issue 11), each refused early with a message that says what to do.

Planner-side faults only here (no TVM needed); the library faults are in tests/test_library_faults.py."""
import json
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
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + sys.path)}


# ---------------------------------------------------------------- Ctrl-C during a long search
def test_ctrl_c_during_the_search_writes_the_best_verified_plan_and_exits_130(tmp_path):
    g = random_training_graph(3, n_layers=12)
    g.save(tmp_path / "g.json")
    out = tmp_path / "plan.json"
    cmd = [sys.executable, "-m", "tvm_swap.cli", "plan", str(tmp_path / "g.json"), "--mem-limit", "50%",
           "--budget-s", "600", "--workers", "2", "-o", str(out)]
    # its own session, as a terminal's foreground job: Ctrl-C reaches the CLI and its workers at once
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_cli_env(),
                         cwd=tmp_path, start_new_session=True)
    try:
        line = p.stderr.readline()                 # "graph ..." once the graph is loaded: the search starts
        assert line.startswith("graph"), line
        time.sleep(4.0)                            # the seed genomes are evaluated well within this
        os.killpg(p.pid, signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, stderr
    assert "search cut by Ctrl-C" in stderr and "best verified plan" in stderr
    plan = Plan.load(out)
    assert plan.search["interrupted"] is True and plan.verified
    from tvm_swap.verify import verify_plan

    assert verify_plan(g, plan) == []
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):        # no orphan workers left in the job
        os.killpg(p.pid, 0)


def test_ctrl_c_before_any_plan_writes_nothing_and_exits_130(monkeypatch, capsys, tmp_path):
    from tvm_swap import cli

    def interrupted(args):
        raise KeyboardInterrupt

    import tvm_swap.commands as commands

    monkeypatch.setattr(commands, "cmd_plan", interrupted)
    g = random_training_graph(1, n_layers=2)
    g.save(tmp_path / "g.json")
    assert cli.main(["plan", str(tmp_path / "g.json"), "--mem-limit", "50%"]) == 130
    assert "nothing was written" in capsys.readouterr().err
