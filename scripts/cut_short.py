"""A long run (scripts/fuzz.py, scripts/fuzz_runtime.py) that a timeout or Ctrl-C cuts short still summarizes
and writes what it finished.

    rc = run_cut_short(work, summarize)     # work(run): the cases; summarize(cut) -> exit code
    pool = ctx.Pool(n, initializer=worker_signals)   # workers leave the signals to the run

The first SIGTERM or SIGINT raises KeyboardInterrupt in `work` and sets run.cut: a loop in which something
may catch it (the GA keeps its last whole generation on Ctrl-C and returns) must stop when run.cut is set.
From then on, and while `summarize` writes, both signals are ignored: `timeout` signals the whole process
group and a user presses Ctrl-C twice, and neither may cut the summary. A run cut short exits 130 with the
signals still ignored (it is about to exit); otherwise the handlers from before are put back.

The first signal is never lost: `catch_early()`, a script's first call before its heavy imports, keeps a
signal that comes before run_cut_short takes over (the run is then summarized as cut without starting), and
a signal outside `work` (before it starts, after it returns) only marks the run cut, never raises.
"""
from __future__ import annotations

import os
import signal

SIGNALS = (signal.SIGTERM, signal.SIGINT)
CUT_EXIT_CODE = 130


_EARLY: list[int] = []      # signals kept by catch_early's handler before run_cut_short took over


class Run:
    """What `work` sees of the signals: `cut` turns True with the first one."""

    def __init__(self):
        self.cut = False
        self.working = False        # raise only while `work` runs inside run_cut_short's try

    def interrupt(self, signum, frame):
        self.cut = True
        _ignore_signals()
        if self.working:
            raise KeyboardInterrupt


def catch_early() -> None:
    """Keep a SIGTERM or SIGINT that comes before run_cut_short (during a script's imports and setup)."""
    def keep(signum, frame):
        _EARLY.append(signum)
        _ignore_signals()

    for s in SIGNALS:
        signal.signal(s, keep)


def _ignore_signals() -> None:
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def run_cut_short(work, summarize) -> int:
    """work(run) runs the cases; summarize(cut) prints and writes what was done (signals ignored) and returns
    the exit code, which is CUT_EXIT_CODE whatever it says when the run was cut."""
    run = Run()
    old = [signal.signal(s, run.interrupt) for s in SIGNALS]
    if _EARLY:
        run.cut = True
        _ignore_signals()
    try:
        run.working = True
        if not run.cut:         # (a signal before `working` was set only marked the run)
            work(run)
        run.working = False
    except KeyboardInterrupt:   # also one that came after work returned, before `working` was cleared
        run.working = False
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


__all__ = ["CUT_EXIT_CODE", "Run", "catch_early", "run_cut_short", "worker_signals"]
