"""A plan's device memory as a PyTorch memory snapshot, the pickle that PyTorch's memory visualiser opens
(pytorch.org/memory_viz: "Active Memory Timeline" and "Allocator State History").

    tvm-swap report plan.json -o plan.pickle

The snapshot has the fields `torch.cuda.memory._snapshot()` writes and `torch.cuda._memory_viz` reads:
`segments` (the state at the end of the iteration: the pool's one region, and the kernels' workspace, each a
segment whose blocks tile it) and `device_traces` (device 0's events in time order: `alloc` when a tensor
arrives in its pool object, `free_requested` + `free_completed` when the plan drops it). Addresses are a made-up
base plus the object's offset in the region (the arena's offsets, or the size classes' objects back to back),
so the visualiser places every stay where the plan puts it. Sizes are the pool object's bytes (what the plan
reserves), `requested_size` the tensor's own. Each event's frame names the op that made the tensor (or
`swap_in`, or `resident at start`) with the tensor as its file, and its category is the tensor kind
("workspace" for the kernels' workspace). Tensors on the device when the iteration starts, and the workspace,
are allocated at time 0. No TVM, no torch.
"""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from ..plan import ActionKind
from .timed import TimedPlan

BASE_ADDRESS = 0x7F0000000000        # where the region "starts"; the plan knows offsets, not pointers
SEGMENT_ALIGN = 2 << 20              # the workspace segment starts on the next 2 MiB after the region


def _frames(graph, plan, tensor: int, action: int) -> list[dict]:
    t = graph.tensors[tensor]
    if action < 0:
        name = "resident at start"
    elif plan.actions[action].kind == ActionKind.COMPUTE:
        name = graph.ops[plan.actions[action].op].name
    else:
        name = "swap_in"
    return [{"filename": f"{t.name} ({t.kind})", "line": max(action, 0), "name": name}]


def _event(action: str, addr: int, size: int, seconds: float, frames: list, category: str) -> dict:
    return {"action": action, "addr": int(addr), "size": int(size), "stream": 0,
            "time_us": int(round(float(seconds) * 1e6)), "frames": frames, "category": category}


def _blocks(live: list[tuple[int, int, int, list]], total: int) -> list[dict]:
    """Blocks that tile [0, total): (offset, size, requested, frames) live ones, inactive gaps between."""
    out, at = [], 0
    for off, size, req, frames in sorted(live):
        if off > at:
            out.append({"address": None, "size": off - at, "requested_size": 0, "state": "inactive"})
        out.append({"address": None, "size": size, "requested_size": req, "state": "active_allocated",
                    "frames": frames})
        at = off + size
    if at < total:
        out.append({"address": None, "size": total - at, "requested_size": 0, "state": "inactive"})
    return out


def _segment(address: int, blocks: list[dict]) -> dict:
    at = address
    for b in blocks:
        b["address"] = at
        at += b["size"]
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    return {"device": 0, "address": address, "total_size": at - address, "allocated_size": active,
            "active_size": active, "requested_size": sum(b["requested_size"] for b in blocks),
            "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
            "frames": [], "blocks": blocks}


def _consistent(keyed: list[tuple]) -> list[dict]:
    """Events in time order with no address allocated twice: where measured times put an arrival before the
    drop of the tenant it waited for (a drop's time is inferred, see report.timed), that tenant is freed first.
    keyed: (seconds, action, order, stay id, event)."""
    live: dict[int, tuple] = {}        # addr -> (stay id, its alloc event)
    closed: set[int] = set()
    out = []
    for *_, stay, e in sorted(keyed, key=lambda k: k[:3]):
        if e["action"] == "alloc":
            old = live.get(e["addr"])
            if old is not None:
                closed.add(old[0])
                out += [{**old[1], "action": a, "time_us": e["time_us"]} for a in ("free_requested", "free_completed")]
            live[e["addr"]] = (stay, e)
            out.append(e)
        elif stay not in closed:
            if e["action"] == "free_completed":
                live.pop(e["addr"], None)
            out.append(e)
    return out


def memory_snapshot(timed: TimedPlan) -> dict:
    """The snapshot dict of `timed` (see the module docstring)."""
    from ..planner.timeline import tenancies

    graph, plan = timed.graph, timed.plan
    off = plan.pool.object_offset()
    size = plan.pool.object_bytes()
    tb = graph.tensor_bytes()
    keyed = []        # (seconds, action, order, stay, event): at one instant in action order, a drop first
    live_at_end = []
    for stay, (tensor, obj, b_s, e_s, b_act, e_act) in enumerate(tenancies(graph, plan, timed)):
        addr = BASE_ADDRESS + int(off[obj])
        frames = _frames(graph, plan, tensor, b_act)
        kind = graph.tensors[tensor].kind
        keyed.append((b_s, b_act, 1, stay, _event("alloc", addr, size[obj], b_s, frames, kind)))
        if np.isfinite(e_s):
            keyed.append((e_s, e_act, 0, stay, _event("free_requested", addr, size[obj], e_s, frames, kind)))
            keyed.append((e_s, e_act, 0.5, stay, _event("free_completed", addr, size[obj], e_s, frames, kind)))
        else:
            live_at_end.append((int(off[obj]), int(size[obj]), int(tb[tensor]), frames))
    trace = _consistent(keyed)
    region = int(plan.pool.region_bytes)
    segments = [_segment(BASE_ADDRESS, _blocks(live_at_end, region))]
    ws = int(plan.pool.workspace_bytes)
    if ws:     # reserved all iteration: allocated at time 0 (so it has its kind's colour), never freed
        ws_at = BASE_ADDRESS + (region + SEGMENT_ALIGN - 1) // SEGMENT_ALIGN * SEGMENT_ALIGN
        frames = [{"filename": "kernel workspace", "line": 0, "name": "reserved for the whole iteration"}]
        segments.append(_segment(ws_at, _blocks([(0, ws, ws, frames)], ws)))
        trace.insert(0, _event("alloc", ws_at, ws, 0.0, frames, "workspace"))
    # MemoryViz.js colours by category and then appends "unknown" to the list through a misspelt name
    # (`snapshot.categores`), which throws unless "unknown" is already a category: one marker event names it.
    trace.append({"action": "snapshot", "addr": 0, "size": 0, "stream": 0,
                  "time_us": int(round(timed.time_s * 1e6)), "frames": [], "category": "unknown"})
    return {"segments": segments, "device_traces": [trace],
            "allocator_settings": {}, "tvm_swap": {"source": timed.source, "graph": plan.graph_name,
                                                   "planner": plan.planner, "pool": plan.pool.kind,
                                                   "mem_limit_bytes": int(plan.mem_limit)}}


def write_memory_snapshot(timed: TimedPlan, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(memory_snapshot(timed), f, protocol=4)
    return path


__all__ = ["memory_snapshot", "write_memory_snapshot", "BASE_ADDRESS"]
