"""TVM's C++ log lines stay out of the command line's output unless --verbose (tvm_swap.cli.tvm_logs)."""
from __future__ import annotations

import os
import sys

from tvm_swap.cli.tvm_logs import tvm_logs_filtered

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
