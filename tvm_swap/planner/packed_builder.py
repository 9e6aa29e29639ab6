"""PackedBuilder: ActionBuilder's dep rules, writing the simulator's flat arrays instead of Action objects.

The GA scores thousands of swap plans; building Action objects through ActionBuilder and packing them
again for the simulator costs more than deciding the plan. This builder takes the same calls in the same
order and yields `simulator.PackedActions` directly. The final plan is always built with ActionBuilder;
tests check that both give identical packed arrays, so the GA's fitness is the final plan's time.
(Rules, from builder.py: compute waits on its inputs' arrivals and its output objects' last drops;
swap_out on the tensor's arrival; drop on its last reader, else its arrival, and its tenancy's swap-out;
swap_in on the object's last drop and the swap-out that made the host copy; deps on the same stream are
left out, the rest sorted and unique.)
"""
from __future__ import annotations

import numpy as np

from .simulator import COMPUTE, DROP, SWAP_IN, SWAP_OUT, PackedActions


class PackedBuilder:
    def __init__(self, n_tensors: int, num_objects: int, op_inputs: list, op_outputs: list,
                 op_time: list, tensor_bytes: list):
        self.op_inputs, self.op_outputs = op_inputs, op_outputs
        self.op_time, self.nbytes = op_time, tensor_bytes
        self.kind: list[int] = []
        self.work: list[float] = []
        self.tensor: list[int] = []
        self.deps: list[int] = []
        self.ndeps: list[int] = []
        self.obj_free_event = [-1] * num_objects
        self.where = [-1] * n_tensors
        self.arrival = [-1] * n_tensors
        self.last_reader = [-1] * n_tensors
        self.tenancy_swap_out = [-1] * n_tensors
        self.host_copy = [-1] * n_tensors

    def place_initial(self, t: int, obj: int) -> None:
        self.where[t] = obj
        self.arrival[t] = -1
        self.last_reader[t] = -1
        self.tenancy_swap_out[t] = -1

    def _add(self, kind: int, work: float, t: int, deps) -> int:
        self.kind.append(kind)
        self.work.append(work)
        self.tensor.append(t)
        self.deps.extend(deps)
        self.ndeps.append(len(deps))
        return len(self.kind) - 1

    def compute(self, op: int, out_objs: list[int]) -> int:
        kind = self.kind
        arrival = self.arrival
        ds = set()
        for t in self.op_inputs[op]:
            d = arrival[t]
            if d >= 0 and kind[d] != COMPUTE:
                ds.add(d)
        ofe = self.obj_free_event
        for o in out_objs:
            d = ofe[o]
            if d >= 0:
                ds.add(d)               # a drop: never on the compute stream
        idx = self._add(COMPUTE, self.op_time[op], -1, sorted(ds))
        lr = self.last_reader
        for t in self.op_inputs[op]:
            lr[t] = idx
        where, tso = self.where, self.tenancy_swap_out
        for t, o in zip(self.op_outputs[op], out_objs):
            where[t] = o
            arrival[t] = idx
            lr[t] = -1
            tso[t] = -1
        return idx

    def swap_out(self, t: int) -> int:
        d = self.arrival[t]
        idx = self._add(SWAP_OUT, self.nbytes[t], t, (d,) if d >= 0 else ())
        self.tenancy_swap_out[t] = idx
        self.host_copy[t] = idx
        return idx

    def drop(self, t: int) -> int:
        a = self.last_reader[t]
        if a < 0:
            a = self.arrival[t]
        b = self.tenancy_swap_out[t]
        if a >= 0 and b >= 0:
            deps = (a, b) if a < b else ((b, a) if b < a else (a,))
        elif a >= 0:
            deps = (a,)
        elif b >= 0:
            deps = (b,)
        else:
            deps = ()
        idx = self._add(DROP, 0.0, t, deps)
        o = self.where[t]
        self.where[t] = -1
        self.obj_free_event[o] = idx
        return idx

    def swap_in(self, t: int, obj: int) -> int:
        a = self.obj_free_event[obj]            # a drop
        b = self.host_copy[t]                   # a swap_out (d2h)
        if a >= 0 and b >= 0:
            deps = (a, b) if a < b else (b, a)
        elif a >= 0:
            deps = (a,)
        elif b >= 0:
            deps = (b,)
        else:
            deps = ()
        idx = self._add(SWAP_IN, self.nbytes[t], t, deps)
        self.where[t] = obj
        self.arrival[t] = idx
        self.last_reader[t] = -1
        self.tenancy_swap_out[t] = -1
        return idx

    def packed(self) -> PackedActions:
        n = len(self.kind)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.asarray(self.ndeps, dtype=np.int64), out=indptr[1:])
        return PackedActions(np.asarray(self.kind, dtype=np.int8), np.asarray(self.work, dtype=np.float64),
                             indptr, np.asarray(self.deps, dtype=np.int64))
