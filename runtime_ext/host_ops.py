"""Ops a plan runs on the host (Plan.host_ops): what the executor knows of them and checks at load.

The program runs each one where relay_passes/host_ops.py put it: `host_begin(i)` waits, on the host, for
the events of the action's deps (the copies out it reads; CUDA: cudaEventSynchronize), `host_tensor(i, t)`
hands the kernel host memory (the host copy of an input, the host buffer of an output), the kernel runs on
the program's thread, and `host_end(i)` records the action's event for the copies in that wait on it.
While it runs, the thread issues nothing else: the device keeps running what was issued before it, and every
action after it waits (the simulator's host stream models that, planner/host_sim.issue_gates; the planners put
the host ops after every device action, host_split.lift_plan, where that delays nothing).
Its outputs are then host copies like a swap_out's: a swap_in may bring one to the device, an update written
there is renamed into its param's host copy at the end of the call, a result is read from there.
"""
from __future__ import annotations

from tvm_swap.errors import PlanError


def host_op_inputs(plan, manifest) -> dict[int, list[int]]:
    """op -> the tensors it reads, for the plan's host ops; the library must have been built for exactly them."""
    meta = manifest.meta.get("host_op_inputs") or {}
    built = {int(o): [int(t) for t in ins] for o, ins in meta.items()}
    wanted = {int(o) for o in plan.host_ops or ()}
    if set(built) != wanted:
        raise PlanError(f"the plan runs ops {sorted(wanted)} on the host but the program was built to run "
                        f"{sorted(built)} there; the library is corrupt: rebuild it")
    return built


def replay_host_op(i: int, op: int, inputs: list, outputs: list, *, has_host_copy, first_host_use: dict,
                   written: list, name) -> None:
    """Load-time replay of action i, host op `op`: each tensor it reads has a host copy by then
    (`has_host_copy(t)`: an input, a param, or a tensor copied out / written on the host before); a param it
    reads before any copy out of it is read from the host copy loaded with the params (`first_host_use`); its
    outputs join `written` (the tensors with a host buffer written this call)."""
    for t in inputs:
        if not has_host_copy(t):
            raise PlanError(f"action {i} runs op {op} on the host, reading {name(t)}, which has no host copy yet "
                            f"(not an input or param, not copied out or written on the host before); the plan "
                            f"is corrupt")
        first_host_use.setdefault(t, "in")
    written.extend(outputs)
