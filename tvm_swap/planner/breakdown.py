"""Where a plan's link bytes go: bytes moved each way by tensor role, next to the bytes no plan can avoid.

Roles (from the graph alone, never from names): a persistent tensor and its update share a role:
  weights          params that the forward or backward kernels read (bf16 copies in mixed precision);
  master weights   params only optimizer updates read (fp32 master copies);
  optimizer state  `optimizer_state` tensors (Adam moments, the step counter);
  gradients        produced tensors that an optimizer update reads (weight gradients);
  activations      every other produced tensor (activations and the backward's activation gradients);
  other            inputs and graph outputs.
An "optimizer update" is an op that writes an update of a persistent tensor (DataflowGraph.updates).

Beside the totals it names the copies that are avoidable by construction, since a tensor is written once:
  out, host already holds it: a second swap_out of one tensor, or a swap_out of a persistent value whose host
      copy is current (not updated, or not kept on the device across iterations);
  in, again: a swap_in of a tensor after its first one (it was evicted and fetched back).
And "out, start value": persistent values the step started with (kept on the device since the last step)
copied out before their update; each such byte comes back in before the update reads it.
No TVM here (the planner's rule): the breakdown reads a Plan, its graph and the simulator.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from ..graph import DataflowGraph
from .host_split import host_eligible, update_ops

ROLES = ("weights", "master weights", "optimizer state", "gradients", "activations", "other")


def tensor_roles(graph: DataflowGraph) -> list[str]:
    """The role (ROLES) of every tensor; see the module docstring."""
    upd = update_ops(graph)
    cons = graph.consumers()
    prod = graph.producer()
    read_by_update = {t for o in upd for t in graph.ops[o].inputs}
    roles = []
    for t, info in enumerate(graph.tensors):
        base = graph.updates.get(t, t)
        kind = graph.tensors[base].kind
        if graph.is_persistent(base):
            if kind == "optimizer_state":
                roles.append("optimizer state")
            elif any(o not in upd for o in cons[base]):
                roles.append("weights")
            else:
                roles.append("master weights")
        elif prod[t] < 0 or t in set(graph.outputs):
            roles.append("other")
        elif t in read_by_update:
            roles.append("gradients")
        else:
            roles.append("activations")
    return roles


def _avoidable(graph: DataflowGraph, plan) -> tuple[np.ndarray, np.ndarray]:
    """Per action: (swap_out of a value the host already holds, repeated swap_in)."""
    kept = {t for t, _ in plan.initial_residents}
    updated = set(graph.updates.values())
    n = len(plan.actions)
    out_dup = np.zeros(n, dtype=bool)
    in_again = np.zeros(n, dtype=bool)
    outs: Counter = Counter()
    ins: Counter = Counter()
    for i, a in enumerate(plan.actions):
        if a.kind == "swap_out":
            host_current = graph.is_persistent(a.tensor) and not (a.tensor in updated and a.tensor in kept)
            out_dup[i] = outs[a.tensor] > 0 or host_current
            outs[a.tensor] += 1
        elif a.kind == "swap_in":
            in_again[i] = ins[a.tensor] > 0
            ins[a.tensor] += 1
    return out_dup, in_again


def plan_breakdown(graph: DataflowGraph, plan, op_time, device, bound: dict | None = None) -> dict:
    """Bytes each way per role, the avoidable copies, the bound's must-move bytes and the busy seconds.

    bound: `tight_lower_bound_detail` of the same graph, op times, device and limit (computed when None)."""
    from .host_sim import simulate_plan

    nbytes = graph.tensor_bytes()
    roles = tensor_roles(graph)
    out_dup, in_again = _avoidable(graph, plan)
    rows = {r: {"in_bytes": 0, "out_bytes": 0, "in_count": 0, "out_count": 0, "out_host_has_bytes": 0,
                "in_again_bytes": 0, "out_start_value_bytes": 0} for r in ROLES}
    for i, a in enumerate(plan.actions):
        if a.kind not in ("swap_in", "swap_out"):
            continue
        row = rows[roles[a.tensor]]
        b = int(nbytes[a.tensor])
        if a.kind == "swap_in":
            row["in_bytes"] += b
            row["in_count"] += 1
            row["in_again_bytes"] += b if in_again[i] else 0
        else:
            row["out_bytes"] += b
            row["out_count"] += 1
            row["out_host_has_bytes"] += b if out_dup[i] else 0
            # a persistent value from the start of the step (kept on the device since the last one), not an update
            row["out_start_value_bytes"] += b if graph.is_persistent(a.tensor) else 0
    if bound is None:
        bound = _bound(graph, plan, op_time, device)
    sim = simulate_plan(graph, plan, op_time, device)      # host ops, if any, on the host's stream
    return {
        "graph": graph.name, "planner": plan.planner, "mem_limit_bytes": int(plan.mem_limit),
        "roles": rows,
        "in_bytes": sum(r["in_bytes"] for r in rows.values()),
        "out_bytes": sum(r["out_bytes"] for r in rows.values()),
        "bound": {k: float(bound[k]) for k in ("tight_in_bytes", "tight_out_bytes", "inputs_in", "persistent_in",
                                               "updates_out", "outputs_out", "activation_bytes",
                                               "joint_param_activation_in", "tight_lower_bound_s")
                  if k in bound},
        "time_s": float(sim.time_s),
        "busy_s": {"host": 0.0, **{k: float(v) for k, v in sim.stream_busy_s.items()}},
        "updated_state_bytes": int(sum(nbytes[t] for t in graph.updates)),
    }


def _bound(graph, plan, op_time, device) -> dict:
    """The tight bound's detail; for a plan with host ops the host-aware bound's, in the same keys."""
    from .tight_bound import tight_lower_bound_detail

    if not plan.host_ops:
        return tight_lower_bound_detail(graph, op_time, device, plan.mem_limit, plan.pool.alignment)
    from ..cost.devices import get_host
    from ..cost.host import host_times
    from .host_bound import host_lower_bound_detail
    hb = host_lower_bound_detail(graph, op_time, host_times(graph, get_host(device)), device, plan.mem_limit,
                                 set(host_eligible(graph)) | set(plan.host_ops), plan.pool.alignment)
    return {**hb, "tight_in_bytes": hb["in_bytes"], "tight_out_bytes": hb["out_bytes"], "activation_bytes": 0.0,
            "joint_param_activation_in": 0.0, "tight_lower_bound_s": hb["host_lower_bound_s"]}


def format_breakdown(bd: dict) -> str:
    """The breakdown as a text table (GB and seconds)."""
    gb = lambda b: f"{b / 1e9:8.2f}"    # noqa: E731
    lines = [f"{bd['graph']} at {bd['mem_limit_bytes'] / 1e9:.0f} GB, {bd['planner']}: "
             f"{bd['time_s']:.3f} s predicted",
             f"{'role':<16} {'in GB':>8} {'in again':>8} {'out GB':>8} {'out, start value':>16} "
             f"{'out, host has':>13}"]
    for role, r in bd["roles"].items():
        lines.append(f"{role:<16} {gb(r['in_bytes'])} {gb(r['in_again_bytes'])} {gb(r['out_bytes'])} "
                     f"{gb(r['out_start_value_bytes']):>16} {gb(r['out_host_has_bytes']):>13}")
    lines.append(f"{'total':<16} {gb(bd['in_bytes'])} {'':>8} {gb(bd['out_bytes'])}")
    b = bd["bound"]
    if "tight_in_bytes" in b:
        lines.append(f"{'bound must move':<16} {gb(b['tight_in_bytes'])} {'':>8} {gb(b['tight_out_bytes'])}")
        lines.append(f"  bound in = inputs {b['inputs_in'] / 1e9:.2f} + max(state {b['persistent_in'] / 1e9:.2f} + "
                     f"activations {b['activation_bytes'] / 1e9:.2f}, state and activations jointly "
                     f"{b.get('joint_param_activation_in', 0.0) / 1e9:.2f}); out = updates "
                     f"{b['updates_out'] / 1e9:.2f} + outputs {b['outputs_out'] / 1e9:.2f} + activations "
                     f"{b['activation_bytes'] / 1e9:.2f} GB")
    busy = bd["busy_s"]
    lines.append("busy s: " + ", ".join(f"{k} {v:.3f}" for k, v in busy.items())
                 + (f"; tight bound {b['tight_lower_bound_s']:.3f} s" if "tight_lower_bound_s" in b else ""))
    return "\n".join(lines)
