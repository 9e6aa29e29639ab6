"""Keep TVM's own log lines out of our output, from the command line and the Python API alike.

TVM's C++ runtime logs to file descriptor 2 directly, e.g. "[03:06:46] .../executable.cc:276: Warning: Scope
Saving:" on every library export and load, which reads like our problem to a user. Inside `tvm_logs_filtered()`
descriptor 2 goes to a scratch file while Python's sys.stderr keeps writing to the real one (progress bars and
our messages stay live); at the end the scratch file is copied back without TVM's log lines, so anything else
written there (a crash report, another library's message) still reaches the user.

Where: the whole of every `tvm-swap` command (cli.main), and in the Python API the calls that make TVM log
(`SwapModule.export_library`, `tvm_swap.load`). They come through with `tvm-swap --verbose`, the environment
variable TVM_SWAP_VERBOSE=1, or `tvm_swap.tvm_logs.set_verbose(True)`. Nested uses filter once (the outermost).
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from contextlib import contextmanager

# "[hh:mm:ss] path/file.cc:LINE: Warning: ..." (TVM's LOG(WARNING)/LOG(INFO) format); errors are kept
TVM_LOG_LINE = re.compile(rb"^\[\d\d:\d\d:\d\d\] \S+\.(cc|h):\d+: (?!.*(Error|error|Check failed))")
VERBOSE_ENV = "TVM_SWAP_VERBOSE"

_verbose: bool | None = None       # set_verbose's; None: the environment variable decides
_active = 0                        # how many filters are open (only the outermost redirects)
_lock = threading.Lock()


def set_verbose(flag: bool | None) -> None:
    """True lets TVM's log lines through everywhere, False hides them, None: as TVM_SWAP_VERBOSE says."""
    global _verbose
    _verbose = flag


def is_verbose() -> bool:
    if _verbose is not None:
        return _verbose
    return os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _stderr_is_fd2() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):      # e.g. a notebook's stream: it does not write to fd 2
        return False


@contextmanager
def tvm_logs_filtered(verbose: bool | None = None):
    """Descriptor 2 without TVM's log lines for the duration (see the module docstring); verbose: None asks
    is_verbose()."""
    global _active
    if verbose is None:
        verbose = is_verbose()
    with _lock:
        outer = _active == 0
        _active += 1
    try:
        if verbose or not outer:            # (a verbose outer one keeps the inner ones from filtering)
            yield
        else:
            with _redirected():
                yield
    finally:
        with _lock:
            _active -= 1


@contextmanager
def _redirected():
    fd2 = 2                                  # where TVM writes, whatever sys.stderr is
    if sys.stderr is not None:
        sys.stderr.flush()
    real = os.dup(fd2)
    py_stderr = sys.stderr
    swap_py = _stderr_is_fd2()               # our own writes keep going to the real descriptor
    with tempfile.TemporaryFile() as scratch:
        os.dup2(scratch.fileno(), fd2)
        if swap_py:
            sys.stderr = os.fdopen(os.dup(real), "w", buffering=1, encoding="utf-8", errors="replace")
        try:
            yield
        finally:
            if swap_py:
                sys.stderr.flush()
                sys.stderr.close()
                sys.stderr = py_stderr
            os.dup2(real, fd2)
            os.close(real)
            scratch.seek(0)
            kept = [line for line in scratch.read().splitlines(True) if not TVM_LOG_LINE.match(line)]
            if kept:
                os.write(fd2, b"".join(kept))
