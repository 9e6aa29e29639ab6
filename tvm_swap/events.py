"""What a plan's deps mean as stream events: the contract between the program relay_passes.apply writes and
the executor runtime_ext runs it with.

A plan's actions run on streams (tvm_swap.plan.STREAM_OF: compute, d2h, h2d; drops have none). An action
waits on the events of its deps on OTHER streams (same-stream order is FIFO already). A drop does no work,
so a dep on a drop means a dep on the drop's own deps (expanded), except in poison mode, where drops are
real work on the aux stream (they overwrite the object) and are waited on themselves. The compute of an op
the plan places on the host (Plan.host_ops) is on the "host" stream: it waits on its deps' events on every
other stream, the compute stream's included (a device kernel is not done when the host thread that issued it
goes on), and records one for the actions that wait on it. Only actions another stream waits on record an event; the program calls the runtime around a kernel exactly where
`call_sites` says.
"""
from __future__ import annotations

from .plan import STREAM_OF, Plan, runs_kernel

HOST_STREAM = "host"     # the compute actions of the ops a plan places on the host


def event_graph(plan: Plan, poison: bool = False) -> tuple[list, list]:
    """(stream of each action, the actions each one waits on across streams) — the backend's events.

    Same-stream deps are dropped (streams are FIFO). Without poisoning a drop has no stream and does no work,
    so a dep on it is a dep on its own deps (expanded); with poisoning it is work on the aux stream.
    """
    acts = plan.actions
    host = set(plan.host_ops or ())
    stream = [HOST_STREAM if a.kind == "compute" and a.op in host else STREAM_OF[a.kind] or ("aux" if poison else None)
              for a in acts]
    expanded: dict[int, tuple] = {}

    def expand(d):
        if stream[d] is not None:
            return (d,)
        if d not in expanded:
            expanded[d] = tuple(x for dd in acts[d].deps for x in expand(dd))
        return expanded[d]

    waits = []
    for i, a in enumerate(acts):
        if stream[i] is None:
            waits.append(())
            continue
        waits.append(tuple(sorted({e for d in a.deps for e in expand(d) if stream[e] != stream[i]})))
    return stream, waits


def call_sites(plan: Plan, poison: bool = False) -> tuple[list[bool], list[bool]]:
    """Where the program must call the runtime around kernels: needs_wait[i] (compute i waits on another
    stream) and needs_record[i] (another stream waits on compute i). relay_passes.apply emits
    `tvm_swap.wait(i)` / `tvm_swap.record(i)` exactly there; a program built for poisoning (drops are work)
    has a superset of the call sites of one built without."""
    _, waits = event_graph(plan, poison)
    n = len(plan.actions)
    needs_wait = [False] * n
    needs_record = [False] * n
    for i, a in enumerate(plan.actions):
        if runs_kernel(a.kind) and waits[i]:
            needs_wait[i] = True
        for e in waits[i]:
            if runs_kernel(plan.actions[e].kind):
                needs_record[e] = True
    return needs_wait, needs_record
