"""Graph generators and a trivially-correct plan, for tests, fuzzing and planner benchmarks.

Nothing here imports TVM. Everything is deterministic in its seed.

- `random_dag`: a random DAG of ops (1-3 inputs, 1-2 outputs) over a few params and inputs,
  sizes drawn from a small set so size classes repeat; optional SGD-style updates of params.
- `random_training_graph`: forward layers (with optional skip connections), a loss, backward ops
  reading saved activations, gradients, and update ops producing new params (graph.updates).
- `random_op_times`: per-op seconds roughly proportional to flops.
- `random_topological_order`: a random valid schedule.
- `simple_plan_for`: every tensor in its own exact-size object (or reusing freed ones), swapped in
  before first use, dropped after last use; outputs and updates swapped out; optionally every
  activation swapped out and back between uses. Slow but obviously correct.
- `planner_min_limit`: the smallest limit a planner promises to plan a graph at, as its refusal names it
  (fuzzers draw limits from it rather than from a floor formula of their own).
"""
from __future__ import annotations

import numpy as np

from .cost.devices import DeviceSpec, get_device
from .graph import DataflowGraph, OpInfo, TensorInfo
from .plan import DEFAULT_ALIGNMENT, Plan, Pool, aligned_bytes

# Sizes repeat and some are not multiples of the alignment, so classes and rounding both matter.
DEFAULT_SIZES = (1_000_000, 1 << 20, 3 << 20, 4_000_000, 8 << 20)


def _rng(rng_or_seed) -> np.random.Generator:
    if isinstance(rng_or_seed, np.random.Generator):
        return rng_or_seed
    return np.random.default_rng(rng_or_seed)


class _GraphMaker:
    """Accumulates tensors and ops; ids are indices."""

    def __init__(self, name: str):
        self.name = name
        self.tensors: list[TensorInfo] = []
        self.ops: list[OpInfo] = []

    def tensor(self, name: str, nbytes: int, kind: str) -> int:
        t = len(self.tensors)
        n = max(1, int(nbytes) // 4)
        self.tensors.append(TensorInfo(t, name, int(nbytes), (n,), "float32", kind))
        return t

    def op(self, name: str, kernel: str, inputs, outputs, flops: float, workspace: int = 0) -> int:
        o = len(self.ops)
        self.ops.append(OpInfo(o, name, kernel, tuple(int(i) for i in inputs), tuple(int(i) for i in outputs),
                               float(flops), int(workspace)))
        return o

    def graph(self, outputs, updates, meta) -> DataflowGraph:
        g = DataflowGraph(self.name, self.tensors, self.ops, list(outputs), dict(updates), dict(meta))
        g.validate()
        return g


def random_dag(rng_or_seed=0, n_ops: int = 20, n_params: int = 3, n_inputs: int = 2,
               sizes=DEFAULT_SIZES, max_inputs: int = 3, max_outputs: int = 2,
               locality: int = 6, update_prob: float = 0.0, workspace_prob: float = 0.0,
               name: str | None = None) -> DataflowGraph:
    """A random DAG of `n_ops` ops.

    Each op reads 1..max_inputs distinct tensors, mostly among the `locality` most recent ones
    (so lifetimes are short, as in real models) and sometimes anything older, params or inputs;
    it writes 1..max_outputs new activations. Tensors nobody reads become graph outputs (kind
    "output"). With `update_prob`, each param gets, with that probability, an update op at the end
    (new param = f(param, some activation)) listed in graph.updates and graph.outputs.
    """
    if n_ops < 1 or n_params < 0 or n_inputs < 0 or n_params + n_inputs < 1:
        raise ValueError("random_dag needs n_ops >= 1 and at least one param or input")
    rng = _rng(rng_or_seed)
    sizes = [int(s) for s in sizes]
    m = _GraphMaker(name or "random_dag")
    sources = [m.tensor(f"p{i}", rng.choice(sizes), "param") for i in range(n_params)]
    sources += [m.tensor(f"x{i}", rng.choice(sizes), "input") for i in range(n_inputs)]
    produced: list[int] = []
    read: set[int] = set()
    for o in range(n_ops):
        k = int(rng.integers(1, max_inputs + 1))
        pool = produced[-locality:] if produced else []
        ins: list[int] = []
        for _ in range(k):
            r = rng.random()
            if pool and r < 0.7:
                cand = pool[int(rng.integers(len(pool)))]
            elif produced and r < 0.85:
                cand = produced[int(rng.integers(len(produced)))]
            else:
                cand = sources[int(rng.integers(len(sources)))]
            if cand not in ins:
                ins.append(cand)
        n_out = int(rng.integers(1, max_outputs + 1))
        outs = [m.tensor(f"a{o}_{j}", rng.choice(sizes), "activation") for j in range(n_out)]
        flops = float(sum(m.tensors[t].nbytes for t in ins + outs)) * float(rng.uniform(5, 50))
        ws = int(rng.choice(sizes)) // 4 if rng.random() < workspace_prob else 0
        m.op(f"op{o}", f"k{o % 7}", ins, outs, flops, ws)
        read.update(ins)
        produced.extend(outs)
    updates: dict[int, int] = {}
    for p in sources[:n_params]:
        if update_prob > 0 and rng.random() < update_prob:
            src = produced[int(rng.integers(len(produced)))]
            new = m.tensor(f"{m.tensors[p].name}_new", m.tensors[p].nbytes, "output")
            m.op(f"update_{m.tensors[p].name}", "sgd", [p, src], [new], 2.0 * m.tensors[p].nbytes)
            read.update((p, src))
            updates[new] = p
    outputs = []
    for t in produced:
        if t not in read:
            m.tensors[t] = TensorInfo(t, m.tensors[t].name, m.tensors[t].nbytes, m.tensors[t].shape,
                                      m.tensors[t].dtype, "output")
            outputs.append(t)
    outputs += list(updates)
    return m.graph(outputs, updates, {"generator": "random_dag"})


def random_training_graph(seed=0, n_layers: int = 4, width_bytes=DEFAULT_SIZES,
                          with_updates: bool = True, skip_prob: float = 0.3, momentum: bool = False,
                          stash_prob: float = 0.3, name: str | None = None) -> DataflowGraph:
    """One training iteration of a random layered network.

    Forward: h_i = fwd_i(h_{i-1}, W_i [, h_j skip]) (sometimes with a second saved output, a
    "stash" like a dropout mask); loss = loss(h_L, label). Backward: bwd_i reads the gradient of
    h_i, the saved input h_{i-1} (and stash) and W_i, and writes dW_i and the gradients of its
    inputs; skip gradients are summed by add ops. Updates (with_updates): W_i' = sgd(W_i, dW_i
    [, m_i]) with optional momentum state m_i (optimizer_state). Outputs: loss + new params/states.
    """
    if n_layers < 1:
        raise ValueError("random_training_graph needs n_layers >= 1")
    rng = _rng(seed)
    sizes = [int(s) for s in width_bytes]
    m = _GraphMaker(name or "random_training")
    x = m.tensor("x", rng.choice(sizes), "input")
    label = m.tensor("label", 4096, "input")
    W = [m.tensor(f"W{i}", rng.choice(sizes), "param") for i in range(1, n_layers + 1)]
    M = [m.tensor(f"m{i}", m.tensors[w].nbytes, "optimizer_state") for i, w in enumerate(W, 1)] if momentum else []
    h = [x]                      # h[i] is layer i's output, h[0] the input
    skip_of: dict[int, int] = {}
    stash: dict[int, int] = {}
    for i in range(1, n_layers + 1):
        ins = [h[i - 1], W[i - 1]]
        if i >= 3 and rng.random() < skip_prob:
            j = int(rng.integers(1, i - 1))
            skip_of[i] = j
            ins.append(h[j])
        hi = m.tensor(f"h{i}", rng.choice(sizes), "activation")
        outs = [hi]
        if rng.random() < stash_prob:
            stash[i] = m.tensor(f"stash{i}", m.tensors[hi].nbytes, "activation")
            outs.append(stash[i])
        flops = 2.0 * m.tensors[hi].nbytes * float(rng.uniform(20, 100))
        m.op(f"fwd{i}", "dense", ins, outs, flops)
        h.append(hi)
    loss = m.tensor("loss", 4, "output")
    m.op("loss", "loss", [h[-1], label], [loss], 4.0 * m.tensors[h[-1]].nbytes)
    grad_parts: dict[int, list[int]] = {}
    g_top = m.tensor(f"dh{n_layers}", m.tensors[h[-1]].nbytes, "gradient")
    m.op("loss_grad", "loss_grad", [h[-1], label], [g_top], 4.0 * m.tensors[h[-1]].nbytes)
    g = g_top
    outputs = [loss]
    updates: dict[int, int] = {}
    for i in range(n_layers, 0, -1):
        if grad_parts.get(i):   # sum skip-connection gradients into the chain gradient
            total = m.tensor(f"dh{i}_sum", m.tensors[h[i]].nbytes, "gradient")
            m.op(f"grad_sum{i}", "add", [g] + grad_parts[i], [total], 2.0 * m.tensors[total].nbytes)
            g = total
        ins = [g, h[i - 1], W[i - 1]] + ([stash[i]] if i in stash else [])
        dW = m.tensor(f"dW{i}", m.tensors[W[i - 1]].nbytes, "gradient")
        outs = [dW]
        g_prev = -1
        if i > 1:
            g_prev = m.tensor(f"dh{i - 1}", m.tensors[h[i - 1]].nbytes, "gradient")
            outs.append(g_prev)
        if i in skip_of:
            j = skip_of[i]
            part = m.tensor(f"dh{j}_from{i}", m.tensors[h[j]].nbytes, "gradient")
            outs.append(part)
            ins.append(h[j])
            grad_parts.setdefault(j, []).append(part)
        flops = 4.0 * m.tensors[W[i - 1]].nbytes * float(rng.uniform(20, 100))
        m.op(f"bwd{i}", "dense_grad", ins, outs, flops)
        if with_updates:
            w = W[i - 1]
            new_w = m.tensor(f"W{i}_new", m.tensors[w].nbytes, "output")
            up_ins, up_outs = [w, dW], [new_w]
            if momentum:
                new_m = m.tensor(f"m{i}_new", m.tensors[w].nbytes, "output")
                up_ins.append(M[i - 1])
                up_outs.append(new_m)
                updates[new_m] = M[i - 1]
            m.op(f"sgd{i}", "sgd", up_ins, up_outs, 3.0 * m.tensors[w].nbytes)
            updates[new_w] = w
            outputs += up_outs
        else:
            outputs.append(dW)
            m.tensors[dW] = TensorInfo(dW, m.tensors[dW].name, m.tensors[dW].nbytes, m.tensors[dW].shape,
                                       "float32", "output")
        g = g_prev
    return m.graph(outputs, updates, {"generator": "random_training_graph"})


def random_op_times(graph: DataflowGraph, seed=0, flops_per_s: float = 1e12, jitter: float = 0.5,
                    floor_s: float = 1e-5) -> np.ndarray:
    """Seconds per op: flops / flops_per_s times a random factor in [1-jitter, 1+jitter], at least floor_s."""
    rng = _rng(seed)
    flops = np.array([op.flops for op in graph.ops], dtype=np.float64)
    factor = rng.uniform(1 - jitter, 1 + jitter, size=len(flops))
    return np.maximum(flops / flops_per_s * factor, floor_s)


def random_topological_order(graph: DataflowGraph, seed=0) -> list[int]:
    """A uniformly random choice among ready ops at each step: some valid schedule."""
    rng = _rng(seed)
    preds = graph.op_preds()
    succs = graph.op_succs()
    indeg = [len(p) for p in preds]
    ready = [o for o in range(graph.num_ops) if indeg[o] == 0]
    order = []
    while ready:
        o = ready.pop(int(rng.integers(len(ready))))
        order.append(o)
        for s in succs[o]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return order


def simple_plan_for(graph: DataflowGraph, schedule=None, alignment: int = DEFAULT_ALIGNMENT,
                    mem_limit: int | None = None, device: DeviceSpec | str = "v100-16gb",
                    planner: str = "simple", reuse: bool = False, swap_activations: bool = False,
                    keep_params: bool = False) -> Plan:
    """A trivially-correct plan with exact-size classes (one per aligned size).

    Walking `schedule` (default: graph order): swap in each param/input just before its reader,
    compute, swap out graph outputs and updates right after they are produced, drop every tensor
    after its last reader (and its swap-out). No initial residents, so it repeats trivially.
    - reuse=False: each tensor has an object of its own; reuse=True: a freed object is reused by the
      next tensor of its class (the pool holds the peak count per class).
    - swap_activations=True: after each op every tensor it touched that is read later is dropped
      (swapped out first if it has no host copy) and swapped back in before its next reader.
    - keep_params=True: params and optimizer state that are read and not updated are initial
      residents and stay on the device (the plan still repeats).
    `mem_limit` defaults to the pool's total.
    """
    from .planner.builder import ActionBuilder  # the builder is the tested source of deps

    schedule = list(range(graph.num_ops)) if schedule is None else [int(o) for o in schedule]
    used = graph.used_tensors()
    aligned = {t: aligned_bytes(graph.tensors[t].nbytes, alignment) for t in used}
    class_bytes = sorted(set(aligned.values()))
    cls_of_size = {b: c for c, b in enumerate(class_bytes)}
    tensor_class = [-1] * graph.num_tensors
    for t in used:
        tensor_class[t] = cls_of_size[aligned[t]]
    prod = graph.producer()

    # pass 1: decide the events and each placement's (class, local object index)
    pos = {o: i for i, o in enumerate(schedule)}
    uses: dict[int, list[int]] = {}
    for o in schedule:
        for t in dict.fromkeys(graph.ops[o].inputs):
            uses.setdefault(t, []).append(pos[o])
    to_host = set(graph.outputs) | set(graph.updates)
    free: list[list[int]] = [[] for _ in class_bytes]
    n_local = [0] * len(class_bytes)
    own: dict[int, int] = {}
    slot: dict[int, tuple[int, int]] = {}     # resident tensor -> (class, local index)
    host = {t for t in used if prod[t] < 0}
    events: list[tuple] = []
    updated = set(graph.updates.values())
    kept = [t for t in used if keep_params and graph.is_persistent(t) and t not in updated]

    def take(t):
        c = tensor_class[t]
        if reuse and free[c]:
            k = free[c].pop(0)
        elif not reuse and t in own:
            k = own[t]
        else:
            k = n_local[c]
            n_local[c] += 1
            own[t] = k
        slot[t] = (c, k)
        return (c, k)

    def release(t):
        c, k = slot.pop(t)
        if reuse:
            free[c].append(k)
            free[c].sort()
        events.append(("drop", t))

    kept_slots = {}
    for t in kept:
        kept_slots[t] = take(t)
    for i, o in enumerate(schedule):
        op = graph.ops[o]
        for t in dict.fromkeys(op.inputs):
            if t not in slot:
                events.append(("in", t, take(t)))
        events.append(("compute", o, [take(t) for t in op.outputs]))
        for t in op.outputs:
            if t in to_host:
                events.append(("out", t))
                host.add(t)
        for t in dict.fromkeys((*op.inputs, *op.outputs)):
            if t in kept_slots:
                continue
            later = [u for u in uses.get(t, []) if u > i]
            if not later:
                release(t)
            elif swap_activations:
                if t not in host:
                    events.append(("out", t))
                    host.add(t)
                release(t)

    workspace = max((op.workspace for op in graph.ops), default=0)
    pool = Pool(class_bytes, n_local, alignment, aligned_bytes(workspace, alignment) if workspace else 0)
    first = pool.first_object().tolist()
    obj = lambda ck: first[ck[0]] + ck[1]  # noqa: E731

    # pass 2: emit through the builder, which derives the deps
    b = ActionBuilder(graph, pool.num_objects)
    residents = sorted((t, obj(ck)) for t, ck in kept_slots.items())
    for t, o in residents:
        b.place_initial(t, o)
    for e in events:
        if e[0] == "in":
            b.swap_in(e[1], obj(e[2]))
        elif e[0] == "compute":
            b.compute(e[1], [obj(ck) for ck in e[2]])
        elif e[0] == "out":
            b.swap_out(e[1])
        else:
            b.drop(e[1])
    device = get_device(device)
    return Plan(
        graph_name=graph.name, graph_fingerprint=graph.fingerprint(), planner=planner,
        mem_limit=int(pool.total_bytes() if mem_limit is None else mem_limit), device=device.to_dict(),
        schedule=schedule, pool=pool, tensor_class=tensor_class, initial_residents=residents, actions=b.actions,
    )


def planner_min_limit(graph: DataflowGraph, planner: str, device="cpu", pool: str | None = None,
                      alignment: int = DEFAULT_ALIGNMENT, options: dict | None = None) -> tuple[int, str]:
    """(smallest limit `planner` plans `graph` at, why): the min its refusal of a 1-byte limit names, from the
    very check plan_graph and tvm_swap.build run first (tvm_swap.planner.api.check_feasible: the pool's floor,
    the arena's including kernel workspace, or a baseline's own higher floor, e.g. vdnn's and odswap's
    exact-size classes). No floor formula here: a fuzz that draws its limits from this number tests the
    planners' floors instead of agreeing with a copy of them. Roofline times of `device`, as the check uses."""
    from .errors import InfeasibleLimitError
    from .planner.api import check_feasible, resolve_pool

    try:
        check_feasible(graph, 1, resolve_pool(planner, pool), alignment, planner=planner, device=device,
                       options=options)
    except InfeasibleLimitError as e:
        if not e.exact:
            raise RuntimeError(f"check_feasible named a lower bound, not the min: {e}") from None
        return int(e.min_feasible), e.reason
    return 1, "a 1-byte limit is feasible"


def write_conv_symbol(path):
    """An MXNet symbol of one 3x3 convolution (4 filters) and no params file, written to `path` (returned):
    the smallest model whose missing params, input rank and byte limits the CLI refuses before importing TVM."""
    import json
    from pathlib import Path

    path = Path(path)
    path.write_text(json.dumps({
        "nodes": [{"op": "null", "name": "data", "inputs": []}, {"op": "null", "name": "c_weight", "inputs": []},
                  {"op": "null", "name": "c_bias", "inputs": []},
                  {"op": "Convolution", "name": "c", "attrs": {"kernel": "(3, 3)", "num_filter": "4"},
                   "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]}],
        "arg_nodes": [0, 1, 2], "heads": [[3, 0, 0]]}))
    return path


def _onnx_gemm_io(TensorProto, helper, numpy_helper):
    """The input x (4x8), output y (4x16) and weight w (16x8, ones) of the small ONNX test models below."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])
    return x, y, numpy_helper.from_array(np.ones((16, 8), np.float32), "w")


def write_onnx_with_unconverted_ops(path):
    """An ONNX model (a Gemm, then two Celu and an op of a custom domain, none of which TVM 0.27's importer
    converts) at PATH (returned; None without the onnx package). The CLI refuses it before importing TVM."""
    from pathlib import Path

    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    x, y, w = _onnx_gemm_io(TensorProto, helper, numpy_helper)
    nodes = [helper.make_node("Gemm", ["x", "w"], ["h0"], transB=1),
             helper.make_node("Celu", ["h0"], ["h1"]), helper.make_node("Celu", ["h1"], ["h2"]),
             helper.make_node("FancyOp", ["h2"], ["y"], domain="com.example")]
    g = helper.make_graph(nodes, "g", [x], [y], initializer=[w])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]),
              str(path))
    return path


def write_onnx_without_its_data(folder):
    """An ONNX model (one Gemm) whose weight was saved in a file beside it, which is then deleted: FOLDER/m.onnx
    (returned; None without the onnx package). The CLI refuses it before importing onnx or TVM."""
    from pathlib import Path

    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    x, y, w = _onnx_gemm_io(TensorProto, helper, numpy_helper)
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)], "g", [x], [y], initializer=[w])
    path = Path(folder) / "m.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(g), str(path), save_as_external_data=True, location="m.data", size_threshold=0)
    (path.parent / "m.data").unlink()
    return path
