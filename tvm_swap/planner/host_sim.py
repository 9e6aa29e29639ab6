"""The simulator with a fourth stream: ops a plan places on the host (`Plan.host_ops`).

Same model as `simulator.py` (FIFO streams in action-list order, an action starts when its stream is free
and its deps have ended, a drop ends with its deps, the two copy directions share the link), plus the
host-compute stream: an op in `host_ops` runs there for `host_time[op]` seconds (tvm_swap.cost.host), in
parallel with the device's compute stream and both copies, as the runtime runs it: on the thread that issues
the program's actions (relay_passes/host_ops.py, runtime_ext/host_ops.py), which waits for the host op's
inputs and runs its kernel before it issues the next action. So every action after a host op in list order
starts no earlier than that host op ends (`issue_gates`); the device work issued before it goes on meanwhile
(a GPU's streams run ahead of the thread). host_split.lift_plan puts the host ops after every device action,
where the gate delays nothing. Plans without host ops go to `simulator.simulate`
(the GA's fast loop, untouched); this loop is plain Python over the actions, fine for a plan at a time.

Why a copy may run alone: computes (device and host) and drops are resolved as soon as their deps have
ended. A copy head whose deps are not all resolved waits (through those) on the other direction's head copy,
since every earlier action of its own stream has ended; so that copy runs alone until it ends.
"""
from __future__ import annotations

import numpy as np

from ..errors import PlanError
from .simulator import SWAP_IN, SWAP_OUT, DROP, SimResult, _link_rates, pack_actions, simulate

HOST = 3     # stream index of the host-compute stream (0 compute, 1 d2h, 2 h2d)


def simulate_plan(graph, plan, op_time, device, host_time=None) -> SimResult:
    """Simulate `plan` (a Plan: its actions and host_ops) with device seconds `op_time` and, for its host ops,
    host seconds `host_time` (per op; default: the roofline of the device's host spec)."""
    host_ops = set(getattr(plan, "host_ops", None) or ())
    if not host_ops:
        return simulate(graph, plan.actions, op_time, device)
    if host_time is None:
        from ..cost.devices import get_host
        from ..cost.host import host_times

        host_time = host_times(graph, get_host(device))
    p = pack_actions(graph, plan.actions, op_time)
    host_time = np.asarray(host_time, dtype=np.float64)
    stream = np.array([-1 if k == DROP else (1 if k == SWAP_OUT else 2 if k == SWAP_IN else 0) for k in p.kind])
    on_host = np.isin(p.op, list(host_ops)) & (stream == 0)
    stream[on_host] = HOST
    work = p.work.copy()
    work[on_host] = host_time[p.op[on_host]]
    indptr, indices = issue_gates(on_host, p.dep_indptr, p.dep_indices)
    start, end = _run(stream.tolist(), work.tolist(), indptr, indices, device)
    start_a, end_a = np.array(start), np.array(end)
    busy = {name: float((end_a[stream == s] - start_a[stream == s]).sum())
            for s, name in enumerate(("compute", "d2h", "h2d", "host"))}
    return SimResult(float(end_a.max()) if len(end_a) else 0.0, start_a, end_a, busy, p)


def issue_gates(on_host: np.ndarray, indptr, indices) -> tuple[list, list]:
    """The deps (CSR) with, for every action after a host op in list order, that host op added: the thread
    that runs it issues nothing after it until it has run (see the module docstring)."""
    out_ptr, out_idx = [0], []
    indptr, indices = list(map(int, indptr)), list(map(int, indices))
    last = -1
    for i in range(len(on_host)):
        deps = indices[indptr[i]:indptr[i + 1]]
        if last >= 0 and last not in deps:
            deps = deps + [last]
        out_idx.extend(deps)
        out_ptr.append(len(out_idx))
        if on_host[i]:
            last = i
    return out_ptr, out_idx


def _run(stream, work, indptr, indices, device):
    """Start and end of every action (see the module docstring)."""
    d_solo, h_solo, d_both, h_both = _link_rates(device)
    solo, both = {1: d_solo, 2: h_solo}, {1: d_both, 2: h_both}
    n = len(stream)
    start, end = [None] * n, [None] * n
    queue = {s: [i for i in range(n) if stream[i] == s] for s in range(4)}
    head = dict.fromkeys(range(4), 0)
    free = dict.fromkeys(range(4), 0.0)

    def ready(i):
        """The latest end of i's deps, or None while one is unresolved (drops resolved on the way)."""
        t = 0.0
        for d in indices[indptr[i]:indptr[i + 1]]:
            if end[d] is None:
                if stream[d] >= 0 or ready(d) is None:
                    return None
                start[d] = end[d] = ready(d)
            t = max(t, end[d])
        return t

    cs = {1: None, 2: None}      # start of each copy stream's head once known
    rem = {1: 0.0, 2: 0.0}       # its bytes left at max(start, t_now)
    t_now = 0.0
    while True:
        moved = True
        while moved:             # fixed-length actions: the device's compute and the host's
            moved = False
            for s in (0, HOST):
                while head[s] < len(queue[s]):
                    i = queue[s][head[s]]
                    r = ready(i)
                    if r is None:
                        break
                    start[i] = max(free[s], r)
                    end[i] = free[s] = start[i] + work[i]
                    head[s] += 1
                    moved = True
        for s in (1, 2):
            if cs[s] is None and head[s] < len(queue[s]):
                r = ready(queue[s][head[s]])
                if r is not None:
                    cs[s] = start[queue[s][head[s]]] = max(free[s], r)
                    rem[s] = work[queue[s][head[s]]]
        running = [s for s in (1, 2) if cs[s] is not None]
        if not running:
            break
        if len(running) == 1:
            s = running[0]
            t_now = _finish(s, max(cs[s], t_now) + rem[s] / solo[s], queue, head, free, end, cs)
            continue
        t = max(t_now, min(cs[1], cs[2]))
        late = 1 if cs[1] > t else 2 if cs[2] > t else None
        if late is not None:       # the other copy runs alone until the late one starts (or it ends)
            early = 3 - late
            fin = t + rem[early] / solo[early]
            if fin <= cs[late]:
                t_now = _finish(early, fin, queue, head, free, end, cs)
                continue
            rem[early] -= (cs[late] - t) * solo[early]
            t = cs[late]
        f1, f2 = rem[1] / both[1], rem[2] / both[2]
        first = 1 if f1 <= f2 else 2
        dt = min(f1, f2)
        other = 3 - first
        rem[other] = max(0.0, rem[other] - dt * both[other])
        t_now = _finish(first, t + dt, queue, head, free, end, cs)
    if any(head[s] < len(queue[s]) for s in range(4)):
        raise PlanError("simulation stalled: an action waits on one that can never run (check the deps)")
    for i in range(n):          # drops nothing waits on
        if end[i] is None:
            ds = indices[indptr[i]:indptr[i + 1]]
            start[i] = end[i] = max((end[d] for d in ds), default=0.0)
    return start, end


def _finish(s, t, queue, head, free, end, cs) -> float:
    """The head copy of stream s ends at t."""
    end[queue[s][head[s]]] = free[s] = t
    head[s] += 1
    cs[s] = None
    return t
