"""The byte breakdown of a plan as files of a report (`tvm-swap plan ... --report DIR`): NAME-breakdown.txt
(the table tvm_swap.planner.breakdown.format_breakdown prints) and NAME-breakdown.json (its numbers)."""
from __future__ import annotations

import json
from pathlib import Path

from .data import plan_op_times


def breakdown_of(graph, plan, op_time=None) -> dict:
    """plan_breakdown with the plan's own op times and device (the roofline of its device by default)."""
    from ..cost.devices import DeviceSpec
    from ..planner.breakdown import plan_breakdown

    return plan_breakdown(graph, plan, plan_op_times(graph, plan, op_time), DeviceSpec.from_dict(plan.device))


def write_breakdown(bd: dict, directory, plan) -> list[Path]:
    """Write `bd` (breakdown_of(graph, plan)) beside the plan's pictures; returns the paths."""
    from ..planner.breakdown import format_breakdown
    from .write import _stem

    stem = _stem(plan)

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    txt, js = directory / f"{stem}-breakdown.txt", directory / f"{stem}-breakdown.json"
    txt.write_text(format_breakdown(bd) + "\n")
    js.write_text(json.dumps(bd, indent=1))
    return [txt, js]
