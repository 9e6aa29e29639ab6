"""The verifier's rules for ops a plan places on the host (`Plan.host_ops`), beside tvm_swap/verify.py.

- host_ops name distinct ops of the graph; their compute actions name no output objects (the outputs live in
  host memory) and no host op is recomputed (recompute rebuilds device tensors);
- a host op reads only values whose host copy is current and complete before it starts: an input; a param or
  optimizer state, unless it stays on the device between iterations while its update is never copied out (its
  host copy is stale) and no swap_out of it this iteration completes before the op; a produced tensor that a
  completed swap_out copied, or that an earlier host op wrote;
- its outputs are then host copies: a swap_in may bring one in only after the host op has completed (checked
  with the swap_in rule in verify.py), so a device op never reads it before it arrives.
"""
from __future__ import annotations


def check_host_structure(graph, plan, report) -> bool:
    """host_ops valid, host computes without output objects, no recompute of a host op."""
    ops = list(plan.host_ops or ())
    if not ops:
        return True
    bad = [o for o in ops if not (isinstance(o, int) and 0 <= o < graph.num_ops)]
    if bad:
        report.add(f"host_ops names op {bad[0]!r}, which is not in the graph")
        return False
    if len(set(ops)) != len(ops):
        report.add("host_ops names an op twice")
    host = set(ops)
    ok = True
    for i, a in enumerate(plan.actions):
        if a.kind == "compute" and a.op in host and a.out_objs:
            report.add(f"action {i} computes op {graph.ops[a.op].name!r} on the host but names output objects "
                       f"{list(a.out_objs)}: a host op writes host memory; give it no output objects")
            ok = False
        elif a.kind == "recompute" and a.op in host:
            report.add(f"action {i} recomputes op {graph.ops[a.op].name!r}, which the plan places on the host: "
                       f"only device ops are recomputed")
    return ok


def host_compute(rep, i: int, op: int, stale_at_start: set, producer) -> None:
    """Replay action i, op `op` run on the host (rep: verify._Replay)."""
    g, r = rep.g, rep.r
    name = g.ops[op].name
    for t in dict.fromkeys(g.ops[op].inputs):
        if producer[t] >= 0:
            made = [x for x in rep.swap_outs.get(t, []) + ([rep.host_made[t]] if t in rep.host_made else [])]
            if not any(rep.hb(x, i) for x in made):
                r.add(f"action {i} (host op {name!r}) reads tensor {rep.name(t)}, which has no host copy before it: "
                      + ("its swap-outs and host writes do not complete before it; make the op wait for one"
                         if made else "copy it out (swap_out) first and make the op wait for that"))
        elif t in stale_at_start and not any(rep.hb(x, i) for x in rep.swap_outs.get(t, [])):
            r.add(f"action {i} (host op {name!r}) reads the host copy of {rep.name(t)}, which is stale: it stays on "
                  f"the device between iterations and its update is never copied out; swap it out first (and wait "
                  f"for that), or keep it on the host")
    for t in g.ops[op].outputs:
        rep.host_made[t] = i
