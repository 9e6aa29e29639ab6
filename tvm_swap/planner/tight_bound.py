"""An activation-aware lower bound: seconds no valid plan can beat in the simulator, for any schedule.

`bounds.lower_bound` counts compute and the traffic of params, inputs, outputs and updates, but no
activation traffic. This module adds cut arguments over the schedule-independent structure of the graph.

Assumptions (all hold for every plan `tvm_swap.verify` accepts today):
  A1 every produced tensor is produced on the device; a swap_in of it needs a completed swap_out
     of it, and the swap_in completes before any compute reads it (it happens-before the reader);
  A2 no recomputation: a tensor dropped and read later is brought back only by a swap_in;
  A3 memory: when op o's compute runs, the tensors the plan holds on the device (the verifier's replay
     at o's compute action) occupy disjoint memory of at least their `nbytes` each, inside
     `mem_limit` minus o's own workspace. This holds for size classes (objects >= aligned bytes,
     the pool's workspace >= every op's) and for an arena of `mem_limit` bytes (stays that overlap
     in time never overlap in address; o's workspace is in the arena while o runs). Raw `nbytes`
     are used, never aligned sizes, so the bound holds whatever the alignment or memory model;
  A4 the simulator's link: d2h moves at most d2h_bandwidth, h2d at most h2d_bandwidth, both together
     at most max(one-way rates, duplex sum); the compute stream runs one op at a time.
With recomputation (A2 dropped) a non-resident activation could be recomputed instead of crossing:
each crossing term below would become min(crossing, the compute time of re-running its producer),
and that compute would add to the compute term; the bound as written would no longer be sound.

Definitions (ops are nodes, u -> v when v reads an output of u; anc/desc are strict):
  W_o   = bytes of o's distinct inputs and outputs (all kinds), less what running in place may save (an
          output written over a dying input shares its memory, DataflowGraph.inplace_savings): resident
          while o runs;
  L_o   = produced tensors that are neither graph outputs nor updates, not in o's own inputs/outputs,
          whose producer is in anc(o) and that some op in desc(o) reads. In EVERY topological order
          the producer has run before o and that reader runs after o, so t exists and is needed
          across o;
  a_o   = bytes(L_o) + W_o + ws_o - mem_limit.

Claim 1 (activation crossings). Fix a plan and op o. By A3 the resident tensors during o weigh at
  most mem_limit - ws_o; they include o's own tensors (W_o), so the tensors of L_o that are not
  resident during o (call them S_o) weigh at least a_o. Each t in S_o was produced before o and is
  read after o, so by A1/A2 it is swapped in after o's start-of-absence and a swap_out of it completes
  before that swap_in. Hence bytes swapped out of L-tensors >= a_o and bytes swapped in >= a_o, for
  every o, so both >= act = max(0, max_o a_o). L excludes outputs, updates, params and inputs, so these
  copies are disjoint from the ones `bounds.must_move_bytes` counts: in >= old_in + act, out >= old_out
  + act.

Claim 2 (joint with params). Members N: used persistent tensors p that no update replaces, or whose
  update op u reads p; size(p) = nbytes, or min(nbytes of p, of its update p') if updated. A member
  that is never swapped in (neither p nor p') is an initial resident: if not updated, periodicity
  keeps it resident to the end, so during every op; if updated, p is resident until u reads it (it
  cannot come back without a swap_in) and p' from u to the end (it must be resident at the end and
  cannot come back without a swap_in), so p or p' holds >= size(p) during every op. Let P_N be the
  members' sizes and pN_o the sizes of members with p or p' among o's own tensors. If the plan keeps
  k bytes of members that way, the members' swap-ins (of p or p') are >= P_N - k, and during op o the
  kept ones not among o's own tensors add >= k - pN_o resident bytes, so L's non-resident bytes during
  o are >= a_o - pN_o + k. Summing the disjoint copies of members and L: in >= P_N - k + max(0, c + k)
  with c = max_o (a_o - pN_o); the minimum over k in [0, P_N] is max(0, P_N + c). So
  in >= inputs_in + max(0, P_N + c) as well.

Claim 3 (time windows, ops with op_time > 0). Work in simulated time. A tenancy of a tensor (arrival
  start to drop end) holds one object; the next tenant of that object arrives only after the drop
  (the verifier's happens-before), so the tensors whose tenancy contains an instant occupy distinct
  objects. Take the instant just after o starts (tau_o): o's inputs and outputs occupy, and by the same
  memory argument as Claim 1 the tensors S_o of L_o that occupy nothing then weigh >= a_o. For t in
  S_o: its tenancies start in list order in time (the producer, then swap_ins on the FIFO h2d
  stream), so all tenancies starting before tau_o have also ended by then; the first one starting after
  tau_o is a swap_in, whose required swap_out lies in an earlier tenancy and precedes its drop. Hence
  a swap_out of t lies in [head(t), tau_o], head(t) = compute time of prod(t) and its ancestors, and
  for every reader r of t in desc(o) a swap_in of t lies in [tau_o, T - tail(r)], tail(r) = compute
  time of r and its descendants; write tail_o(t) for the largest such tail(r).
  Out side: for any theta the tensors of S_o with head >= theta leave within [theta, tau_o] at most at
  the d2h rate; the choice of S_o that minimises this is (fractionally) the earliest-head a_o bytes
  of L_o, so tau_o >= OUT_o = max_theta theta + max(0, a_o - bytes of L_o with head < theta) / d2h.
  In side, symmetrically with tails and the h2d rate: T - tau_o >= IN_o. The compute before tau_o
  (x) covers anc(o) and leaves o and desc(o) after it: T >= min over x in [C(anc o), C - C(o, desc o)]
  of max(x, OUT_o) + max(C - x, IN_o), C the total compute. Evaluated on the ops with the largest a_o.

The bound is the max of the old bound's terms with these byte totals, and the window terms; by
construction it is never below `bounds.lower_bound`.

Speed: ancestor/descendant sets are bitsets (one packed uint8 row per op), built in one sweep each
way; the per-op sum of live bytes is a chunked product of unpacked bit rows with tensor sizes.
"""
from __future__ import annotations

import numpy as np

from ..graph import DataflowGraph
from ..plan import DEFAULT_ALIGNMENT
from .bounds import lower_bound_detail
from .simulator import _link_rates

_CHUNK = 256          # bit rows unpacked at once (256 x 10^4 ops = 2.5 MB of bools)
WINDOW_OPS = 32       # ops (largest a_o first) whose time window is evaluated
MAX_OPS = 30_000      # two n x n bitsets: 2 x 112 MB here; beyond, the old bound is returned (still sound)
CACHE_MAX_OPS = 4096  # up to here (2 x 2 MB) the bitsets and live bytes stay with the graph for the next plan


def ancestor_bitsets(graph: DataflowGraph) -> tuple[np.ndarray, np.ndarray]:
    """(anc, desc): uint8 arrays [num_ops, ceil(num_ops/8)], bit v of row o set iff v is a strict ancestor
    (descendant) of o. Ops are in topological order (graph convention), so one sweep each way suffices."""
    n = graph.num_ops
    nb = (n + 7) // 8
    anc = np.zeros((n, nb), dtype=np.uint8)
    desc = np.zeros((n, nb), dtype=np.uint8)
    preds = graph.op_preds()
    succs = graph.op_succs()
    bit = lambda v: (v >> 3, np.uint8(1 << (v & 7)))  # noqa: E731  (little bit order)
    for o in range(n):
        row = anc[o]
        for p in preds[o]:
            np.bitwise_or(row, anc[p], out=row)
            i, m = bit(p)
            row[i] |= m
    for o in range(n - 1, -1, -1):
        row = desc[o]
        for s in succs[o]:
            np.bitwise_or(row, desc[s], out=row)
            i, m = bit(s)
            row[i] |= m
    return anc, desc


def _unpack(rows: np.ndarray, n: int) -> np.ndarray:
    return np.unpackbits(rows, axis=1, bitorder="little", count=n).astype(bool)


def _closure_times(bits: np.ndarray, op_time: np.ndarray) -> np.ndarray:
    """Per op: its own time plus the times of the ops in its bit row."""
    n = len(op_time)
    out = op_time.astype(np.float64).copy()
    for s in range(0, n, _CHUNK):
        out[s:s + _CHUNK] += _unpack(bits[s:s + _CHUNK], n) @ op_time
    return out


def _live_rows(graph: DataflowGraph, anc: np.ndarray, desc: np.ndarray):
    """(tensor ids, packed bit rows): for each tensor that may count in some L_o, the ops o it is live across."""
    prod = graph.producer()
    cons = graph.consumers()
    excluded = set(graph.outputs) | set(graph.updates)
    ids, rows = [], []
    for t in range(graph.num_tensors):
        p = int(prod[t])
        if p < 0 or t in excluded or not cons[t]:
            continue
        later = np.zeros(anc.shape[1], dtype=np.uint8)
        for r in cons[t]:
            np.bitwise_or(later, anc[r], out=later)
        row = desc[p] & later
        if row.any():
            ids.append(t)
            rows.append(row)
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, anc.shape[1]), dtype=np.uint8)
    return np.array(ids, dtype=np.int64), np.stack(rows)


def _has_bit(rows: np.ndarray, o: int) -> np.ndarray:
    return (rows[:, o >> 3] >> np.uint8(o & 7)) & np.uint8(1) == 1


def live_bytes_per_op(graph: DataflowGraph, anc=None, desc=None) -> dict:
    """bytes(L_o) per op (module docstring), with the structures the window terms reuse."""
    if anc is None or desc is None:
        anc, desc = ancestor_bitsets(graph)
    n = graph.num_ops
    nbytes = graph.tensor_bytes().astype(np.float64)
    ids, rows = _live_rows(graph, anc, desc)
    live = np.zeros(n, dtype=np.float64)
    for s in range(0, len(ids), _CHUNK):
        live += nbytes[ids[s:s + _CHUNK]] @ _unpack(rows[s:s + _CHUNK], n)
    # o's own tensors are counted in W_o, not in L_o
    where = {int(t): i for i, t in enumerate(ids)}
    for o, op in enumerate(graph.ops):
        for t in dict.fromkeys((*op.inputs, *op.outputs)):
            i = where.get(t)
            if i is not None and _has_bit(rows[i:i + 1], o)[0]:
                live[o] -= nbytes[t]
    return {"live": live, "ids": ids, "rows": rows, "anc": anc, "desc": desc}


def _sweep(key: np.ndarray, nb: np.ndarray, need: float, rate: float) -> float:
    """max over theta of theta + max(0, need - bytes with key < theta) / rate (Claim 3)."""
    order = np.argsort(key, kind="stable")
    k, b = key[order], nb[order]
    before = np.concatenate([[0.0], np.cumsum(b)[:-1]])      # bytes with a strictly smaller key (ties: fine,
    return float(np.max(k + np.maximum(0.0, need - before) / rate))   # counting fewer only lowers the bound)


def _window_bound(graph, info, op_time, o: int, excess: float, d_solo: float, h_solo: float) -> float:
    n = graph.num_ops
    anc, desc, ids, rows = info["anc"], info["desc"], info["ids"], info["rows"]
    if "head" not in info:
        info["head"] = _closure_times(anc, op_time)
        info["tail"] = _closure_times(desc, op_time)
    head, tail = info["head"], info["tail"]
    prod = graph.producer()
    cons = graph.consumers()
    own = set(graph.ops[o].inputs) | set(graph.ops[o].outputs)
    ts = [int(t) for t in ids[_has_bit(rows, o)] if int(t) not in own]
    if not ts:
        return 0.0
    dbits = _unpack(desc[o:o + 1], n)[0]
    nb = graph.tensor_bytes()[ts].astype(np.float64)
    heads = np.array([head[prod[t]] for t in ts])
    tails = np.array([max(tail[r] for r in cons[t] if dbits[r]) for t in ts])
    out_s = _sweep(heads, nb, excess, d_solo)
    in_s = _sweep(tails, nb, excess, h_solo)
    total = float(op_time.sum())
    lo = float(op_time[_unpack(anc[o:o + 1], n)[0]].sum())
    hi = total - float(op_time[o]) - float(op_time[dbits].sum())
    cands = [x for x in (lo, hi, out_s, total - in_s) if lo <= x <= hi] + [lo, hi]
    return min(max(x, out_s) + max(total - x, in_s) for x in cands)


def tight_lower_bound_detail(graph: DataflowGraph, op_time, device, mem_limit: int,
                             alignment: int = DEFAULT_ALIGNMENT) -> dict:
    """The activation-aware bound (seconds) and its terms; keys of `bounds.lower_bound_detail` are kept."""
    old = lower_bound_detail(graph, op_time, device, mem_limit, alignment)
    op_time = np.asarray(op_time, dtype=np.float64)
    n = graph.num_ops
    d_solo, h_solo, d_both, h_both = _link_rates(device)
    link = max(d_solo, h_solo, d_both + h_both)
    if n == 0 or n > MAX_OPS:
        return {**old, "tight_lower_bound_s": old["lower_bound_s"], "activation_bytes": 0.0, "tight_window_s": 0.0,
                "joint_param_activation_in": 0.0, "tight_in_bytes": old["in_bytes"],
                "tight_out_bytes": old["out_bytes"],
                "tight_skipped": f"{n} ops: more than {MAX_OPS} (ancestor bitsets would need n^2/4 bytes)" if n else ""}
    nbytes = graph.tensor_bytes().astype(np.float64)
    # graph-only (the same for every limit and op times): kept with the graph while its bitsets are small
    info = graph._cache.get("live_bytes_per_op")
    if info is None:
        info = live_bytes_per_op(graph)
        if n <= CACHE_MAX_OPS:
            graph._cache["live_bytes_per_op"] = info
    info = dict(info)         # _window_bound adds this call's op-time closures to it: not to the cached one
    prod = graph.producer()
    updated = set(graph.updates.values())
    used = graph.used_tensors()
    # Claim 2's members: used params that are not updated, or whose update op reads them (a member that
    # never crosses in holds >= its size during every op, as itself or as its update); size = min of the two
    new_of = {old: new for new, old in graph.updates.items()}
    member_size = {}
    for t in used:
        if not graph.is_persistent(t):
            continue
        if t not in updated:
            member_size[t] = float(nbytes[t])
        elif t in graph.ops[int(prod[new_of[t]])].inputs:
            member_size[t] = float(min(nbytes[t], nbytes[new_of[t]]))
    of_member = {t: t for t in member_size} | {new_of[t]: t for t in member_size if t in new_of}
    p_n = float(sum(member_size.values()))
    w = np.zeros(n)
    pn = np.zeros(n)
    ws = np.array([op.workspace for op in graph.ops], dtype=np.float64)
    saved = graph.inplace_savings(nbytes)
    for o, op in enumerate(graph.ops):
        own = list(dict.fromkeys((*op.inputs, *op.outputs)))
        w[o] = nbytes[own].sum() - saved[o]
        pn[o] = sum(member_size[m] for m in {of_member[t] for t in own if t in of_member})
    a = info["live"] + w + ws - float(mem_limit)
    act = max(0.0, float(a.max()))
    joint_n = max(0.0, p_n + float((a - pn).max()))
    in_b = old["inputs_in"] + max(old["persistent_in"] + act, joint_n)
    out_b = old["out_bytes"] + act

    # Claim 3: time windows on the ops with the largest excess
    window = 0.0
    hot = [int(o) for o in np.argsort(-a, kind="stable")[:WINDOW_OPS] if a[o] > 0 and op_time[o] > 0]
    if hot:
        window = max(_window_bound(graph, info, op_time, o, float(a[o]), d_solo, h_solo) for o in hot)
    terms = {
        "compute_s": old["compute_s"],
        "h2d_s": in_b / h_solo,
        "d2h_s": out_b / d_solo,
        "link_s": (in_b + out_b) / link,
        "window_s": window,
    }
    tight = max(max(terms.values()), old["lower_bound_s"])
    return {**old, **{f"tight_{k}": float(v) for k, v in terms.items()},
            "tight_lower_bound_s": float(tight), "activation_bytes": act, "joint_param_activation_in": joint_n,
            "tight_in_bytes": float(in_b), "tight_out_bytes": float(out_b)}


def tight_lower_bound(graph: DataflowGraph, op_time, device, mem_limit: int,
                      alignment: int = DEFAULT_ALIGNMENT) -> float:
    """Seconds no verified plan under `mem_limit` can beat in the simulator (see the module docstring)."""
    return float(tight_lower_bound_detail(graph, op_time, device, mem_limit, alignment)["tight_lower_bound_s"])
