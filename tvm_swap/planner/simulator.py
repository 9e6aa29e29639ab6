"""Three-stream simulator: the GA's fitness and the source of a plan's predicted time.

Model (the semantics of `tvm_swap.plan`):
- Streams compute, d2h (swap_out) and h2d (swap_in) are FIFO in action-list order. An action starts
  when its stream is free and all its deps have ended. A drop has no stream: it ends when its deps end.
- Compute lasts op_time[op]; so does a recompute (it runs the op's kernel again on the compute stream). A copy moves the tensor's bytes: alone on the link a direction gets its
  one-way rate; while both directions copy they share the duplex rate (each at most its one-way rate,
  the pair at most duplex_bandwidth; split evenly when both can use half), so a copy's rate changes
  whenever the other direction starts or stops.
- Iteration time = the latest end.

How it is fast (pure Python + numpy; the GA's simulate_time runs the same loop compiled, simulator_jit.py):
- Drops are folded away before the loop: each action's deps become, per stream, the highest FIFO
  position it waits for (waiting on position p of a stream implies waiting on all before it).
  `pack_actions` / `pack_arrays` compute that `need` table with numpy.
- Compute ends are resolved eagerly (their duration is fixed). Only the two copy streams need
  time-ordered, event-by-event progress, and at any moment only their two head copies are in flight.
  If one copy stream's head cannot start yet, what it waits on depends on the other head's end, so
  that head runs alone until it ends. Every other action is resolved by one max and one add.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cost.devices import DeviceSpec
from ..errors import PlanError

COMPUTE, SWAP_OUT, SWAP_IN, DROP, RECOMPUTE = 0, 1, 2, 3, 4
KIND_CODE = {"compute": COMPUTE, "swap_out": SWAP_OUT, "swap_in": SWAP_IN, "drop": DROP, "recompute": RECOMPUTE}
STREAM_NAMES = ("compute", "d2h", "h2d")
# stream index of each kind code (drop: -1; recompute runs on the compute stream)
_STREAM_OF_CODE = np.array([0, 1, 2, -1, 0], dtype=np.int64)


@dataclass
class PackedActions:
    """Actions as flat arrays. `work` is seconds for compute, bytes for copies, 0 for drops."""
    kind: np.ndarray          # int8 kind codes
    work: np.ndarray          # float64 (seconds for compute and recompute)
    dep_indptr: np.ndarray    # int64 CSR over actions
    dep_indices: np.ndarray   # int64, each < its action's index
    tensor: np.ndarray | None = None   # int64 per action (-1 for compute)
    obj: np.ndarray | None = None      # int64 per action (-1 for compute)
    op: np.ndarray | None = None       # int64 per action (-1 unless compute)

    @property
    def num_actions(self) -> int:
        return int(len(self.kind))


@dataclass
class SimResult:
    time_s: float
    start: np.ndarray          # seconds per action
    end: np.ndarray            # seconds per action
    stream_busy_s: dict        # {"compute", "d2h", "h2d"}: seconds each stream is busy
    packed: PackedActions = field(repr=False)

    @property
    def kind(self) -> np.ndarray:
        return self.packed.kind


def _link_rates(device) -> tuple[float, float, float, float]:
    """(d2h alone, h2d alone, d2h while both copy, h2d while both copy) in bytes/s."""
    if isinstance(device, DeviceSpec):
        d, h, dup = device.d2h_bandwidth, device.h2d_bandwidth, device.duplex_bandwidth
    elif isinstance(device, dict):
        try:
            d, h, dup = device["d2h_bandwidth"], device["h2d_bandwidth"], device["duplex_bandwidth"]
        except KeyError as e:
            raise PlanError(f"device description lacks {e.args[0]!r}; pass a DeviceSpec or its to_dict()") from None
    else:
        raise PlanError(f"device must be a DeviceSpec or a dict, got {type(device).__name__}")
    d, h, dup = float(d), float(h), float(dup)
    if min(d, h, dup) <= 0:
        raise PlanError(f"link bandwidths must be positive (d2h {d}, h2d {h}, duplex {dup})")
    # Each direction gets half the duplex rate, or more if the other cannot use its half.
    d_both = min(d, max(dup / 2, dup - h))
    h_both = min(h, max(dup / 2, dup - d))
    return d, h, d_both, h_both


# ---------------------------------------------------------------- packing
def pack_arrays(kind, work, dep_indptr, dep_indices, tensor=None, obj=None, op=None) -> PackedActions:
    """Wrap pre-built arrays (see PackedActions), checking that every dep names an earlier action."""
    kind = np.asarray(kind, dtype=np.int8)
    n = len(kind)
    dep_indptr = np.asarray(dep_indptr, dtype=np.int64)
    dep_indices = np.asarray(dep_indices, dtype=np.int64)
    if len(dep_indptr) != n + 1 or dep_indptr[0] != 0 or dep_indptr[-1] != len(dep_indices):
        raise PlanError("dep CSR is malformed: indptr must have one entry per action plus one, from 0 to len(indices)")
    if n and (kind.min() < 0 or kind.max() > RECOMPUTE):
        raise PlanError("unknown action kind code (expected 0 compute, 1 swap_out, 2 swap_in, 3 drop, 4 recompute)")
    if len(dep_indices):
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(dep_indptr))
        bad = (dep_indices >= owner) | (dep_indices < 0)
        if bad.any():
            k = int(np.argmax(bad))
            raise PlanError(f"action {int(owner[k])} depends on action {int(dep_indices[k])}: "
                            f"deps must name earlier actions")
    as64 = (lambda a: None if a is None else np.asarray(a, dtype=np.int64))
    return PackedActions(kind, np.asarray(work, dtype=np.float64), dep_indptr, dep_indices,
                         as64(tensor), as64(obj), as64(op))


def pack_actions(graph, actions, op_time) -> PackedActions:
    """Pack a Plan's (or a list of) Action objects with their durations (compute) and bytes (copies)."""
    actions = getattr(actions, "actions", actions)
    op_time = np.asarray(op_time, dtype=np.float64)
    if len(op_time) != graph.num_ops:
        raise PlanError(f"op_time has {len(op_time)} entries but the graph has {graph.num_ops} ops")
    n = len(actions)
    try:
        kind = np.fromiter((KIND_CODE[a.kind] for a in actions), dtype=np.int8, count=n)
    except KeyError as e:
        raise PlanError(f"unknown action kind {e.args[0]!r}") from None
    op = np.fromiter((a.op for a in actions), dtype=np.int64, count=n)
    tensor = np.fromiter((a.tensor for a in actions), dtype=np.int64, count=n)
    obj = np.fromiter((a.obj for a in actions), dtype=np.int64, count=n)
    lens = np.fromiter((len(a.deps) for a in actions), dtype=np.int64, count=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])
    indices = np.fromiter((d for a in actions for d in a.deps), dtype=np.int64, count=int(indptr[-1]))
    work = np.zeros(n, dtype=np.float64)
    is_c = (kind == COMPUTE) | (kind == RECOMPUTE)
    if is_c.any():
        ops = op[is_c]
        if ops.min() < 0 or ops.max() >= graph.num_ops:
            raise PlanError("a compute or recompute action names an op that is not in the graph")
        work[is_c] = op_time[ops]
    is_copy = (kind == SWAP_OUT) | (kind == SWAP_IN)
    if is_copy.any():
        ts = tensor[is_copy]
        if ts.min() < 0 or ts.max() >= graph.num_tensors:
            raise PlanError("a swap action names a tensor that is not in the graph")
        work[is_copy] = graph.tensor_bytes()[ts]
    return pack_arrays(kind, work, indptr, indices, tensor, obj, op)


def _need_table(p: PackedActions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per action and stream s, the highest FIFO position on s among its deps, drops folded in (-1: none).

    Returns (need[n, 3], stream[n], pos[n]), int32 (half the memory traffic of int64)."""
    i32 = np.int32
    kind = p.kind
    n = len(kind)
    stream = _STREAM_OF_CODE.astype(i32)[kind]
    pos = np.full(n, -1, dtype=i32)
    for s in range(3):
        m = stream == s
        pos[m] = np.arange(int(m.sum()), dtype=i32)
    need = np.full((n, 3), -1, dtype=i32)
    dep = p.dep_indices
    if len(dep) == 0:
        return need, stream, pos
    indptr = p.dep_indptr
    lens = np.diff(indptr)
    dstream = stream[dep]
    direct = np.flatnonzero(dstream >= 0)
    val = np.full((len(dep), 3), -1, dtype=i32)
    val[direct, dstream[direct]] = pos[dep[direct]]
    via = np.flatnonzero(dstream < 0)
    if len(via):
        # A dep on a drop means waiting for what the drop waits for: settle the drops' own rows first.
        is_drop = stream < 0
        edge_of_drop = np.repeat(is_drop, lens)
        drop_rows = np.flatnonzero(is_drop & (lens > 0))
        if edge_of_drop[via].any():
            # drops waiting on drops (no planner here emits them): one pass per level of such chains
            rows = np.flatnonzero(lens > 0)
            for _ in range(n + 1):
                need[rows] = np.maximum.reduceat(val, indptr[rows], axis=0)
                new = np.maximum(val[via], need[dep[via]])
                if np.array_equal(new, val[via]):
                    return need, stream, pos
                val[via] = new
        starts = np.zeros(len(drop_rows), dtype=np.int64)
        np.cumsum(lens[drop_rows][:-1], out=starts[1:])
        need[drop_rows] = np.maximum.reduceat(val[edge_of_drop], starts, axis=0)
        val[via] = np.maximum(val[via], need[dep[via]])
    rows = np.flatnonzero(lens > 0)
    need[rows] = np.maximum.reduceat(val, indptr[rows], axis=0)
    return need, stream, pos


# ---------------------------------------------------------------- the simulation
def _per_stream(p: PackedActions, need, stream):
    """Per stream (compute, d2h, h2d): the indices of its actions, and as Python lists (scalar access to lists
    is much faster than to numpy arrays) each action's work and, per other stream, the index in that stream
    of the last action it needs (the need table's columns)."""
    work = p.work
    idx = [np.flatnonzero(stream == s) for s in range(3)]
    c, d, h = idx
    return idx, (work[c].tolist(), need[c, 1].tolist(), need[c, 2].tolist(),
                 work[d].tolist(), need[d, 0].tolist(), need[d, 2].tolist(),
                 work[h].tolist(), need[h, 0].tolist(), need[h, 1].tolist())


def _run_streams(p: PackedActions, device):
    """The event loop. Returns (stream, idx per stream, compute ends, d2h starts, d2h ends, h2d starts, h2d ends,
    need table)."""
    d_solo, h_solo, d_both, h_both = _link_rates(device)
    need, stream, pos = _need_table(p)
    idx, (c_dur, c_nd, c_nh, d_bytes, d_nc, d_nh, h_bytes, h_nc, h_nd) = _per_stream(p, need, stream)
    nc, nd, nh = len(c_dur), len(d_bytes), len(h_bytes)
    c_end, d_end, h_end, d_start, h_start = [], [], [], [], []   # per stream: end (start) times, in order
    c_app, d_app, h_app = c_end.append, d_end.append, h_end.append
    ci = di = hi = 0
    c_free = d_free = h_free = 0.0
    t_now = 0.0
    d_s = h_s = -1.0        # start of the head copy once known (-1: not yet)
    d_rem = h_rem = 0.0     # its bytes left at time max(start, t_now)
    while True:
        # computes: resolve every one whose copy deps have ended
        while ci < nc:
            a = c_nd[ci]
            b = c_nh[ci]
            if a >= di or b >= hi:
                break
            t = c_free
            if a >= 0 and d_end[a] > t:
                t = d_end[a]
            if b >= 0 and h_end[b] > t:
                t = h_end[b]
            c_free = t + c_dur[ci]
            c_app(c_free)
            ci += 1
        if d_s < 0 and di < nd and d_nc[di] < ci and d_nh[di] < hi:
            t = d_free
            a = d_nc[di]
            b = d_nh[di]
            if a >= 0 and c_end[a] > t:
                t = c_end[a]
            if b >= 0 and h_end[b] > t:
                t = h_end[b]
            d_s = t
            d_rem = d_bytes[di]
            d_start.append(t)
        if h_s < 0 and hi < nh and h_nc[hi] < ci and h_nd[hi] < di:
            t = h_free
            a = h_nc[hi]
            b = h_nd[hi]
            if a >= 0 and c_end[a] > t:
                t = c_end[a]
            if b >= 0 and d_end[b] > t:
                t = d_end[b]
            h_s = t
            h_rem = h_bytes[hi]
            h_start.append(t)
        if d_s >= 0:
            if h_s < 0:
                # h2d waits on something that waits on this copy: it runs alone to its end
                t = (d_s if d_s > t_now else t_now) + d_rem / d_solo
                d_app(t)
                d_free = t_now = t
                d_s = -1.0
                di += 1
                continue
        elif h_s >= 0:
            t = (h_s if h_s > t_now else t_now) + h_rem / h_solo
            h_app(t)
            h_free = t_now = t
            h_s = -1.0
            hi += 1
            continue
        else:
            break
        # both heads known: advance to the first end, sharing the link while both run
        t = t_now
        if d_s > t or h_s > t:
            t0 = d_s if d_s < h_s else h_s
            if t0 > t:
                t = t0
            if d_s > t:       # h2d runs alone until d2h starts (or h2d ends)
                fin = t + h_rem / h_solo
                if fin <= d_s:
                    h_app(fin)
                    h_free = t_now = fin
                    h_s = -1.0
                    hi += 1
                    continue
                h_rem -= (d_s - t) * h_solo
                t = d_s
            elif h_s > t:
                fin = t + d_rem / d_solo
                if fin <= h_s:
                    d_app(fin)
                    d_free = t_now = fin
                    d_s = -1.0
                    di += 1
                    continue
                d_rem -= (h_s - t) * d_solo
                t = h_s
        fd = d_rem / d_both
        fh = h_rem / h_both
        if fd <= fh:
            h_rem -= fd * h_both
            t += fd
            d_app(t)
            d_free = t_now = t
            d_s = -1.0
            di += 1
            if h_rem < 0.0:
                h_rem = 0.0
        else:
            d_rem -= fh * d_both
            t += fh
            h_app(t)
            h_free = t_now = t
            h_s = -1.0
            hi += 1
        # the surviving copy's progress is now accounted up to t_now
    if ci < nc or di < nd or hi < nh:
        raise PlanError("simulation stalled: an action waits on one that can never run (check the deps)")
    return stream, idx, c_end, d_start, d_end, h_start, h_end, need


def simulate_time(p: PackedActions, device) -> float:
    """Only the iteration time (the GA's fitness): skips building per-action arrays. The same loop as
    _run_streams compiled (simulator_jit.py: the same seconds to the bit; on small graphs the numpy need table
    cost more than the loop).

    A drop ends with one of its deps, so the latest end is the last end on some stream."""
    from .simulator_jit import sim_time     # (numba, loaded when a plan is first simulated)

    t, ok = sim_time(p.kind, p.work, p.dep_indptr, p.dep_indices, _STREAM_OF_CODE, *_link_rates(device))
    if not ok:
        raise PlanError("simulation stalled: an action waits on one that can never run (check the deps)")
    return float(t)


def simulate_time_py(p: PackedActions, device) -> float:
    """simulate_time by _run_streams (the reference tests compare the compiled loop with)."""
    _, _, c_end, _, d_end, _, h_end, _ = _run_streams(p, device)
    return max(c_end[-1] if c_end else 0.0, d_end[-1] if d_end else 0.0, h_end[-1] if h_end else 0.0)


def _assemble(p: PackedActions, run) -> tuple[np.ndarray, np.ndarray, dict]:
    stream, idx, c_end, d_start, d_end, h_start, h_end, need = run
    work = p.work
    n = p.num_actions
    start = np.empty(n, dtype=np.float64)
    end = np.empty(n, dtype=np.float64)
    c_end_a = np.array(c_end, dtype=np.float64)
    d_start_a, d_end_a = np.array(d_start, dtype=np.float64), np.array(d_end, dtype=np.float64)
    h_start_a, h_end_a = np.array(h_start, dtype=np.float64), np.array(h_end, dtype=np.float64)
    c_start_a = _compute_starts(c_end_a, d_end_a, h_end_a, need[idx[0]])
    end[idx[0]] = c_end_a
    start[idx[0]] = c_start_a
    end[idx[1]] = d_end_a
    start[idx[1]] = d_start_a
    end[idx[2]] = h_end_a
    start[idx[2]] = h_start_a
    drops = np.flatnonzero(stream < 0)
    if len(drops):
        _drop_ends(p, stream < 0, drops, end)
        start[drops] = end[drops]
    busy = {"compute": float(work[idx[0]].sum()), "d2h": float((d_end_a - d_start_a).sum()),
            "h2d": float((h_end_a - h_start_a).sum())}
    return start, end, busy


def _compute_starts(c_end, d_end, h_end, need) -> np.ndarray:
    """Each compute's start, as the event loop chose it: the max of its stream predecessor's end and its
    copy deps' ends. Taken again from those ends, never as end - duration: that subtraction can land an
    ulp before a dep's end, and a dependent would seem to start before what it waits for."""
    start = np.zeros(len(c_end), dtype=np.float64)
    if len(c_end) > 1:
        start[1:] = c_end[:-1]
    for ends, col in ((d_end, 1), (h_end, 2)):
        k = need[:, col]
        has = k >= 0
        if has.any():
            start[has] = np.maximum(start[has], ends[k[has]])
    return start


def _drop_ends(p: PackedActions, is_drop: np.ndarray, drops: np.ndarray, end: np.ndarray) -> None:
    """A drop ends at the latest end of its deps, 0 without deps (in place)."""
    indptr = p.dep_indptr
    lens = indptr[drops + 1] - indptr[drops]
    if not lens.any():
        end[drops] = 0.0
        return
    deps = p.dep_indices[np.repeat(is_drop, np.diff(indptr))]   # edges stay grouped by owner
    if is_drop[deps].any():
        # drops waiting on drops (no planner here emits these): resolve in list order
        for d in drops.tolist():
            ds = p.dep_indices[indptr[d]:indptr[d + 1]]
            end[d] = float(end[ds].max()) if len(ds) else 0.0
        return
    seg = np.zeros(len(drops), dtype=np.int64)
    np.cumsum(lens[:-1], out=seg[1:])
    has = lens > 0
    vals = np.zeros(len(drops), dtype=np.float64)
    vals[has] = np.maximum.reduceat(end[deps], seg[has])
    end[drops] = vals


def simulate(graph, actions, op_time, device) -> SimResult:
    """Simulate a Plan (or a list of Action) on `device` with per-op seconds `op_time`."""
    p = actions if isinstance(actions, PackedActions) else pack_actions(graph, actions, op_time)
    return simulate_packed(p, device)


def simulate_packed(p: PackedActions, device) -> SimResult:
    """Simulate pre-packed actions: per-action start/end, iteration time, busy seconds per stream."""
    start, end, busy = _assemble(p, _run_streams(p, device))
    return SimResult(float(end.max()) if len(end) else 0.0, start, end, busy, p)
