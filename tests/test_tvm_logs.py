"""TVM's C++ log lines stay out of our output unless asked for (tvm_swap.tvm_logs): the command line's (--verbose)
and the Python API's (TVM_SWAP_VERBOSE=1)."""
from __future__ import annotations

import os
import sys

import pytest

from tvm_swap import tvm_logs
from tvm_swap.tvm_logs import tvm_logs_filtered

NOISE = b"[03:06:46] /project/src/runtime/vm/executable.cc:276: Warning: Scope Saving:\n"
ERROR = b"[03:06:46] /project/src/runtime/module.cc:12: Check failed: (x) is false: kept\n"


def _emit():
    os.write(2, NOISE)                                  # as TVM's C++ runtime writes: straight to descriptor 2
    print("ours, live", file=sys.stderr, flush=True)
    os.write(2, b"another library's line\n" + ERROR)


def test_tvm_log_lines_are_dropped_and_everything_else_kept(capfd):
    with tvm_logs_filtered():
        _emit()
    err = capfd.readouterr().err
    assert "Scope Saving" not in err
    assert "ours, live" in err and "another library's line" in err and "Check failed" in err
    assert err.index("ours, live") < err.index("another library's line")


def test_verbose_lets_them_through(capfd):
    with tvm_logs_filtered(verbose=True):
        _emit()
    assert "Scope Saving" in capfd.readouterr().err


def test_descriptor_2_is_restored_after_an_error(capfd):
    try:
        with tvm_logs_filtered():
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    os.write(2, NOISE)
    assert "Scope Saving" in capfd.readouterr().err


def test_nested_filters_filter_once_and_a_verbose_outer_one_lets_all_through(capfd):
    with tvm_logs_filtered():
        with tvm_logs_filtered():
            _emit()
        os.write(2, NOISE)
    err = capfd.readouterr().err
    assert "Scope Saving" not in err and err.count("another library's line") == 1
    with tvm_logs_filtered(verbose=True):
        with tvm_logs_filtered():
            _emit()
    assert "Scope Saving" in capfd.readouterr().err


def test_the_environment_variable_and_set_verbose(capfd, monkeypatch):
    monkeypatch.setenv(tvm_logs.VERBOSE_ENV, "1")
    with tvm_logs_filtered():
        _emit()
    assert "Scope Saving" in capfd.readouterr().err
    tvm_logs.set_verbose(False)
    try:
        with tvm_logs_filtered():
            _emit()
        assert "Scope Saving" not in capfd.readouterr().err
    finally:
        tvm_logs.set_verbose(None)


API_SCRIPT = ("import sys, tvm_swap\n"                     # (TVM logs them for training steps, not for all)
              "from tvm_swap.examples import get_example\n"
              "mod, params, _ = get_example('mlp-train')\n"
              "m = tvm_swap.build(mod, mem_limit='100%', params=params, planner='noswap')\n"
              "m.export_library(sys.argv[1])\n"
              "tvm_swap.load(sys.argv[1])\n")


@pytest.mark.slow          # two fresh processes that import TVM and build a training step (100 s on a busy machine)
def test_the_python_api_keeps_them_out_of_export_and_load(tmp_path):
    """TVM logs "Scope Saving:" / "Scope Loaded:" on the first export and load of a process (so each case runs in a
    fresh one); tvm_swap's own calls hide them unless TVM_SWAP_VERBOSE=1."""
    import tvm  # noqa: F401
    import subprocess
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    err = {}
    for verbose in ("0", "1"):
        env = {**os.environ, "PYTHONPATH": root, tvm_logs.VERBOSE_ENV: verbose}
        r = subprocess.run([sys.executable, "-c", API_SCRIPT, str(tmp_path / f"m{verbose}.so")], capture_output=True,
                           text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        err[verbose] = r.stderr
    assert "Scope Saving" not in err["0"] and "Scope Loaded" not in err["0"], err["0"]
    assert "Scope Saving" in err["1"] and "Scope Loaded" in err["1"]        # the check can fail: TVM does log them
