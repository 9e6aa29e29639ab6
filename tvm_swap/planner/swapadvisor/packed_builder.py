"""ActionBuilder's dep rules evaluated with numpy: a swap plan's decisions -> the simulator's flat arrays.

The GA scores thousands of swap plans; building Action objects through ActionBuilder one call at a time
(and packing them again for the simulator) costs more than deciding the plan. Here the whole action list
is ordered at once and every dep is a "latest event of this tensor (or object) before this action"
query, answered with one sort and one searchsorted per kind of event. The final plan is always built
with ActionBuilder; tests check both give identical arrays, so the GA's fitness is the final plan's time.

The rules (builder.py), with "latest" meaning latest earlier in the list:
- compute and recompute (a kernel): its inputs' arrivals that are swap-ins (a kernel's arrival is on the
  same stream), and the latest drop of each output object; a recompute reads its inputs and is the
  arrival of its output like a compute;
- swap_out(t): t's arrival (the compute that made it, or its swap-in);
- drop(t): t's last reader in this tenancy, else its arrival; and its swap-out in this tenancy;
- swap_in(t, o): the latest drop of o, and the latest swap-out of t (its host copy).
Deps are unique and sorted; a missing one (initial residents have no arrival) is left out.
"""
from __future__ import annotations

import numpy as np

from ..simulator import COMPUTE, DROP, RECOMPUTE, SWAP_IN, SWAP_OUT, PackedActions


def _latest_before(ev_key: np.ndarray, ev_pos: np.ndarray, q_key: np.ndarray, q_pos: np.ndarray,
                   span: int) -> np.ndarray:
    """For each query, the largest event position < q_pos among events with the same key (-1: none)."""
    if len(ev_key) == 0 or len(q_key) == 0:
        return np.full(len(q_key), -1, dtype=np.int64)
    comp = ev_key * span + ev_pos
    order = np.argsort(comp, kind="stable")
    comp_s = comp[order]
    k = np.searchsorted(comp_s, q_key * span + q_pos, side="left") - 1
    ok = k >= 0
    kc = np.where(ok, k, 0)
    hit = ok & (ev_key[order][kc] == q_key)
    return np.where(hit, ev_pos[order][kc], -1)


def _latest_covering_drops(dr_pos, dr_lo, dr_hi, q_pos, q_lo, q_hi, span: int):
    """The arena rule (arena.ArenaActionBuilder): for each query (an arrival taking bytes [q_lo, q_hi) at
    action q_pos), the drops that last freed any of its bytes before it. Returns (query index, drop
    position) pairs, possibly repeated. Cut the address space at every range boundary: within one
    elementary segment every range covers all of it or none of it, so "the latest drop that freed each
    byte" is one _latest_before query per (query, segment)."""
    if len(dr_pos) == 0 or len(q_pos) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    bnd = np.unique(np.concatenate((dr_lo, dr_hi, q_lo, q_hi)))

    def expand(lo, hi):
        a = np.searchsorted(bnd, lo)
        cnt = np.searchsorted(bnd, hi) - a
        row = np.repeat(np.arange(len(lo), dtype=np.int64), cnt)
        seg = np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt - a, cnt)
        return row, seg

    d_row, d_seg = expand(dr_lo, dr_hi)
    q_row, q_seg = expand(q_lo, q_hi)
    dep = _latest_before(d_seg, dr_pos[d_row], q_seg, q_pos[q_row], span)
    return q_row, dep


def pack_decisions(n_slots: int, sched: np.ndarray, out_objs: list, swap_outs: list, drops: list,
                   swap_ins: list, op_ptr: np.ndarray, op_tensors: np.ndarray, op_nin: np.ndarray,
                   op_time: np.ndarray, nbytes: np.ndarray, ranges=None, recomputes=()) -> PackedActions:
    """pack_numpy's arrays; in arena mode (`ranges`) computed by packed_jit.pack_arena (numba, one pass: the
    numpy calls' overhead was a fifth of an evaluation on small graphs), which tests check against pack_numpy."""
    if ranges is not None:
        from .packed_jit import pack_arena      # (numba, loaded when a genome is first scored)

        return pack_arena(n_slots, sched, out_objs, swap_outs, drops, swap_ins, op_ptr, op_tensors, op_nin,
                          op_time, nbytes, ranges, recomputes)
    return pack_numpy(n_slots, sched, out_objs, swap_outs, drops, swap_ins, op_ptr, op_tensors, op_nin, op_time,
                      nbytes, ranges, recomputes)


def pack_numpy(n_slots: int, sched: np.ndarray, out_objs: list, swap_outs: list, drops: list,
               swap_ins: list, op_ptr: np.ndarray, op_tensors: np.ndarray, op_nin: np.ndarray,
               op_time: np.ndarray, nbytes: np.ndarray, ranges=None, recomputes=()) -> PackedActions:
    """The PackedActions that ActionBuilder would produce for these decisions (see swapplan._emit).

    sched[i] = op computed at slot i; out_objs[i] = its output objects; swap_outs = [(slot, t)];
    drops = [(slot, t, obj)]; swap_ins = [(earliest slot, t, obj)] in issue order (each issued no
    earlier than the one before it); recomputes = [(slot, op, objs)]: op run again into objs (one per
    output, in the op's output order) right before the compute at slot, in this order (arena.actions.emit_actions).

    ranges=(offset, size) arrays indexed by the ids in out_objs/drops/swap_ins: arena mode, those ids are
    stays (byte ranges that may overlap over time) and an arrival waits for the drops that last freed any
    of its bytes (ArenaActionBuilder) instead of its object's latest drop (arena.actions.emit_actions mirrors this)."""
    n = int(n_slots)
    rc = np.array([(s, op) for s, op, _ in recomputes], dtype=np.int64).reshape(-1, 2)
    so = np.asarray(swap_outs, dtype=np.int64).reshape(-1, 2)
    dr = np.asarray(drops, dtype=np.int64).reshape(-1, 3)
    si = np.asarray(swap_ins, dtype=np.int64).reshape(-1, 3)
    si_slot = np.maximum.accumulate(si[:, 0]) if len(si) else si[:, 0]
    n_r, n_c, n_o, n_d, n_i = len(rc), n, len(so), len(dr), len(si)
    # ---- the order: per slot, its recomputes, its compute, then its swap-outs, drops and swap-ins in
    # recorded order
    slot = np.concatenate((rc[:, 0], np.arange(n, dtype=np.int64), so[:, 0], dr[:, 0], si_slot))
    rank = np.concatenate((np.zeros(n_r, np.int64), np.ones(n_c, np.int64), np.full(n_o, 2, np.int64),
                           np.full(n_d, 3, np.int64), np.full(n_i, 4, np.int64)))
    seq = np.concatenate((np.arange(n_r), np.zeros(n_c, np.int64), np.arange(n_o), np.arange(n_d),
                          np.arange(n_i)))
    order = np.lexsort((seq, rank, slot))
    A = len(order)
    pos = np.empty(A, dtype=np.int64)
    pos[order] = np.arange(A)
    c0 = n_r + n_c
    p_r, p_c, p_o = pos[:n_r], pos[n_r:c0], pos[c0:c0 + n_o]
    p_d, p_i = pos[c0 + n_o:c0 + n_o + n_d], pos[c0 + n_o + n_d:]
    span = A + 1

    kind = np.empty(A, dtype=np.int8)
    work = np.zeros(A, dtype=np.float64)
    kind[p_r], kind[p_c], kind[p_o], kind[p_d], kind[p_i] = RECOMPUTE, COMPUTE, SWAP_OUT, DROP, SWAP_IN
    sched = np.asarray(sched, dtype=np.int64)
    work[p_c] = op_time[sched]
    work[p_r] = op_time[rc[:, 1]]
    work[p_o] = nbytes[so[:, 1]]
    work[p_i] = nbytes[si[:, 1]]

    # ---- what each kernel (computes, then recomputes) reads and writes (distinct tensors, inputs then
    # outputs per op)
    k_op = np.concatenate((sched, rc[:, 1]))
    k_pos = np.concatenate((p_c, p_r))
    cnt = np.diff(op_ptr)[k_op]
    starts = op_ptr[k_op]
    touch_k = np.repeat(np.arange(len(k_op), dtype=np.int64), cnt)
    within = np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    touch_t = op_tensors[np.repeat(starts, cnt) + within]
    is_in = within < np.repeat(op_nin[k_op], cnt)
    touch_pos = k_pos[touch_k]
    rd_t, rd_pos = touch_t[is_in], touch_pos[is_in]
    wr_t, wr_pos = touch_t[~is_in], touch_pos[~is_in]
    wr_obj = np.fromiter((o for objs in out_objs for o in objs), dtype=np.int64)
    if n_r:
        wr_obj = np.concatenate((wr_obj, np.fromiter((o for _, _, objs in recomputes for o in objs),
                                                     dtype=np.int64)))
    if len(wr_obj) != len(wr_t):
        raise ValueError("pack_decisions: output objects do not match the ops' outputs")

    # ---- event tables
    so_t, dr_t, dr_o, si_t, si_o = so[:, 1], dr[:, 1], dr[:, 2], si[:, 1], si[:, 2]
    arr_t = np.concatenate((wr_t, si_t))             # arrivals: productions and swap-ins
    arr_pos = np.concatenate((wr_pos, p_i))

    deps_of, deps = [], []

    def add(owner, dep):
        keep = dep >= 0
        deps_of.append(owner[keep])
        deps.append(dep[keep])

    # kernels: swap-in arrivals of its inputs (the latest arrival of an input is its latest swap-in, if
    # any: the arena walk never rebuilds a tensor once it has a host copy, so every swap-in of a tensor
    # comes after its rebuilds), latest drops of its output objects
    add(rd_pos, _latest_before(si_t, p_i, rd_t, rd_pos, span))
    if ranges is None:
        add(wr_pos, _latest_before(dr_o, p_d, wr_obj, wr_pos, span))
    else:
        # arrivals (outputs and swap-ins) wait for the drops that last freed their bytes
        r_off, r_size = (np.asarray(x, dtype=np.int64) for x in ranges)
        q_id = np.concatenate((wr_obj, si_o))
        q_pos = np.concatenate((wr_pos, p_i))
        row, dep = _latest_covering_drops(p_d, r_off[dr_o], r_off[dr_o] + r_size[dr_o], q_pos, r_off[q_id],
                                          r_off[q_id] + r_size[q_id], span)
        add(q_pos[row], dep)
    # swap_out: the tensor's arrival
    add(p_o, _latest_before(arr_t, arr_pos, so_t, p_o, span))
    # drop: last reader in this tenancy, else the arrival; this tenancy's swap-out
    a = _latest_before(arr_t, arr_pos, dr_t, p_d, span)
    r = _latest_before(rd_t, rd_pos, dr_t, p_d, span)
    s = _latest_before(so_t, p_o, dr_t, p_d, span)
    add(p_d, np.where(r > a, r, a))
    add(p_d, np.where(s > a, s, -1))
    # swap_in: the object's latest drop (arena: above), the tensor's latest swap-out
    if ranges is None:
        add(p_i, _latest_before(dr_o, p_d, si_o, p_i, span))
    add(p_i, _latest_before(so_t, p_o, si_t, p_i, span))

    owner = np.concatenate(deps_of)
    dep = np.concatenate(deps)
    # each rule names a different kind of action and distinct tensors/objects give distinct events, so
    # there are no duplicates to remove: sorting (by owner, then dep) is all the CSR needs; in an arena
    # one drop can have freed bytes of several segments or outputs: remove the repeats
    key = np.sort(owner * span + dep) if ranges is None else np.unique(owner * span + dep)
    owner, dep = key // span, key % span
    indptr = np.zeros(A + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=A), out=indptr[1:])
    return PackedActions(kind, work, indptr, dep)
