"""Reports colour recomputed kernels on the compute stream apart from the first runs."""
import numpy as np

from recompute_plans import rc_plan  # noqa: E402
from tvm_swap.cost.devices import get_device
from tvm_swap.report.data import RECOMPUTE_COLOR, build_report_data
from tvm_swap.report.html import gantt_svg


def test_recomputed_kernels_are_their_own_bars_and_colour():
    g, plan = rc_plan()
    plan.device = get_device("v100-16gb").to_dict()
    data = build_report_data(g, plan, op_time=np.array([1e-3, 2e-3, 4e-3]))
    bars = data.bars["compute"]
    assert bars.kinds == ["compute", "compute", "recompute", "compute"]
    assert bars.labels[2].startswith("recompute f")
    svg, _ = gantt_svg(data)
    assert svg.count(f'fill="{RECOMPUTE_COLOR}"') == 1
