"""Where the genetic search evaluates genomes: in-process, local processes, or a Ray cluster.

    pool = make_pool(evaluator, "ray", workers=2, ray_address=None)   # local 2-CPU Ray if none is running
    futures = pool.submit_many(genomes)                               # each .result() -> simulated seconds
    pool.workers                                                      # genomes it evaluates at once
    pool.close()

Evaluation is a pure function of (schedule, allocation) given the Evaluator, and every random draw of the
search happens in the driver (ga.GeneticSearch), so any executor and any number of workers give the same
plan for the same seed and generation count.

- processes: a ProcessPoolExecutor started by a *forkserver* (a clean process forks the workers, not the
  planner process, which may already have TVM's threads running); each worker gets the Evaluator once.
- ray: the Evaluator (graph, its index, op times, the allocation space) goes to the object store once
  (ray.put); each of `workers` actors fetches it once and evaluates batches of genomes: submit_many
  splits its genomes into one batch per actor, round robin, so a GA step costs one call per actor.
"""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from ...errors import TvmSwapError

EXECUTORS = ("processes", "ray")


class Done:
    """An in-process result with the Future interface."""

    def __init__(self, value: float):
        self.value = value

    def result(self) -> float:
        return self.value


# ---------------------------------------------------------------- local processes
_WORKER = None


def _init_worker(evaluator) -> None:
    import gc
    import signal

    global _WORKER
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the parent's to handle: it stops the search
    gc.disable()        # evaluations make no reference cycles; collections would only rescan the graph
    _WORKER = evaluator


def _evaluate_in_worker(task) -> float:
    schedule, alloc = task           # alloc: a size-class Allocation or arena.ArenaGenes
    return _WORKER.time_of(schedule, alloc)


class LocalPool:
    """workers == 1: in-process; else a forkserver process pool."""

    def __init__(self, evaluator, workers: int):
        self.ev, self.workers, self.exe = evaluator, workers, None
        if workers > 1:
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
            self.exe = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                           initargs=(evaluator,))

    def submit_many(self, genomes) -> list:
        if self.exe is None:
            return [Done(self.ev.time_of(g.schedule, g.alloc)) for g in genomes]
        return [self.exe.submit(_evaluate_in_worker, (g.schedule, g.alloc)) for g in genomes]

    def close(self) -> None:
        if self.exe is not None:
            self.exe.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------- Ray
def _ray():
    try:
        import ray
    except ImportError:
        raise TvmSwapError("executor='ray' needs Ray: pip install 'tvm_swap[ray]'") from None
    return ray


class _RayEvaluator:
    """A Ray actor: holds the Evaluator fetched once from the object store; evaluates batches."""

    def __init__(self, evaluator):
        import gc

        gc.disable()
        self.ev = evaluator

    def time_of_batch(self, tasks) -> list[float]:
        return [self.ev.time_of(s, a) for s, a in tasks]

    def pid(self) -> int:
        """The actor's process id (bench/scale.py reads its CPU time from /proc)."""
        import os

        return os.getpid()


class _RayResult:
    def __init__(self, pool, ref, index: int):
        self.pool, self.ref, self.index = pool, ref, index

    def result(self) -> float:
        return self.pool.fetch(self.ref)[self.index]


class RayPool:
    def __init__(self, evaluator, workers: int, address: str | None = None):
        ray = _ray()
        self.ray, self.owns = ray, False
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, include_dashboard=False, log_to_driver=False)
                else:
                    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            except Exception as e:  # ConnectionError, RuntimeError, ...: say where and what to do
                raise TvmSwapError(f"cannot start or reach Ray (address={address!r}): {type(e).__name__}: {e}; "
                                   "check --ray-address (e.g. ray://host:10001 or auto)") from None
            self.owns = True
        ref = ray.put(evaluator)                          # once; each actor fetches it once
        actor = ray.remote(num_cpus=1)(_RayEvaluator)
        self.actors = [actor.remote(ref) for _ in range(workers)]
        self.workers = workers
        self.next_actor = 0
        self.cache: dict = {}

    def submit_many(self, genomes) -> list:
        n = len(self.actors)
        batches: dict[int, list] = {}
        for k, g in enumerate(genomes):
            batches.setdefault((self.next_actor + k) % n, []).append((k, g))
        self.next_actor = (self.next_actor + len(genomes)) % n
        out = [None] * len(genomes)
        for a, items in batches.items():
            ref = self.actors[a].time_of_batch.remote([(g.schedule, g.alloc) for _, g in items])
            for i, (k, _) in enumerate(items):
                out[k] = _RayResult(self, ref, i)
        return out

    def fetch(self, ref) -> list[float]:
        if ref not in self.cache:
            if len(self.cache) > 256:          # results of past generations are not asked for again
                self.cache.clear()
            self.cache[ref] = self.ray.get(ref)
        return self.cache[ref]

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)
        self.actors, self.cache = [], {}
        if self.owns:
            self.ray.shutdown()


def make_pool(evaluator, executor: str, workers: int, ray_address: str | None = None):
    if executor == "processes":
        if ray_address:
            raise TvmSwapError("ray_address is only for executor='ray'")
        return LocalPool(evaluator, workers)
    if executor == "ray":
        return RayPool(evaluator, workers, ray_address)
    raise TvmSwapError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
