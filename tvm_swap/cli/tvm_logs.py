"""Keep TVM's own log lines out of the command line's output (`tvm-swap --verbose` lets them through).

TVM's C++ runtime logs to file descriptor 2 directly, e.g. "[03:06:46] .../executable.cc:276: Warning: Scope
Saving:" on every library export and load, which reads like our problem to a user. Inside `tvm_logs_filtered()`
descriptor 2 goes to a scratch file while Python's sys.stderr keeps writing to the real one (progress bars and
our messages stay live); at the end the scratch file is copied back without TVM's log lines, so anything else
written there (a crash report, another library's message) still reaches the user.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from contextlib import contextmanager

# "[hh:mm:ss] path/file.cc:LINE: Warning: ..." (TVM's LOG(WARNING)/LOG(INFO) format); errors are kept
TVM_LOG_LINE = re.compile(rb"^\[\d\d:\d\d:\d\d\] \S+\.(cc|h):\d+: (?!.*(Error|error|Check failed))")


@contextmanager
def tvm_logs_filtered(verbose: bool = False):
    if verbose:
        yield
        return
    fd2 = 2                                  # where TVM writes, whatever sys.stderr is
    sys.stderr.flush()
    real = os.dup(fd2)
    py_stderr = sys.stderr
    with tempfile.TemporaryFile() as scratch:
        os.dup2(scratch.fileno(), fd2)
        sys.stderr = os.fdopen(os.dup(real), "w", buffering=1, encoding="utf-8", errors="replace")
        try:
            yield
        finally:
            sys.stderr.flush()
            sys.stderr.close()
            sys.stderr = py_stderr
            os.dup2(real, fd2)
            os.close(real)
            scratch.seek(0)
            kept = [line for line in scratch.read().splitlines(True) if not TVM_LOG_LINE.match(line)]
            if kept:
                sys.stderr.write(b"".join(kept).decode(errors="replace"))
                sys.stderr.flush()
