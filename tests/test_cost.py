"""tvm_swap.cost.roofline: the roofline model (no TVM)."""
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_swap.cost.roofline import op_bytes, roofline_times
from tvm_swap.cost.devices import get_device
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo


def _one_op_graph(flops, in_bytes, out_bytes, workspace=0):
    tensors = [TensorInfo(0, "x", in_bytes, (in_bytes,), "uint8", "input"),
               TensorInfo(1, "y", out_bytes, (out_bytes,), "uint8", "output")]
    return DataflowGraph("g", tensors, [OpInfo(0, "k", "k", (0,), (1,), float(flops), workspace)], outputs=[1])


def test_cost_module_does_not_import_tvm():
    code = "import sys, tvm_swap.cost.roofline; assert not any(m == 'tvm' or m.startswith('tvm.') for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_roofline_compute_and_memory_bound_cases():
    dev = get_device("v100-16gb")
    g = _one_op_graph(flops=1e12, in_bytes=8, out_bytes=8)
    assert roofline_times(g, dev)[0] == pytest.approx(1e12 / (dev.peak_flops * dev.compute_efficiency)
                                                      + dev.launch_overhead_s)
    g = _one_op_graph(flops=0, in_bytes=10**9, out_bytes=10**9, workspace=5)
    assert op_bytes(g)[0] == 2 * 10**9 + 10
    assert roofline_times(g, "v100-16gb")[0] == pytest.approx((2e9 + 10) / dev.mem_bandwidth + dev.launch_overhead_s)


def _typed_op_graph(flops, dtype):
    tensors = [TensorInfo(0, "x", 8, (4,), dtype, "input"), TensorInfo(1, "y", 8, (4,), dtype, "output")]
    return DataflowGraph("g", tensors, [OpInfo(0, "k", "k", (0,), (1,), float(flops))], outputs=[1])


@pytest.mark.parametrize("name", ["h100", "h200"])
def test_roofline_uses_tensor_cores_for_bf16_ops_only(name):
    dev = get_device(name)
    assert dev.tensor_flops > 10 * dev.peak_flops
    for dtype, peak in [("bfloat16", dev.tensor_flops), ("float16", dev.tensor_flops), ("float32", dev.peak_flops)]:
        want = 1e12 / (peak * dev.compute_efficiency) + dev.launch_overhead_s
        assert roofline_times(_typed_op_graph(1e12, dtype), dev)[0] == pytest.approx(want), dtype
    v100 = get_device("v100-16gb")          # no tensor_flops given: bf16 runs at the fp32 peak
    assert roofline_times(_typed_op_graph(1e12, "bfloat16"), v100)[0] == \
        roofline_times(_typed_op_graph(1e12, "float32"), v100)[0]


def test_hopper_specs_have_pcie5_links():
    for name, mem in [("h100", 80e9), ("h200", 141e9)]:
        dev = get_device(name)
        assert dev.memory_bytes == mem
        assert 40e9 <= dev.h2d_bandwidth == dev.d2h_bandwidth <= 64e9       # PCIe 5.0 x16: 63 GB/s nominal
        assert dev.h2d_bandwidth < dev.duplex_bandwidth <= 2 * dev.h2d_bandwidth
        assert get_device(dev.to_dict()["name"]) == type(dev).from_dict(dev.to_dict())


def test_roofline_counts_a_tensor_read_twice_once():
    tensors = [TensorInfo(0, "x", 100, (100,), "uint8", "input"), TensorInfo(1, "y", 10, (10,), "uint8", "output")]
    g = DataflowGraph("g", tensors, [OpInfo(0, "k", "k", (0, 0), (1,), 0.0)], outputs=[1])
    assert op_bytes(g)[0] == 110


@settings(max_examples=50, deadline=None)
@given(st.floats(0, 1e13), st.floats(0, 1e13), st.integers(0, 10**10), st.integers(0, 10**10),
       st.sampled_from(["v100-16gb", "h200", "cpu"]))
def test_roofline_is_monotone_in_flops_and_bytes(f1, f2, b1, b2, device):
    lo_f, hi_f = sorted((f1, f2))
    lo_b, hi_b = sorted((b1, b2))
    t = lambda f, b: roofline_times(_one_op_graph(f, b, 1), device)[0]  # noqa: E731
    assert t(lo_f, lo_b) <= t(hi_f, lo_b) and t(lo_f, lo_b) <= t(lo_f, hi_b)
    assert t(lo_f, lo_b) >= get_device(device).launch_overhead_s
