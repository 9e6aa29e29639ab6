"""A tensor run over in place whose host copy later feeds a rebuild: the swap-in that brings the copy back must
not be issued before the in-place op ends the tensor's stay (found on a BERT-base-sized training step with its
MLM head in 8 row chunks at 30%: the arena plan swapped the copy into a second object while the first still held
it, and the verifier refused the plan)."""
from pathlib import Path

import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.cost.roofline import roofline_times
from tvm_swap.graph.dataflow import DataflowGraph
from tvm_swap.planner.api import plan_graph

GRAPH = Path(__file__).resolve().parents[2] / "data" / "graphs" / "bert12_head_x8_inplace_rebuild.graph.json"


@pytest.mark.slow
def test_an_in_place_input_read_again_by_a_rebuild_plans_verified():
    g = DataflowGraph.load(GRAPH)
    spec = get_device("h100")
    # (fails on 16d276f with VerificationError: "swaps tensor ... into object 487, but it is already resident")
    plan = plan_graph(g, 261872716, device=spec, op_time=roofline_times(g, spec), planner="swapadvisor",
                      generations=3, seed=0, workers=1, pool="arena")
    assert plan.verified
