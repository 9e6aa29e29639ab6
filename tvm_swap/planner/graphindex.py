"""GraphIndex: the flat, numpy-friendly facts about a graph that the SwapAdvisor planner reads every evaluation.

Built once per (graph, alignment) and shared by feasibility, the genome encoding and the swap planner,
so that a GA evaluation never walks `DataflowGraph` objects or builds per-op dicts.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import DataflowGraph
from ..plan import aligned_bytes

# Tensor roles for the swap planner (what must happen to a tensor's last device copy).
ROLE_TEMP = 0        # activation/gradient: dead after its last use
ROLE_TO_HOST = 1     # graph output or update: must reach the host (swap out) before it is dropped
ROLE_KEEP = 2        # persistent tensor nothing updates: worth keeping on the device for the next iteration
ROLE_HOST_ONLY = 3   # input, or a persistent tensor replaced by its update: host has it, dead after last use
# An updated persistent tensor p whose update p_new has p's size (so p's class under every allocation):
# periodicity is per size class, so p may start resident and p_new stay resident at the end in another
# object of that class (it plays p's object next iteration, see Plan.next_object_map).
ROLE_KEEP_OLD = 4    # such a p: may be an initial resident, host has it, dead after its last use
ROLE_KEEP_NEW = 5    # its p_new: stays resident (next use: p's first use next iteration); swap out if evicted

# False: the old rule (every updated persistent tensor is host-only, its update is swapped out, each kept
# tensor ends in its own object), so no plan needs the runtime to rename objects between iterations.
# The runtime renames objects between calls (runtime_ext.pool.DevicePool.rename).
KEEP_UPDATED = True

NEVER = 1 << 62      # next use of a tensor that is dead after its touch


def keep_updated_modes(forced=None) -> tuple[bool, ...]:
    """The keep_updated settings the size-class search chooses between (planner option keep_updated: `forced`,
    None when not given), the preferred first: keeping, when KEEP_UPDATED allows it."""
    return (bool(forced),) if forced is not None else (True, False) if KEEP_UPDATED else (False,)


@dataclass
class GraphIndex:
    graph: DataflowGraph
    alignment: int
    n_ops: int
    n_tensors: int
    size: np.ndarray          # int64 aligned bytes per tensor
    used: np.ndarray          # bool per tensor: some op reads or writes it
    ts: np.ndarray            # sorted unique aligned sizes of used tensors (the TS of the encoding)
    size_idx: np.ndarray      # int64 per tensor: index into ts, -1 if unused
    op_ptr: np.ndarray        # CSR over ops of the op's distinct tensors: inputs first, then outputs
    op_tensors: np.ndarray    # int64
    op_nin: np.ndarray        # int64 per op: how many of its CSR entries are inputs
    produced: np.ndarray      # bool per tensor: some op writes it (so it has no host copy at first)
    role: np.ndarray          # int8 per tensor, ROLE_*
    old_of: np.ndarray        # int64 per tensor: for a ROLE_KEEP_NEW tensor the one it replaces, else -1
    workspace: int            # aligned bytes of the largest op workspace (0 if none)
    # (op, size index) pairs with multiplicity, sorted by op then size: what `need` reduces over
    pair_op: np.ndarray
    pair_size: np.ndarray
    # op dependency graph (producer -> consumer), CSR over ops, for list scheduling
    succ_ptr: np.ndarray
    succ: np.ndarray
    indeg: np.ndarray
    # readers of each tensor, CSR over tensors (op ids ascending)
    reader_ptr: np.ndarray
    readers: np.ndarray
    keep_updated: bool = True  # ROLE_KEEP_* in use, and periodicity per class (False: per object, the old rule)
    # kept params evicted mid-iteration are copied to the host at the start, not their updates at the end
    # (the wrap index: wrap_keep.py)
    early_out: bool = False

    @classmethod
    def build(cls, graph: DataflowGraph, alignment: int = 256, keep_updated: bool | None = None) -> "GraphIndex":
        n_t = graph.num_tensors
        ptr = [0]
        flat: list[int] = []
        nin = []
        for op in graph.ops:
            ins = list(dict.fromkeys(op.inputs))
            outs = [t for t in dict.fromkeys(op.outputs) if t not in ins]
            flat.extend(ins)
            flat.extend(outs)
            nin.append(len(ins))
            ptr.append(len(flat))
        op_tensors = np.asarray(flat, dtype=np.int64)
        op_ptr = np.asarray(ptr, dtype=np.int64)
        used = np.zeros(n_t, dtype=bool)
        used[op_tensors] = True
        size = aligned_bytes(graph.tensor_bytes(), alignment) if n_t else np.zeros(0, np.int64)
        ts = np.unique(size[used])
        size_idx = np.full(n_t, -1, dtype=np.int64)
        size_idx[used] = np.searchsorted(ts, size[used])
        produced = graph.producer() >= 0

        role = np.full(n_t, ROLE_TEMP, dtype=np.int8)
        updated = set(graph.updates.values())
        for t in range(n_t):
            if not produced[t]:
                if graph.is_persistent(t) and t not in updated:
                    role[t] = ROLE_KEEP
                else:
                    role[t] = ROLE_HOST_ONLY
        for t in list(graph.outputs) + list(graph.updates):
            if produced[t]:
                role[t] = ROLE_TO_HOST
        old_of = np.full(n_t, -1, dtype=np.int64)
        keep_updated = KEEP_UPDATED if keep_updated is None else bool(keep_updated)
        if keep_updated:
            for new, old in graph.updates.items():
                # same aligned size: same class whatever the allocation; p used: p_new has a next use
                if produced[new] and not produced[old] and used[old] and used[new] and size[new] == size[old] \
                        and graph.is_persistent(old):
                    role[old] = ROLE_KEEP_OLD
                    role[new] = ROLE_KEEP_NEW
                    old_of[new] = old

        ws = max((op.workspace for op in graph.ops), default=0)
        workspace = int(aligned_bytes(ws, alignment)) if ws > 0 else 0

        pair_op = np.repeat(np.arange(graph.num_ops, dtype=np.int64), np.diff(op_ptr))
        pair_size = size_idx[op_tensors]
        order = np.lexsort((pair_size, pair_op))

        succs = graph.op_succs()
        succ_ptr = np.zeros(graph.num_ops + 1, dtype=np.int64)
        np.cumsum([len(s) for s in succs], out=succ_ptr[1:])
        succ = np.asarray([o for s in succs for o in s], dtype=np.int64)
        indeg = np.asarray([len(p) for p in graph.op_preds()], dtype=np.int64)
        is_in = np.arange(len(op_tensors)) - np.repeat(op_ptr[:-1], np.diff(op_ptr)) < np.repeat(nin, np.diff(op_ptr))
        rd_t, rd_op = op_tensors[is_in], pair_op[is_in]
        o2 = np.lexsort((rd_op, rd_t))
        reader_ptr = np.zeros(n_t + 1, dtype=np.int64)
        np.cumsum(np.bincount(rd_t, minlength=n_t), out=reader_ptr[1:])
        return cls(graph, int(alignment), graph.num_ops, n_t, size, used, ts, size_idx, op_ptr, op_tensors,
                   np.asarray(nin, dtype=np.int64), produced, role, old_of, workspace, pair_op[order], pair_size[order],
                   succ_ptr, succ, indeg, reader_ptr, rd_op[o2], keep_updated)

    @classmethod
    def of(cls, graph: DataflowGraph, alignment: int = 256, keep_updated: bool | None = None) -> "GraphIndex":
        """build, kept with the graph's other derived facts: the feasibility check, the planner and the search
        read one index (each build cost ~1 CPU s at 10^5 ops). Read-only, as the graph."""
        key = ("graph_index", int(alignment), KEEP_UPDATED if keep_updated is None else bool(keep_updated))
        gi = graph._cache.get(key)
        if gi is None:
            gi = graph._cache[key] = cls.build(graph, alignment, keep_updated)
        return gi

    @property
    def num_sizes(self) -> int:
        return int(len(self.ts))

    def class_need(self, cls: np.ndarray) -> np.ndarray:
        """need[c] = the most distinct tensors of class c one op touches (a class can hold no fewer objects).

        `cls` maps each size index to a class id and is monotone, so (op, class) keys stay sorted."""
        cls = np.asarray(cls, dtype=np.int64)
        n_cls = int(cls[-1]) + 1 if len(cls) else 0
        need = np.zeros(n_cls, dtype=np.int64)
        if len(self.pair_op) == 0:
            return need
        pc = cls[self.pair_size]
        key = self.pair_op * (n_cls + 1) + pc
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        counts = np.diff(np.append(starts, len(key)))
        np.maximum.at(need, pc[starts], counts)
        return need

    def next_uses(self, schedule) -> tuple[np.ndarray, np.ndarray]:
        """(first_pos, touch_next) under `schedule`: the first position touching each tensor (NEVER if none),
        and for each CSR touch (op_tensors) the next position touching the same tensor: cyclic for kept
        tensors (their first use next iteration: position n + first), for a kept update the first use next
        iteration of the tensor it replaces, NEVER for a tensor dead after this touch."""
        n = self.n_ops
        schedule = np.asarray(schedule, dtype=np.int64)
        pos = np.empty(n, dtype=np.int64)
        pos[schedule] = np.arange(n)
        touch_t = self.op_tensors
        touch_pos = np.repeat(pos, np.diff(self.op_ptr))
        order = np.lexsort((touch_pos, touch_t))
        st, sp = touch_t[order], touch_pos[order]
        nxt_sorted = np.full(len(order), NEVER, dtype=np.int64)
        first_pos = np.full(self.n_tensors, NEVER, dtype=np.int64)
        if len(order):
            same = st[1:] == st[:-1]
            nxt_sorted[:-1] = np.where(same, sp[1:], NEVER)
            np.minimum.at(first_pos, touch_t, touch_pos)
            is_last = np.append(~same, True)
            keep_last = is_last & (self.role[st] == ROLE_KEEP)
            nxt_sorted[keep_last] = n + first_pos[st[keep_last]]
            new_last = is_last & (self.role[st] == ROLE_KEEP_NEW)
            nxt_sorted[new_last] = n + first_pos[self.old_of[st[new_last]]]
        nxt = np.empty(len(order), dtype=np.int64)
        nxt[order] = nxt_sorted
        return first_pos, nxt

    def default_schedule(self) -> np.ndarray:
        return np.arange(self.n_ops, dtype=np.int64)

    def is_topological(self, schedule) -> bool:
        """True when `schedule` lists every op once and after all ops it reads from."""
        s = np.asarray(schedule, dtype=np.int64)
        if len(s) != self.n_ops or (len(s) and (s.min() < 0 or s.max() >= self.n_ops)):
            return False
        pos = np.full(self.n_ops, -1, dtype=np.int64)
        pos[s] = np.arange(len(s))
        if (pos < 0).any():
            return False
        src = np.repeat(np.arange(self.n_ops, dtype=np.int64), np.diff(self.succ_ptr))
        return bool((pos[src] < pos[self.succ]).all())
