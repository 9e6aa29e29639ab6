"""Exports for other people's viewers: Chrome trace events (tvm_swap.report.trace) checked against the format's
required fields per event and per track, and PyTorch memory snapshots (tvm_swap.report.snapshot) read by torch's
own torch.cuda._memory_viz; the measured timeline of a traced call (tvm_swap.report.timed)."""
from __future__ import annotations

import base64
import copy
import json
import pickle
import re

import numpy as np
import pytest

from tvm_swap import testing
from tvm_swap.planner.api import plan_graph
from tvm_swap.planner.timeline import memory_timeline, tenancies
from tvm_swap.plan import STREAM_OF, ActionKind
from tvm_swap.report.snapshot import BASE_ADDRESS, memory_snapshot
from tvm_swap.report.timed import measured_timing, predicted_timing
from tvm_swap.report.trace import MEMORY_COUNTER, POOL_COUNTER, STREAM_NAMES, STREAM_TIDS, chrome_trace
from tvm_swap.report.write import write_report_file


def _plan(pool: str, seed: int = 3):
    g = testing.random_training_graph(seed, n_layers=6, momentum=True)
    op_time = testing.random_op_times(g, seed=seed)
    free = g.tensor_bytes().sum()
    plan = plan_graph(g, int(free * 0.35), device="v100-16gb", op_time=op_time, planner="swapadvisor",
                      generations=1, workers=1, seed=seed, pool=pool)
    return g, plan, op_time


@pytest.fixture(scope="module", params=["arena", "size-classes"])
def planned(request):
    return _plan(request.param)


def check_trace_format(doc: dict) -> None:
    """The trace event format's required fields (JSON object form), per event and per track."""
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    named_threads, named_procs, used = set(), set(), set()
    for e in doc["traceEvents"]:
        for key in ("name", "ph", "pid", "tid"):
            assert key in e, (key, e)
        assert isinstance(e["name"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index")
            assert isinstance(e["args"], dict)
            if e["name"] == "thread_name":
                named_threads.add((e["pid"], e["tid"]))
                assert e["args"]["name"]
            if e["name"] == "process_name":
                named_procs.add(e["pid"])
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            used.add((e["pid"], e["tid"]))
        elif e["ph"] == "C":
            assert isinstance(e["args"], dict) and e["args"]
            assert all(isinstance(v, (int, float)) for v in e["args"].values())
        else:
            raise AssertionError(f"unexpected phase {e['ph']!r}")
    assert used <= named_threads, "every track with slices has a thread_name"
    assert {p for p, _ in used} <= named_procs
    json.dumps(doc)    # plain JSON all the way down


def test_trace_has_one_named_track_per_stream_and_the_plans_slices(planned):
    g, plan, op_time = planned
    timed = predicted_timing(g, plan, op_time)
    doc = chrome_trace(timed)
    check_trace_format(doc)
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert names == {STREAM_TIDS[s]: STREAM_NAMES[s] for s in STREAM_TIDS}
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    expect = [i for i, a in enumerate(plan.actions) if STREAM_OF[a.kind] is not None]
    assert [e["args"]["action"] for e in slices] == expect
    assert any(a.kind == ActionKind.SWAP_OUT for a in plan.actions), "the limit forces swaps"
    for e in slices:
        a = plan.actions[e["args"]["action"]]
        assert e["tid"] == STREAM_TIDS[STREAM_OF[a.kind]]
        want = g.ops[a.op].name if a.kind == ActionKind.COMPUTE else g.tensors[a.tensor].name
        assert e["name"] == want
        i = e["args"]["action"]
        assert e["ts"] == pytest.approx(timed.start[i] * 1e6, abs=1e-3)
        assert e["dur"] == pytest.approx((timed.end[i] - timed.start[i]) * 1e6, abs=1e-3)


def test_trace_counters_add_up_to_the_memory_timeline(planned):
    g, plan, op_time = planned
    timed = predicted_timing(g, plan, op_time)
    doc = chrome_trace(timed)
    tl = memory_timeline(g, plan, timed)
    ws = plan.pool.workspace_bytes
    kinds = [e for e in doc["traceEvents"] if e["name"] == MEMORY_COUNTER]
    pool = [e for e in doc["traceEvents"] if e["name"] == POOL_COUNTER]
    assert max(sum(e["args"].values()) for e in kinds) == int(tl["tensor_bytes"].max()) + ws
    assert max(e["args"]["occupied"] for e in pool) == tl["peak_bytes"] + ws <= plan.mem_limit
    assert all(e["args"]["limit"] == plan.mem_limit for e in pool)
    assert [e["ts"] for e in kinds] == sorted(e["ts"] for e in kinds)


def _replay(trace: list[dict]):
    """(peak bytes live, live address set at the end), failing on an address allocated twice."""
    live, now, peak = {}, 0, 0
    for e in trace:
        if e["action"] == "alloc":
            assert e["addr"] not in live, f"address {e['addr']:#x} allocated while live"
            live[e["addr"]] = e["size"]
            now += e["size"]
            peak = max(peak, now)
        elif e["action"] == "free_completed":
            now -= live.pop(e["addr"])
    return peak, live


def test_snapshot_events_are_the_plans_stays_at_its_addresses(planned):
    g, plan, op_time = planned
    plan = copy.deepcopy(plan)
    plan.pool.workspace_bytes = ws = 64 << 10     # as if a kernel needed a workspace: its own segment
    timed = predicted_timing(g, plan, op_time)
    snap = memory_snapshot(timed)
    trace = snap["device_traces"][0]
    stays = tenancies(g, plan, timed)
    allocs = [e for e in trace if e["action"] == "alloc" and e["category"] != "workspace"]
    assert len(allocs) == len(stays)
    offsets = set((BASE_ADDRESS + plan.pool.object_offset()).tolist())
    assert {e["addr"] for e in allocs} <= offsets
    assert {e["category"] for e in allocs} <= {t.kind for t in g.tensors}
    assert [e["size"] for e in trace if e.get("category") == "workspace"] == [ws]
    peak, live = _replay(trace)
    assert peak == memory_timeline(g, plan, timed)["peak_bytes"] + ws
    # the segments are the state at the end: their active blocks are the stays still open (and the workspace),
    # and tile the region
    seg, ws_seg = snap["segments"]
    assert seg["total_size"] == plan.pool.region_bytes == sum(b["size"] for b in seg["blocks"])
    active = {b["address"]: b["size"] for s in (seg, ws_seg) for b in s["blocks"] if b["state"] == "active_allocated"}
    assert active == live
    assert [e["time_us"] for e in trace] == sorted(e["time_us"] for e in trace)
    ops = {o.name for o in g.ops}
    assert any(e["frames"][0]["name"] in ops for e in allocs)


def test_snapshot_goes_through_torchs_memory_viz(planned, tmp_path):
    mv = pytest.importorskip("torch.cuda._memory_viz")
    g, plan, op_time = planned
    path = write_report_file(g, plan, tmp_path / "plan.pickle", op_time=op_time)
    snap = pickle.loads(path.read_bytes())
    html = mv.trace_plot(snap)            # the Active Memory Timeline page
    payload = json.loads(re.search(r"const local_files = (\[.*?\])\n", html).group(1))[0]["base64"]
    back = pickle.loads(base64.b64decode(payload))
    assert back["device_traces"] == snap["device_traces"]
    names = {f["filename"] for e in back["device_traces"][0] for f in e["frames"]}
    assert any(t.name in n for t in g.tensors for n in names)
    text = mv.trace(snap)                 # the allocator's event log, one line per event
    assert f"{len(snap['device_traces'][0])} entries" in text
    assert "segments:" in mv.segsum(snap)
    assert mv.segments(snap, format_flamegraph=lambda s: s).count("\n") >= len(snap["segments"])
    assert mv.segment_plot(snap).startswith("\n<!DOCTYPE html>")


def test_report_writes_both_exports_and_names_them_in_errors(planned, tmp_path):
    from tvm_swap.errors import TvmSwapError

    g, plan, op_time = planned
    doc = json.loads(write_report_file(g, plan, tmp_path / "p.trace.json", op_time=op_time).read_text())
    check_trace_format(doc)
    assert doc["otherData"]["source"] == "predicted"
    with pytest.raises(TvmSwapError, match=r"\.trace\.json, \.pickle"):
        write_report_file(g, plan, tmp_path / "p.txt")


def _stamps_from(timed, keep_compute):
    """A trace as the executor writes it, from a timeline: copies always, kernels where keep_compute says."""
    out = [(-1, "begin", 0.0)]
    for i, a in enumerate(timed.plan.actions):
        if a.kind in (ActionKind.COMPUTE, ActionKind.RECOMPUTE) and keep_compute(i):
            out += [(i, "wait", timed.start[i]), (i, "start", timed.start[i]), (i, "end", timed.end[i])]
        elif a.kind in (ActionKind.SWAP_OUT, ActionKind.SWAP_IN):
            out += [(i, "start", timed.start[i]), (i, "end", timed.end[i])]
    out.append((-1, "end_call", timed.time_s))
    return out


def test_measured_timing_keeps_stamps_and_interpolates_between_them(planned):
    g, plan, op_time = planned
    sim = predicted_timing(g, plan, op_time)
    computes = [i for i, a in enumerate(plan.actions) if a.kind in (ActionKind.COMPUTE, ActionKind.RECOMPUTE)]
    stamped = set(computes[::3])
    got = measured_timing(g, plan, _stamps_from(sim, lambda i: i in stamped))
    for i in computes:
        assert bool(got.exact[i]) == (i in stamped)
        if i in stamped:
            assert (got.start[i], got.end[i]) == (sim.start[i], sim.end[i])
    # kernels keep their order on the caller's thread, inside the call
    seq = np.ravel([(got.start[i], got.end[i]) for i in computes])
    assert np.all(np.diff(seq) >= -1e-12) and seq[0] >= 0 and seq[-1] <= sim.time_s + 1e-12
    # all stamped: the measured timeline is the one stamped, and its memory matches
    full = measured_timing(g, plan, _stamps_from(sim, lambda i: True))
    assert full.exact[[i for i, a in enumerate(plan.actions) if a.kind != ActionKind.DROP]].all()
    assert memory_timeline(g, plan, full)["peak_bytes"] == memory_timeline(g, plan, sim)["peak_bytes"]
    doc = chrome_trace(got)
    check_trace_format(doc)
    timing = {e["args"]["action"]: e["args"]["timing"] for e in doc["traceEvents"] if e["ph"] == "X"}
    assert {timing[i] for i in computes} == {"stamped", "interpolated"}


# The opcodes MemoryViz.js's own unpickler reads (torch/utils/viz/MemoryViz.js, `unpickle`): the page at
# pytorch.org/memory_viz throws "UNKNOWN OPCODE" on any other, and accepts protocols 2 to 4 only.
MEMORY_VIZ_OPCODES = {
    "APPENDS", "BINGET", "BININT", "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME", "LONG1",
    "LONG_BINGET", "MARK", "MEMOIZE", "PROTO", "SETITEMS", "SHORT_BINUNICODE", "STOP", "TUPLE2", "APPEND",
    "NEWFALSE", "BINPUT", "BINUNICODE", "EMPTY_TUPLE", "NEWTRUE", "NONE", "BINFLOAT", "TUPLE", "TUPLE1", "TUPLE3",
    "LONG_BINPUT", "LIST", "DICT", "SETITEM",
}


def test_snapshot_file_uses_only_what_the_browser_unpickler_reads(planned, tmp_path):
    import pickletools

    g, plan, op_time = planned
    data = write_report_file(g, plan, tmp_path / "plan.pickle", op_time=op_time).read_bytes()
    ops = [(op.name, arg) for op, arg, _ in pickletools.genops(data)]
    assert ops[0] == ("PROTO", 4)
    assert {name for name, _ in ops} <= MEMORY_VIZ_OPCODES
    longs = [arg for name, arg in ops if name == "LONG1"]
    assert longs and max(longs) < 2**53      # addresses stay exact as JavaScript numbers


def test_a_traced_run_of_the_runtime_exports_its_measured_call(tmp_path):
    import tvm  # noqa: F401
    import tvm_swap
    from tvm_swap.cli.run import write_run_trace
    from tvm_swap.examples import get_example

    ex = get_example("mlp-train", batch=4, in_features=16, hidden=(32,) * 3)
    m = tvm_swap.build(ex.mod, mem_limit="60%", params=ex.params, profile=False, generations=1)
    m.executor.trace = True
    m(*ex.inputs.values())
    doc = json.loads(open(write_run_trace(m, str(tmp_path / "run.trace.json"))).read())
    check_trace_format(doc)
    assert doc["otherData"]["source"] == "measured"
    copies = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] in ("swap_in", "swap_out")]
    n_copies = sum(a.kind in (ActionKind.SWAP_IN, ActionKind.SWAP_OUT) for a in m.plan.actions)
    assert len(copies) == n_copies > 0 and all(e["args"]["timing"] == "stamped" for e in copies)
    snap = pickle.loads(open(write_run_trace(m, str(tmp_path / "run.pickle")), "rb").read())
    assert _replay(snap["device_traces"][0])[0] <= m.plan.mem_limit
    m.close()
