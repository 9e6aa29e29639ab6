"""Plan: the versioned, JSON-serialisable result of planning, and the contract with the compiler pass.

A plan is an *augmented graph*: a list of actions in issue order. Each action runs on one stream
(FIFO within the stream, in list order) once all of its `deps` have completed:

    kind       stream    meaning
    compute    compute   run op `op`; its outputs are written into objects `out_objs` (same order as op.outputs)
    recompute  compute   run op `op` again (it was computed earlier this iteration) to rebuild outputs that were
                         dropped without a copy; same JSON shape as compute; its inputs must still hold the
                         values of the original run; an output not needed again may be dropped right after
    swap_out   d2h       copy tensor `tensor` from object `obj` to host (the object stays occupied)
    swap_in    h2d       copy tensor `tensor` from host into object `obj` (which must be free)
    drop       (none)    release object `obj` held by `tensor`; completes when its deps complete

An op in `host_ops` runs on the host: its compute action is on the host stream (FIFO, in list order, beside
the other three), names no output objects (`out_objs` empty), reads host copies (a param or optimizer state
whose host copy is current, an input, a swap_out's copy or another host op's output, each completed before
it) and leaves its outputs in host memory, where a swap_in may bring them to the device once it has ended.

`deps` name earlier actions by index (these are the events the runtime waits on). The memory model is
`plan.pool`: a `Pool` of size classes (the paper's; objects numbered class-major, class 0's first, laid
back to back) or an `Arena` (one region; each object is an aligned byte range in it, and objects may
overlap in address because the plan never uses two overlapping ones at overlapping times). `initial_residents` are (tensor, object) pairs of
persistent tensors (params, optimizer state) that are on the device when an iteration starts; the
plan must leave the same tensors (through `DataflowGraph.updates`) in objects of the same size class
when it ends, so it repeats. Objects of a class are interchangeable: between iterations the runtime
renames them (`Plan.next_object_map`), so an updated weight can stay on the device although its update
was written into another object than the old value's.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np

from .errors import PlanError
from .jsonio import check_versioned, parse_json, read_json

PLAN_FORMAT = "tvm_swap.plan"
PLAN_VERSION = 3          # 3: recompute actions; 2: pool kinds ("size-classes" | "arena"); 1: size classes only
HOST_OPS_VERSION = 4      # 4: ops placed on the host (`host_ops`); written only by plans that place some
SUPPORTED_VERSIONS = (1, 2, 3, 4)   # older plans load unchanged (they contain no recompute)
POOL_KINDS = ("arena", "size-classes")
DEFAULT_ALIGNMENT = 256  # cudaMalloc's alignment; also keeps CPU kernels' 64-byte requirement


class ActionKind(str, Enum):
    """The five kinds of action. A str subclass: `a.kind == "compute"` holds and JSON writes the value."""
    COMPUTE = "compute"
    SWAP_OUT = "swap_out"
    SWAP_IN = "swap_in"
    DROP = "drop"
    RECOMPUTE = "recompute"

    __hash__ = str.__hash__          # so a kind and its string are the same dict key

    def __str__(self) -> str:
        return self.value


ACTION_KINDS = tuple(k.value for k in ActionKind)
STREAM_OF = {ActionKind.COMPUTE: "compute", ActionKind.SWAP_OUT: "d2h", ActionKind.SWAP_IN: "h2d",
             ActionKind.DROP: None, ActionKind.RECOMPUTE: "compute"}
# the kinds that run an op's kernel (and so carry `op` and `out_objs` instead of `tensor` and `obj`)
KERNEL_KINDS = (ActionKind.COMPUTE, ActionKind.RECOMPUTE)


def runs_kernel(kind) -> bool:
    """True for compute and recompute: the action runs op `op`, writing `out_objs`."""
    return kind == ActionKind.COMPUTE or kind == ActionKind.RECOMPUTE


def aligned_bytes(nbytes, alignment: int = DEFAULT_ALIGNMENT):
    """Bytes of the pool object that holds a tensor of `nbytes`: rounded up to `alignment`, never 0 (every
    tensor needs storage). An int for an int, an int64 array for an array (or list) of sizes."""
    a = int(alignment)
    if isinstance(nbytes, (int, np.integer)):
        return max(a, (int(nbytes) + a - 1) // a * a)
    return np.maximum(a, (np.asarray(nbytes, dtype=np.int64) + a - 1) // a * a)


@dataclass(frozen=True, slots=True)   # slots: ~50 bytes less per action (10^6 actions at 10^5 ops)
class Action:
    kind: str
    op: int = -1
    tensor: int = -1
    obj: int = -1
    deps: tuple[int, ...] = ()
    out_objs: tuple[int, ...] = ()

    def to_json(self) -> dict:
        d: dict = {"k": self.kind}
        if runs_kernel(self.kind):
            d["op"] = self.op
            d["out"] = list(self.out_objs)
        else:
            d["t"] = self.tensor
            d["obj"] = self.obj
        if self.deps:
            d["deps"] = list(self.deps)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Action":
        k = _KIND_OF.get(d["k"]) if isinstance(d["k"], str) else None
        if k is None:
            raise PlanError(f"unknown action kind {d['k']!r}")
        deps = tuple(map(int, d.get("deps", ())))
        if k in KERNEL_KINDS:
            return cls(k, op=int(d["op"]), deps=deps, out_objs=tuple(map(int, d.get("out", ()))))
        return cls(k, tensor=int(d["t"]), obj=int(d["obj"]), deps=deps)


_KIND_OF = {k.value: k for k in ActionKind}      # a plan holds ~10^5 actions: a dict, not Enum's lookup


@dataclass
class Pool:
    """Size classes, each with `count` objects of `bytes` (already aligned), laid back to back."""
    class_bytes: list[int]
    class_count: list[int]
    alignment: int = DEFAULT_ALIGNMENT
    workspace_bytes: int = 0
    kind = "size-classes"

    def object_offset(self) -> np.ndarray:
        """Byte offset of each object in the one device allocation (objects back to back)."""
        b = self.object_bytes()
        return np.concatenate(([0], np.cumsum(b)[:-1])).astype(np.int64) if len(b) else np.zeros(0, np.int64)

    @property
    def region_bytes(self) -> int:
        """Bytes of the one device allocation that holds every object (workspace not included)."""
        return int(self.object_bytes().sum())

    @property
    def num_objects(self) -> int:
        return int(sum(self.class_count))

    def object_class(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.class_count)), self.class_count).astype(np.int64)

    def object_bytes(self) -> np.ndarray:
        return np.repeat(np.asarray(self.class_bytes, dtype=np.int64), self.class_count)

    def first_object(self) -> np.ndarray:
        """first_object()[c] = global index of class c's first object."""
        return np.concatenate([[0], np.cumsum(self.class_count)[:-1]]).astype(np.int64) if self.class_count else np.zeros(0, np.int64)

    def total_bytes(self) -> int:
        return int(sum(b * c for b, c in zip(self.class_bytes, self.class_count))) + int(self.workspace_bytes)

    def to_json(self) -> dict:
        return {"kind": self.kind, "alignment": self.alignment, "workspace_bytes": self.workspace_bytes,
                "classes": [[int(b), int(c)] for b, c in zip(self.class_bytes, self.class_count)]}

    @classmethod
    def from_json(cls, d: dict) -> "Pool | Arena":
        kind = d.get("kind", "size-classes")
        if kind == "arena":
            return Arena.from_json(d)
        if kind != "size-classes":
            raise PlanError(f"unknown pool kind {kind!r}; expected one of {', '.join(POOL_KINDS)}")
        cl = d["classes"]
        return cls([int(b) for b, _ in cl], [int(c) for _, c in cl], int(d.get("alignment", DEFAULT_ALIGNMENT)),
                   int(d.get("workspace_bytes", 0)))


@dataclass
class Arena:
    """One device region of `arena_bytes`; object k is the byte range [offsets[k], offsets[k] + sizes[k]).

    Each object is one stay of a tensor on the device (or several stays at the same place). Objects may
    overlap in address: the verifier checks that two tenants of overlapping objects are never live at once
    (the later one's arrival waits for the earlier one's drop). Offsets and sizes are multiples of
    `alignment` (>= 64), so TVM views every object with zero copy (`ensure_zero_offset`). All objects are
    "class 0" for the parts of the code that speak of classes; periodicity is per object (an initial
    resident ends where it started, or in the object that backs its object next iteration, see `swaps`).

    `swaps`: cycles of objects whose buffers trade places between iterations: a cycle (a0, a1, ..., am-1)
    means the buffer of a(i+1) plays a(i) next iteration (a(m) = a0), so a pair (a, b) is a ping-pong pair (a
    kept param starts in one, its update is written into the other, next iteration the update plays the
    param) and a longer cycle is a rotation (kept params of equal size in equal slots: each update is written
    into a slot another param's old value has left). The objects of a cycle have equal size, and the renaming
    maps the layout onto itself (two objects overlap exactly when the objects backing them do; an object in
    no cycle backs itself): e.g. equal disjoint slots permuted with every object inside them (the verifier
    checks it). Old plans hold pairs only; they read unchanged."""
    arena_bytes: int
    offsets: list[int]
    sizes: list[int]
    alignment: int = DEFAULT_ALIGNMENT
    workspace_bytes: int = 0
    swaps: list = field(default_factory=list)
    kind = "arena"

    @property
    def num_objects(self) -> int:
        return len(self.offsets)

    @property
    def class_count(self) -> list[int]:
        return [self.num_objects]

    @property
    def class_bytes(self) -> list[int]:
        return [max(self.sizes, default=0)]

    @property
    def region_bytes(self) -> int:
        return int(self.arena_bytes)

    def object_class(self) -> np.ndarray:
        return np.zeros(self.num_objects, dtype=np.int64)

    def object_bytes(self) -> np.ndarray:
        return np.asarray(self.sizes, dtype=np.int64)

    def object_offset(self) -> np.ndarray:
        return np.asarray(self.offsets, dtype=np.int64)

    def total_bytes(self) -> int:
        return int(self.arena_bytes) + int(self.workspace_bytes)

    def to_json(self) -> dict:
        return {"kind": self.kind, "alignment": self.alignment, "workspace_bytes": self.workspace_bytes,
                "arena_bytes": int(self.arena_bytes),
                "objects": [[int(o), int(b)] for o, b in zip(self.offsets, self.sizes)],
                "swaps": [[int(x) for x in c] for c in self.swaps]}

    @classmethod
    def from_json(cls, d: dict) -> "Arena":
        objs = d["objects"]
        return cls(int(d["arena_bytes"]), [int(o) for o, _ in objs], [int(b) for _, b in objs],
                   int(d.get("alignment", DEFAULT_ALIGNMENT)), int(d.get("workspace_bytes", 0)),
                   [tuple(int(x) for x in c) for c in d.get("swaps", [])])

    def renaming(self) -> dict:
        """object -> the object whose buffer plays it next iteration (the cycles in `swaps`; objects in no
        cycle back themselves and are left out)."""
        out = {}
        for c in self.swaps:
            for i, a in enumerate(c):
                out[a] = c[(i + 1) % len(c)]
        return out

    partner = renaming       # (the name from when every cycle was a ping-pong pair)


@dataclass
class Plan:
    graph_name: str
    graph_fingerprint: str
    planner: str
    mem_limit: int
    device: dict
    schedule: list[int]
    pool: "Pool | Arena"
    tensor_class: list[int]              # per tensor: its size class, -1 if it never lives on the device
    initial_residents: list[tuple[int, int]]
    actions: list[Action]
    predicted: dict = field(default_factory=dict)
    search: dict = field(default_factory=dict)
    verified: bool = False
    host_ops: list[int] = field(default_factory=list)   # ops run on the host (see the module docstring)
    # (op, out, in): the compute of op writes out into the object that holds in, which dies there (an
    # elementwise kernel run in place, DataflowGraph.inplace_pairs); in leaves the device with no drop action.
    # Absent from the JSON when empty, so plans without it read and hash as before.
    inplace: list = field(default_factory=list)

    def inplace_by_op(self) -> dict[int, dict[int, int]]:
        """op -> {out: in} of the pairs this plan runs in place."""
        out: dict[int, dict[int, int]] = {}
        for o, y, x in self.inplace:
            out.setdefault(int(o), {})[int(y)] = int(x)
        return out

    def __repr__(self) -> str:
        """One line (the actions, thousands of them, are in `actions` and the JSON)."""
        from .units import format_bytes, format_seconds

        p = self.predicted or {}
        moved = (p.get("swap_out_bytes") or 0) + (p.get("swap_in_bytes") or 0)
        t = p.get("time_s")
        return (f"<Plan {self.graph_name}: {self.planner} on {(self.device or {}).get('name', '?')}, "
                f"limit {format_bytes(self.mem_limit)}, {self.pool.kind} {format_bytes(self.pool.total_bytes())}, "
                f"{len(self.actions)} actions, {format_bytes(moved)} swapped, "
                f"{format_seconds(t) if t else '?'} predicted, {'verified' if self.verified else 'NOT verified'}>")

    # ---- stats derived from the actions ----
    def swap_stats(self, tensor_bytes: np.ndarray) -> dict:
        out = [a.tensor for a in self.actions if a.kind == ActionKind.SWAP_OUT]
        inn = [a.tensor for a in self.actions if a.kind == ActionKind.SWAP_IN]
        return {
            "swap_out_count": len(out), "swap_in_count": len(inn),
            "swap_out_bytes": int(tensor_bytes[out].sum()) if out else 0,
            "swap_in_bytes": int(tensor_bytes[inn].sum()) if inn else 0,
        }

    def recompute_stats(self, op_output_bytes: Sequence[int] | Mapping[int, int], op_time: Sequence[float]) -> dict:
        """Recompute totals: count, bytes written (all outputs of each recomputed op) and compute seconds.
        op_output_bytes[o] / op_time[o]: op o's output bytes and seconds."""
        ops = [a.op for a in self.actions if a.kind == ActionKind.RECOMPUTE]
        return {"recompute_count": len(ops), "recompute_bytes": int(sum(int(op_output_bytes[o]) for o in ops)),
                "recompute_s": float(sum(float(op_time[o]) for o in ops))}

    def next_object_map(self, updates: Mapping[int, int], op_outputs: Sequence[Sequence[int]]) -> list[int]:
        """backing[k] = this iteration's object whose buffer plays object k in the next iteration.

        updates: {new tensor: old tensor} (DataflowGraph.updates); op_outputs[o]: op o's output tensors.
        Each initial resident's object is backed by the object its (updated) value ends in; the other
        objects of each class take the class's remaining buffers in index order. In an arena every
        initial resident ends in its own object or the one that backs it (the verifier checks it), so the map
        follows the cycles in `pool.swaps` and is the identity elsewhere."""
        if self.pool.kind == "arena":
            backing = list(range(self.pool.num_objects))
            for k, j in self.pool.renaming().items():
                backing[k] = j
            return backing
        return class_backing(self.pool, self.initial_residents, self.actions, updates, op_outputs)

    def summary(self) -> dict:
        """What the plan promises, flat: the JSON of `tvm-swap plan --json` (scripts outside the tests read
        these keys). Read from `predicted` and `search`, so it is only as complete as those are."""
        p, s = self.predicted, self.search
        time_s = p.get("time_s")
        lb = p.get("lower_bound_s")
        return {
            "planner": self.planner,
            "pool": self.pool.kind,
            "graph": self.graph_name,
            "device": self.device.get("name"),
            "mem_limit_bytes": int(self.mem_limit),
            "peak_bytes": p.get("peak_bytes"),
            "pool_bytes": p.get("pool_bytes"),
            "ideal_time_s": p.get("ideal_time_s"),
            "lower_bound_s": lb,
            "predicted_time_s": time_s,           # what compile, run and SwapModule.stats() call it
            "time_s": time_s,                     # the same (kept: no run here, so no measured time either)
            "throughput_vs_ideal": p.get("throughput_vs_ideal"),
            "time_vs_lower_bound": (time_s / lb) if time_s and lb else None,
            # the bound that counts what the limit forces across the link (planner/tight_bound.py); None for a
            # plan that recomputes (it is no bound then) or a planner that does not compute it
            "tight_lower_bound_s": p.get("tight_lower_bound_s"),
            "time_vs_tight_bound": (time_s / p["tight_lower_bound_s"])
            if time_s and p.get("tight_lower_bound_s") else None,
            "swap_out_bytes": p.get("swap_out_bytes"),
            "swap_in_bytes": p.get("swap_in_bytes"),
            "swap_out_count": p.get("swap_out_count"),
            "swap_in_count": p.get("swap_in_count"),
            "recompute_count": p.get("recompute_count", 0),
            "recompute_bytes": p.get("recompute_bytes", 0),
            "recompute_s": p.get("recompute_s", 0.0),
            "recompute": s.get("recompute"),      # swapadvisor*: whether recompute was allowed (None: n/a)
            "host_ops": len(self.host_ops),       # ops run on the host (Plan.host_ops)
            "verified": bool(self.verified),
            "search_s": s.get("search_s"),
            "generations": s.get("generations"),
            "seed": s.get("seed"),
        }

    # ---- JSON ----
    def to_dict(self) -> dict:
        return {
            "format": PLAN_FORMAT, "version": HOST_OPS_VERSION if self.host_ops else PLAN_VERSION,
            "graph": {"name": self.graph_name, "fingerprint": self.graph_fingerprint},
            "planner": self.planner, "mem_limit": int(self.mem_limit), "device": self.device,
            "schedule": [int(x) for x in self.schedule],
            "pool": self.pool.to_json(),
            "tensor_class": [int(x) for x in self.tensor_class],
            "initial_residents": [[int(t), int(o)] for t, o in self.initial_residents],
            "actions": [a.to_json() for a in self.actions],
            "predicted": self.predicted, "search": self.search, "verified": bool(self.verified),
            **({"host_ops": [int(o) for o in self.host_ops]} if self.host_ops else {}),
            **({"inplace": [[int(o), int(y), int(x)] for o, y, x in self.inplace]} if self.inplace else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict) -> "Plan":
        check_versioned(d, PLAN_FORMAT, SUPPORTED_VERSIONS, "plan", PlanError, "; re-plan")
        try:
            return cls(
                graph_name=str(d["graph"]["name"]), graph_fingerprint=str(d["graph"]["fingerprint"]),
                planner=str(d["planner"]), mem_limit=int(d["mem_limit"]), device=dict(d["device"]),
                schedule=[int(x) for x in d["schedule"]], pool=Pool.from_json(d["pool"]),
                tensor_class=[int(x) for x in d["tensor_class"]],
                initial_residents=[(int(t), int(o)) for t, o in d["initial_residents"]],
                actions=[Action.from_json(a) for a in d["actions"]],
                predicted=dict(d.get("predicted", {})), search=dict(d.get("search", {})),
                verified=bool(d.get("verified", False)), host_ops=[int(o) for o in d.get("host_ops", [])],
                inplace=[(int(o), int(y), int(x)) for o, y, x in d.get("inplace", [])],
            )
        except PlanError:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise PlanError(f"malformed plan JSON: {type(e).__name__}: {e}") from None

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        return cls.from_dict(parse_json(text, "plan", PlanError))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> "Plan":
        return cls.from_dict(read_json(path, "plan file", PlanError))


def class_backing(pool: Pool, initial_residents, actions, updates: Mapping[int, int],
                  op_outputs: Sequence[Sequence[int]]) -> list[int]:
    """Plan.next_object_map of a size-class plan: each initial resident's object is backed by the object its
    (updated) value ends in; the other objects of each class take the class's remaining buffers in index order.
    A permutation within each class (also the renaming cycles of that plan laid out in an arena)."""
    from collections import defaultdict

    new_of = {old: new for new, old in updates.items()}
    where = dict(initial_residents)            # replay tenancy: tensor -> object at the end
    for a in actions:               # (an input run in place over stays in `where`: harmless, it is dead)
        if runs_kernel(a.kind):
            where.update(zip(op_outputs[a.op], a.out_objs))
        elif a.kind == ActionKind.SWAP_IN:
            where[a.tensor] = a.obj
        elif a.kind == ActionKind.DROP:
            where.pop(a.tensor, None)
    end_obj = {o: where[new_of.get(t, t)] for t, o in initial_residents}
    cls = pool.object_class()
    backing = [-1] * pool.num_objects
    taken = set(end_obj.values())
    spare = defaultdict(list)
    for k in range(pool.num_objects):
        if k not in taken:
            spare[int(cls[k])].append(k)
    for k in range(pool.num_objects):
        if k in end_obj:
            backing[k] = end_obj[k]
        else:
            backing[k] = spare[int(cls[k])].pop(0)
    return backing
