"""A long run (scripts/fuzz.py, scripts/fuzz_runtime.py) that a timeout or Ctrl-C cuts short still summarizes
and writes what it finished.

    rc = run_cut_short(work, summarize)     # work(run): the cases; summarize(cut) -> exit code
    pool = ctx.Pool(n, initializer=worker_signals)   # workers leave the signals to the run

The first SIGTERM or SIGINT raises KeyboardInterrupt in `work` (and sets run.cut, for a loop where a broad
exception handler may have caught it: it stops when run.cut is set); from then on, and while `summarize`
writes, both signals are ignored: `timeout` signals the whole process group and a user presses Ctrl-C twice,
and neither may cut the summary. A run cut short exits 130 with the signals still ignored (it is about to
exit); otherwise the handlers from before are put back.
"""
from __future__ import annotations

import os
import signal

SIGNALS = (signal.SIGTERM, signal.SIGINT)
CUT_EXIT_CODE = 130


class Run:
    """What `work` sees of the signals: `cut` turns True with the first one."""

    def __init__(self):
        self.cut = False

    def interrupt(self, signum, frame):
        self.cut = True
        _ignore_signals()
        raise KeyboardInterrupt


def _ignore_signals() -> None:
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def run_cut_short(work, summarize) -> int:
    """work(run) runs the cases; summarize(cut) prints and writes what was done (signals ignored) and returns
    the exit code, which is CUT_EXIT_CODE whatever it says when the run was cut."""
    run = Run()
    old = [signal.signal(s, run.interrupt) for s in SIGNALS]
    try:
        work(run)
    except KeyboardInterrupt:
        run.cut = True
    _ignore_signals()       # the summary is written whatever comes now
    rc = summarize(run.cut)
    if run.cut:
        return CUT_EXIT_CODE
    for s, h in zip(SIGNALS, old):
        signal.signal(s, h)
    return rc


def worker_signals() -> None:
    """A worker process's initializer: the run's parent takes Ctrl-C and a timeout's SIGTERM and ends the
    workers itself. Each worker runs in a process group of its own: `timeout` and a terminal signal the whole
    group, and a worker killed by that signal would break the pool (fuzz.py: a fork pool's terminate waits for a
    task-queue lock the dead worker held; fuzz_runtime.py: a process pool reports its cases as crashes)."""
    os.setpgrp()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


__all__ = ["CUT_EXIT_CODE", "Run", "run_cut_short", "worker_signals"]
