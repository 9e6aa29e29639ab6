"""The CPU backend: the device is host memory, copy streams are worker threads, events are threading.Events.

- compute: the caller's thread (kernels run synchronously inside the VM), so `record` completes at once and
  `wait` blocks the caller.
- d2h, h2d, aux: one worker thread each, draining a FIFO of closures; a copy is a memcpy (tvm's CopyFromTo,
  which releases the GIL). With a `Link`, copies take bytes / bandwidth and the two directions share the
  duplex rate, so overlap of swaps with compute is real and measurable on a CPU.
- without a link, a small copy whose waits are already met and whose stream is idle runs inline on the
  caller's thread: a memcpy of a few KB is cheaper than waking a worker (FIFO order is kept: the stream is
  idle). With a link every copy goes to its worker, so throttled timings are never changed by this.
- adversarial (debug) mode: a throttled copy lands at the END of its window instead of the start, so a
  reader that skips its wait sees the old (poisoned) bytes, not the new ones.
- errors on a worker are kept and raised by `synchronize`; the worker keeps completing events so nothing
  waits forever. Waits time out (`wait_timeout_s`) with an error rather than hang.
"""
from __future__ import annotations

import queue
import threading
import time

from tvm_swap.errors import TvmSwapError

from .backend import POISON_BYTE, Backend
from .link import Link

_STOP = object()
_PR_SET_TIMERSLACK = 29


def _precise_sleeps() -> None:
    """Linux rounds a thread's sleeps up by its timer slack (50 us by default); a copy stream needs
    microsecond wake-ups, so set this thread's slack to 1 ns. Harmless where prctl is missing."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class _Event(threading.Event):
    """threading.Event that also carries when it completed (ideal time for throttled copies)."""

    t = 0.0


class StreamError(TvmSwapError):
    """Work on a copy stream failed, or a wait never completed."""


class _Worker:
    """One stream: a thread running closures in FIFO order."""

    def __init__(self, name: str, backend: "EmulatedBackend"):
        self.name = name
        self.backend = backend
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self.idle = threading.Event()
        self.idle.set()
        self.pending = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"tvm_swap-{name}", daemon=True)
        self.thread.start()

    def submit(self, fn, always: bool = False) -> None:
        """`always`: run even after an error (event records, so waiters are released)."""
        with self.lock:
            self.pending += 1
            self.idle.clear()
        self.q.put((fn, always))

    def _run(self) -> None:
        _precise_sleeps()
        while True:
            item = self.q.get()
            if item is _STOP:
                return
            fn, always = item
            try:
                if always or self.backend.error is None:
                    fn()
            except BaseException as e:  # kept for synchronize(); the stream goes on releasing events
                self.backend._set_error(StreamError(f"{self.name} stream: {type(e).__name__}: {e}"), e)
            finally:
                with self.lock:
                    self.pending -= 1
                    if self.pending == 0:
                        self.idle.set()

    def stop(self) -> None:
        self.q.put(_STOP)


class EmulatedBackend(Backend):
    name = "emulated"

    def __init__(self, link: Link | None = None, adversarial: bool = False, wait_timeout_s: float = 120.0,
                 inline_copy_bytes: int = 1 << 18):
        import tvm

        self._dev = tvm.cpu(0)
        self.link = link
        self.adversarial = bool(adversarial)
        self.wait_timeout_s = float(wait_timeout_s)
        self.inline_copy_bytes = 0 if (link is not None or adversarial) else int(inline_copy_bytes)
        # Events are threading.Events reset per call, so work may wait on one not recorded yet: with a link
        # (timing emulation) the executor enqueues every copy when the call starts (PlanExecutor._issue_all).
        self.early_issue = link is not None
        self.error: BaseException | None = None
        self._error_lock = threading.Lock()
        # d2h, h2d, aux are the streams; "issue" enqueues a call's copies off the caller's thread (early_issue)
        self._workers = {s: _Worker(s, self) for s in ("d2h", "h2d", "aux", "issue")}
        self.copy_seconds = {"d2h": 0.0, "h2d": 0.0}

    @property
    def device(self):
        return self._dev

    # ---- memory ----
    def alloc_device(self, nbytes: int):
        import tvm

        return tvm.runtime.empty((int(nbytes),), "uint8", self._dev)

    def alloc_host(self, nbytes: int):
        import tvm

        return tvm.runtime.empty((int(nbytes),), "uint8", tvm.cpu(0))

    # ---- events ----
    def new_event(self):
        return _Event()

    def reset_event(self, ev) -> None:
        ev.clear()

    def record(self, stream: str, ev) -> None:
        if stream == "compute":
            _complete(ev, time.perf_counter())
        else:
            self._workers[stream].submit(lambda: _complete(ev, time.perf_counter()), always=True)

    def _wait_all(self, events) -> None:
        for ev in events:
            if not ev.wait(self.wait_timeout_s):
                raise StreamError(f"an event did not complete within {self.wait_timeout_s:.0f} s: the plan's "
                                  f"waits form a cycle or a stream is stuck")

    def wait(self, stream: str, events) -> None:
        if not events:
            return
        if stream == "compute":
            self._wait_all(events)
            self._raise_pending()
        else:
            evs = list(events)
            self._workers[stream].submit(lambda: self._wait_all(evs), always=True)

    # ---- work ----
    def _job(self, stream: str, work, waits, record, stamp, nbytes: int = 1 << 62):
        """One plan action as one FIFO item: wait, work, record (the record happens even after an error,
        so no one waits forever)."""
        waits = list(waits)
        issued = time.perf_counter()

        def job():
            done = None
            try:
                self._wait_all(waits)
                if self.error is None:
                    if stamp is not None:
                        stamp("start")
                    ready = max([issued] + [getattr(ev, "t", 0.0) for ev in waits])
                    done = work(ready)
                    if stamp is not None:
                        stamp("end")
            finally:
                if record is not None:
                    _complete(record, done if done is not None else time.perf_counter())
        if stream == "compute":
            job()
            return
        w = self._workers[stream]
        if nbytes <= self.inline_copy_bytes and w.idle.is_set() and all(ev.is_set() for ev in waits):
            try:
                job()
            except Exception as e:  # same contract as on the worker: kept, raised by synchronize()
                self._set_error(StreamError(f"{stream} stream: {type(e).__name__}: {e}"), e)
            return
        w.submit(job, always=True)

    def copy(self, stream: str, dst, src, waits=(), record=None, stamp=None, nbytes: int | None = None) -> None:
        nbytes = _nbytes(dst) if nbytes is None else int(nbytes)
        if nbytes <= self.inline_copy_bytes and stamp is None and self.error is None and \
                self._workers[stream].idle.is_set() and all(ev.is_set() for ev in waits):
            try:   # the fast path of _job's inline case, without building a job
                src.copyto(dst)
            except Exception as e:
                self._set_error(StreamError(f"{stream} stream: {type(e).__name__}: {e}"), e)
            if record is not None:
                _complete(record, time.perf_counter())
            return
        if self.link is None:
            def work(ready):
                src.copyto(dst)
        else:
            def work(ready):
                t0 = time.perf_counter()
                end = self.link.transfer(stream, nbytes, lambda: src.copyto(dst), work_first=not self.adversarial,
                                         ready_at=ready)
                self.copy_seconds[stream] += time.perf_counter() - t0
                return end
        self._job(stream, work, waits, record, stamp, nbytes)

    def fill(self, stream: str, dst, byte: int = POISON_BYTE, waits=(), record=None) -> None:
        def work(ready):
            import numpy as np

            np.from_dlpack(dst).view(np.uint8).fill(byte)

        self._job(stream, work, waits, record, None)

    def run_async(self, fn) -> None:
        """Run `fn()` on the issuing thread, so enqueuing a call's copies does not delay its first kernel."""
        self._workers["issue"].submit(fn)

    def host_callback(self, stream: str, fn) -> None:
        if stream == "compute":
            fn()
        else:
            self._workers[stream].submit(fn, always=True)

    def synchronize(self) -> None:
        for w in self._workers.values():
            if not w.idle.wait(self.wait_timeout_s):
                raise StreamError(f"the {w.name} stream did not finish within {self.wait_timeout_s:.0f} s")
        self._raise_pending()

    def _set_error(self, err: BaseException, cause: BaseException) -> None:
        with self._error_lock:
            if self.error is None:
                err.__cause__ = cause
                self.error = err

    def _raise_pending(self) -> None:
        if self.error is not None:
            err, self.error = self.error, None
            raise err

    def close(self) -> None:
        for w in self._workers.values():
            w.stop()

    def stats(self) -> dict:
        return {"backend": self.name, "throttled": self.link is not None,
                "link_busy_s": dict(self.copy_seconds)}


def _complete(ev, t: float) -> None:
    ev.t = t
    ev.set()


_ITEMSIZE: dict = {}


def _nbytes(t) -> int:
    import math

    dt = str(t.dtype)
    size = _ITEMSIZE.get(dt)
    if size is None:
        import tvm_ffi

        d = tvm_ffi.dtype(dt)
        size = _ITEMSIZE[dt] = (d.bits * d.lanes + 7) // 8
    return math.prod(t.shape) * size
