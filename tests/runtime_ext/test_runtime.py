"""runtime_ext: link throttle, emulated streams and events, pool and host store books, the executor's load-time
checks, and the poisoning debug mode proving that the plan's waits matter."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import tvm

import tvm_swap  # noqa: E402
from runtime_ext.emulated import EmulatedBackend, StreamError  # noqa: E402
from runtime_ext.host_store import HostStore  # noqa: E402
from runtime_ext.link import Link  # noqa: E402
from runtime_ext.pool import DevicePool, PoolError  # noqa: E402
from swap_models import Unlimited, assert_steps_match_unlimited, bitwise_equal, flat, mlp  # noqa: E402
from tvm_swap.errors import PlanError  # noqa: E402
from tvm_swap.plan import Action, Plan, Pool  # noqa: E402

FAST = dict(planner="swapadvisor", generations=2, workers=1, profile=False)


# ---------------------------------------------------------------- link
def test_link_one_way_takes_bytes_over_bandwidth():
    link = Link(10e6, 10e6, 20e6)
    t0 = time.perf_counter()
    link.transfer("h2d", 200_000)            # 20 ms at 10 MB/s
    assert 0.019 <= time.perf_counter() - t0         # only a lower bound: a shared machine may be slower


def test_link_both_directions_share_the_duplex_rate():
    link = Link(10e6, 10e6, 10e6)            # both at once: 5 MB/s each
    ends = {}

    def go(d):
        link.transfer(d, 100_000)
        ends[d] = time.perf_counter()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=go, args=(d,)) for d in ("h2d", "d2h")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # alone each would take 10 ms, so without the duplex cap both end by ~10 ms; with it the 200 KB cross at
    # 10 MB/s in all, so the later one cannot end before 20 ms however the threads interleave (a thread that
    # starts late on a busy machine only ends later). Lower bound only: the machine may be shared.
    assert max(ends.values()) - t0 >= 0.018


def test_link_rejects_nonpositive_bandwidth():
    with pytest.raises(ValueError):
        Link(0, 1e9)


# ---------------------------------------------------------------- emulated backend
def _t(values):
    return tvm.runtime.tensor(np.asarray(values, dtype="float32"))


def test_emulated_streams_are_fifo_and_events_order_them():
    be = EmulatedBackend(link=Link(1e6, 1e6, 2e6))         # 4 KB takes 4 ms
    a, b, c = _t(np.ones(1024)), _t(np.zeros(1024)), _t(np.zeros(1024))
    ev = be.new_event()
    be.copy("h2d", b, a)                                     # b <- a, slow
    be.record("h2d", ev)
    be.wait("d2h", [ev])
    be.copy("d2h", c, b)                                     # c <- b only after the first copy landed
    assert not ev.is_set()
    be.wait("compute", [ev])                                 # the caller blocks until then
    assert ev.is_set() and b.numpy()[0] == 1.0
    be.synchronize()
    assert c.numpy().sum() == 1024
    be.close()


def test_emulated_errors_surface_in_synchronize():
    be = EmulatedBackend()
    be.copy("h2d", _t(np.zeros(4)), _t(np.zeros(8)))         # size mismatch inside the worker
    ev = be.new_event()
    be.record("h2d", ev)
    with pytest.raises(StreamError, match="h2d"):
        be.synchronize()
    assert ev.is_set()                                       # events still complete: nobody hangs
    be.close()


def test_emulated_wait_times_out_instead_of_hanging():
    be = EmulatedBackend(wait_timeout_s=0.05)
    with pytest.raises(StreamError, match="did not complete"):
        be.wait("compute", [be.new_event()])
    be.close()


def test_poison_fill_makes_nan():
    be = EmulatedBackend()
    obj = be.alloc_device(64)
    be.fill("compute", obj)
    assert np.isnan(obj._create_view((16,), "float32", 0).numpy()).all()
    be.close()


# ---------------------------------------------------------------- pool and host store
def _pool():
    be = EmulatedBackend()
    return DevicePool(Pool([256, 1024], [2, 1]), be.alloc_device, mem_limit=2048), be


def test_pool_books_and_hard_errors():
    pool, be = _pool()
    assert pool.object_bytes == [256, 256, 1024] and pool.device_bytes == 1536
    pool.occupy(0, 7)
    pool.occupy(2, 8)
    assert pool.in_use_bytes == 1280 and pool.peak_in_use_bytes == 1280
    with pytest.raises(PoolError, match="two live tensors"):
        pool.occupy(0, 9)
    with pytest.raises(PoolError, match="releases object 1"):
        pool.release(1, 7)
    pool.release(0, 7)
    assert pool.in_use_bytes == 1024 and pool.peak_in_use_bytes == 1280
    with pytest.raises(PoolError, match="does not fit"):
        pool.view(0, 7, (128,), "float32")                   # 512 B into a 256 B object
    v = pool.view(2, 8, (16, 16), "float32")
    assert v.data_ptr() == pool.objects[2].data_ptr()        # offset 0 of its own storage
    assert pool.view(2, 8, (16, 16), "float32") is v         # cached: calls reuse the view
    with pytest.raises(PoolError, match="does not exist"):
        pool.occupy(3, 1)
    with pytest.raises(PoolError, match="memory limit"):
        DevicePool(Pool([1024], [2]), be.alloc_device, mem_limit=1000)
    be.close()


def test_host_store_rename_swaps_buffers():
    be = EmulatedBackend()
    hs = HostStore(be.alloc_host)
    hs.put(1, np.ones(4, "float32"), (4,), "float32", 16)
    new = hs.ensure(2, (4,), "float32", 16)
    new.copyfrom(np.full(4, 5, "float32"))
    old = hs.get(1)
    hs.rename(2, 1)
    assert hs.get(1) is new and hs.get(2) is old and hs.get(1).numpy()[0] == 5
    be.close()


# ---------------------------------------------------------------- executor load-time checks
@pytest.fixture(scope="module")
def mlp_build():
    ex = mlp()
    m = tvm_swap.build(ex.mod, mem_limit="35%", params=ex.params, **FAST)
    return ex, m


def _executor_with(m, plan):
    from runtime_ext.executor import PlanExecutor

    return PlanExecutor(plan, m.manifest, EmulatedBackend())


def _copy(plan):
    return Plan.from_dict(plan.to_dict())


def test_executor_refuses_a_plan_that_does_not_repeat(mlp_build):
    _, m = mlp_build
    p = _copy(m.plan)
    last_drop = max(i for i, a in enumerate(p.actions) if a.kind == "drop")
    del p.actions[last_drop]                                 # a tensor stays on the device at the end
    with pytest.raises(PlanError, match="start state"):
        _executor_with(m, p)


def test_executor_refuses_a_swap_in_without_host_copy(mlp_build):
    _, m = mlp_build
    p = _copy(m.plan)
    never_out = {a.tensor for a in p.actions if a.kind == "swap_out"}
    kinds = {t: s.kind for t, s in m.manifest.tensors.items()}
    act = next(t for t, k in kinds.items() if k == "activation" and t not in never_out)
    i = next(i for i, a in enumerate(p.actions) if a.kind == "swap_in")
    p.actions[i] = Action("swap_in", tensor=act, obj=p.actions[i].obj, deps=p.actions[i].deps)
    with pytest.raises(PlanError, match="no host copy"):
        _executor_with(m, p)


def test_direct_vm_call_without_swap_module_is_refused(mlp_build):
    ex, m = mlp_build
    # (TVM's FFI turns the builtin's NoActiveModuleError into a RuntimeError carrying its text)
    with pytest.raises(RuntimeError, match="called directly; run it through a SwapModule"):
        m.vm["main"](tvm.runtime.tensor(ex.inputs["x"]))


def test_a_failed_call_leaves_the_module_usable(mlp_build):
    ex, m = mlp_build
    want = flat(m(*ex.inputs.values()))
    m.executor.in_call = True                                # as if a call were still running
    with pytest.raises(PlanError, match="re-entrant"):
        m(*ex.inputs.values())
    assert bitwise_equal(flat(m(*ex.inputs.values())), want)


def test_stats_count_calls_and_times(mlp_build):
    ex, m = mlp_build
    before = m.stats()["calls"]
    m(*ex.inputs.values())
    s = m.stats()
    assert s["calls"] == before + 1 and s["time_s"] > 0 and s["predicted_time_s"] > 0
    assert s["swap_in_bytes"] > 0 and s["totals"]["swap_in_count"] >= s["swap_in_count"]


# ---------------------------------------------------------------- poisoning: the waits matter
def _done_before(plan, i: int, removed: int) -> set:
    """The actions that surely end before action i starts once its wait on `removed` is gone: its other deps,
    the earlier actions of its own stream (a stream runs in order), and theirs, transitively."""
    def stream(k):
        kind = plan.actions[k].kind
        return "compute" if kind in ("compute", "recompute") else kind

    prev, last = {}, {}
    for k, act in enumerate(plan.actions):
        prev[k] = last.get(stream(k))
        last[stream(k)] = k
    done, todo = set(), [x for x in plan.actions[i].deps if x != removed] + [prev[i]]
    while todo:
        x = todo.pop()
        if x is None or x in done:
            continue
        done.add(x)
        todo.extend(plan.actions[x].deps)
        todo.append(prev[x])
    return done


def _drop_one_arrival_wait(graph, skip: int = 0):
    """A plan hook: remove the wait of a compute on a swapped-in tensor it reads (the largest copy first; `skip`
    passes over that many), choosing one the independent verifier then rejects (so the removed dep was not
    implied by another)."""
    from tvm_swap.verify import verify_plan

    def hook(plan):
        cands = []      # (bytes, issued ahead, compute, dep): the largest copies first (they land latest), and of
        #                 those the one issued closest before its reader (least slack to hide a missing wait)
        for i, a in enumerate(plan.actions):
            if a.kind != "compute":
                continue
            for d in a.deps:
                src = plan.actions[d]
                if src.kind == "swap_in" and src.tensor in graph.ops[a.op].inputs:
                    cands.append((-graph.tensors[src.tensor].nbytes, i - d, i, d))
        for _, _, i, d in sorted(cands):
            a, src = plan.actions[i], plan.actions[d]
            if any(x > d and plan.actions[x].kind in ("swap_in", "swap_out") for x in _done_before(plan, i, d)):
                continue        # a later copy it still waits on, directly or through its stream, ends after this
                #                 one: the emulated link carries both directions at one shared rate, in order
            p = _copy(plan)
            p.actions[i] = Action("compute", op=a.op, deps=tuple(x for x in a.deps if x != d), out_objs=a.out_objs)
            if verify_plan(graph, p):
                if hook.skipped < skip:
                    hook.skipped += 1
                    continue
                p.verified = False
                hook.removed = (i, d, graph.tensors[src.tensor].name)
                return p
        raise AssertionError("no removable swap-in wait in this plan")
    hook.skipped = 0
    return hook


def test_removing_one_wait_changes_the_output_under_poisoning():
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax

    # a training step: its arena plan has waits on 256 KB weight copies that nothing else implies (the forward
    # MLP's removable waits are on 1 KB biases, whose copy lands too soon after the waited one to be reliable)
    ex = mlp(train=True)
    want = Unlimited(ex.mod)(list(ex.inputs.values()), list(ex.params.values()))
    # 1 MB/s and poisoning: the removed copy (256 KB) lands at the end of its window, ~250 ms after it is issued,
    # long after the kernel read it
    slow = dict(mem_limit="35%", params=ex.params, bandwidth="1MB/s", debug_poison=True, **FAST)
    ok = tvm_swap.build(ex.mod, **slow)
    assert bitwise_equal(flat(ok(*ex.inputs.values())), want)          # poisoning never hurts a correct plan
    graph = graph_from_relax(lower(ex.mod, "llvm"))
    # a removed wait is seen when its kernel runs before the copy lands; where the plan's other waits hold the
    # kernel back long enough (a load-dependent race), the next candidate is tried: a runtime that ignored
    # waits, or poisoning that did nothing, would go unnoticed every time
    unnoticed = []
    for skip in range(3):
        hook = _drop_one_arrival_wait(graph, skip)
        broken = tvm_swap.build(ex.mod, _plan_hook=hook, **slow)
        if not bitwise_equal(flat(broken(*ex.inputs.values())), want):
            return
        unnoticed.append(hook.removed)
    raise AssertionError(f"removing each of the waits {unnoticed} went unnoticed")


def test_poisoning_needs_a_module_built_for_it(mlp_build):
    from runtime_ext.swap_module import SwapModule

    ex, m = mlp_build
    with pytest.raises(tvm_swap.TvmSwapError, match="debug_poison"):
        SwapModule(m.executable, ex.params, debug_poison=True)


def test_executor_refuses_two_live_tensors_in_one_object_at_load(mlp_build):
    _, m = mlp_build
    p = _copy(m.plan)
    computes = [i for i, a in enumerate(p.actions) if a.kind == "compute"]
    first, second = computes[0], computes[1]
    a = p.actions[second]
    obj = p.actions[first].out_objs[0]                      # still holds the first op's output
    p.actions[second] = Action("compute", op=a.op, deps=a.deps, out_objs=(obj,) + a.out_objs[1:])
    with pytest.raises(PoolError, match="two live tensors"):
        _executor_with(m, p)


# ---------------------------------------------------------------- objects renamed between calls
def _kept_updates_plan(g, reread=None, copy_out=False):
    """Every tensor in its own exact-size object; params start resident and their updates STAY resident in
    the objects they were written to (same size class), so the pool must rename objects between calls.
    `reread`: a param dropped after its first reader and swapped in again for the next one (copied out first
    with `copy_out`, else read back from a host copy that is stale from the second call on)."""
    from tvm_swap.planner.builder import ActionBuilder

    used = g.used_tensors()
    aligned = {t: max(256, (g.tensors[t].nbytes + 255) // 256 * 256) for t in used}
    sizes = sorted(set(aligned.values()))
    cls = {t: sizes.index(aligned[t]) for t in used}
    counts = [sum(1 for t in used if cls[t] == c) for c in range(len(sizes))]
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    seen = [0] * len(sizes)
    obj = {}
    for t in used:
        obj[t] = int(first[cls[t]]) + seen[cls[t]]
        seen[cls[t]] += 1
    prod = g.producer()
    params = [t for t in used if g.is_persistent(t)]
    last = {}
    for o, op in enumerate(g.ops):
        for t in op.inputs:
            last[t] = o
    b = ActionBuilder(g, sum(counts))
    for p in params:
        b.place_initial(p, obj[p])
    for o, op in enumerate(g.ops):
        for t in dict.fromkeys(op.inputs):
            if not b.is_resident(t):
                b.swap_in(t, obj[t])
        b.compute(o, [obj[t] for t in op.outputs])
        for t in op.outputs:
            if t in g.outputs and t not in g.updates:
                b.swap_out(t)
        for t in dict.fromkeys((*op.inputs, *op.outputs)):
            if last.get(t, -1) <= o and b.is_resident(t) and t not in g.updates:
                b.drop(t)
            elif t == reread and b.is_resident(t):
                if copy_out:
                    b.swap_out(t)
                b.drop(t)
                reread = None
    tensor_class = [cls.get(t, -1) for t in range(g.num_tensors)]
    ws = max((op.workspace for op in g.ops), default=0)
    pool = Pool(sizes, counts, 256, (ws + 255) // 256 * 256)
    return Plan(g.name, g.fingerprint(), "kept-updates", pool.total_bytes(), {"name": "cpu"},
                list(range(g.num_ops)), pool, tensor_class, [(p, obj[p]) for p in params], b.actions)


def test_updated_weights_stay_on_the_device_across_calls():
    from relay_passes.apply import apply_plan
    from relay_passes.lower import build_lowered, lower
    from runtime_ext.swap_module import SwapModule
    from tvm_swap.cost.devices import get_device
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.verify import check_plan

    ex = mlp(train=True)
    low = lower(ex.mod, "llvm")
    g = graph_from_relax(low)
    plan = _kept_updates_plan(g)
    plan.device = get_device("cpu").to_dict()
    check_plan(g, plan)
    backing = plan.next_object_map(g.updates, g.op_outputs())
    assert backing != list(range(plan.pool.num_objects))      # some object really is renamed
    m = SwapModule(build_lowered(apply_plan(low, g, plan), "llvm"), ex.params, plan=plan)
    assert_steps_match_unlimited(m, ex.mod, list(ex.inputs.values()), list(ex.params.values()),
                                 params_each_step=True)
    s = m.stats()
    assert s["swap_in_count"] == len(ex.inputs) and s["swap_out_count"] == 1   # only inputs in, loss out


def _reread_param(g):
    """An updated param with two readers before its update (so it can leave the device between them)."""
    readers = {}
    for o, op in enumerate(g.ops):
        for t in dict.fromkeys(op.inputs):
            readers.setdefault(t, []).append(o)
    return next(old for new, old in sorted(g.updates.items()) if len(readers.get(old, ())) >= 2)


@pytest.mark.parametrize("copy_out", [False, True])
def test_a_kept_param_read_back_from_the_host_needs_a_current_host_copy(copy_out):
    """A param kept on the device whose update is never copied out has an old host copy from the second call
    on: reading it back is refused by the verifier and by the executor at load (no copy nobody planned covers
    it); copied out before it leaves, the plan verifies and three calls match the unlimited build bitwise."""
    from relay_passes.apply import apply_plan
    from relay_passes.lower import build_lowered, lower
    from runtime_ext.swap_module import SwapModule
    from tvm_swap.cost.devices import get_device
    from tvm_swap.errors import VerificationError
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.verify import check_plan

    ex = mlp(train=True)
    low = lower(ex.mod, "llvm")
    g = graph_from_relax(low)
    p = _reread_param(g)
    plan = _kept_updates_plan(g, reread=p, copy_out=copy_out)
    plan.device = get_device("cpu").to_dict()
    assert any(a.kind == "swap_in" and a.tensor == p for a in plan.actions)
    exe = build_lowered(apply_plan(low, g, plan), "llvm")
    if not copy_out:
        with pytest.raises(VerificationError, match="stale host copy"):
            check_plan(g, plan)
        with pytest.raises(PlanError, match="stale host copy"):
            SwapModule(exe, ex.params, plan=plan)
        return
    check_plan(g, plan)
    m = SwapModule(exe, ex.params, plan=plan)
    ref = Unlimited(ex.mod)
    inputs, params = list(ex.inputs.values()), list(ex.params.values())
    for step in range(3):
        want = ref(inputs, params)
        assert bitwise_equal(flat(m(*inputs)), want), f"step {step} differs"
        params = want[1:]
    nbytes = g.tensors[p].nbytes
    s = m.stats()
    assert s["swap_out_count"] == 2 and s["swap_out_bytes"] - nbytes == g.tensors[g.outputs[0]].nbytes


def test_host_store_rename_gives_new_a_fresh_buffer_when_old_had_none():
    be = EmulatedBackend()
    hs = HostStore(be.alloc_host)
    new = hs.ensure(2, (4,), "float32", 16)
    hs.rename(2, 1)                                          # 1 (an on-device param) had no host copy
    assert hs.get(1) is new and hs.has(2) and hs.get(2) is not new
    hs.rename(2, 1)                                          # the next call's update renames again
    assert hs.get(2) is new
    be.close()
