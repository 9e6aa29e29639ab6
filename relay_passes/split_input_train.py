"""SplitInputBatch: a training step's user input read as K slices of its batch, each its own function input.

    step = SplitInputBatch({"data": 4})(step)      # main(data, labels, W...) -> main(data_b0..data_b3, labels, W...)

Why (issue 26, mlp at batch 128): once the first dense weight streams in row chunks (split_dense_train), what
is left of its weight-gradient kernel is the whole input batch (128x784 f32: 29.9% of the step's need). Every
kernel that reads the input whole needs it on the device at once; here no kernel does: each slice is an input of
its own (the planner swaps it in on its own), and each reader of the input reads slices:

    forward  y = x R                ->  y = concat_b(x_b R)                  (per sample: each row its own sum)
    dW       g = A x  (A: (R, B))   ->  acc_0 = A[:, b_0] x_b0,               the slices continue ONE sum over
                                        acc_b = acc_{b-1} + A[:, b] x_b      the batch, in the unsplit order

so the step is bitwise the unsplit one where the unsplit kernel's reduction over the batch runs in order from 0
(TVM's llvm matmul: one sequential sum per output element; tests/relay_passes/test_split_input_train.py). Any
other reader of the input is refused with the op named. `tvm_swap.input_splits` records the slices
({input: [[slice name, begin, end], ...]}), what a caller cutting the user's whole array needs.
"""
from __future__ import annotations

import json

INPUT_SPLITS_ATTR = "tvm_swap.input_splits"


class InputSplitRefused(ValueError):
    """An input that cannot be read in batch slices (the op and why)."""


def _shape(ty):
    from .micro_batch import _shape as shape

    return shape(ty)


def _acc_kernel(a_shape, x_shape, dtype: str, with_prev: bool):
    """TIR: out (R, C) = [prev +] sum over b of a[i, b] * x[b, j] for the slice's rows b of the batch, one
    sequential sum per element starting from `prev` (the previous slice's result; 0 for the first)."""
    import tvm.script

    rows, bk = a_shape
    cols = x_shape[1]

    def dims(shape):
        return ", ".join(f"T.int64({int(d)})" for d in shape)
    prev = f'prev: T.Buffer(({dims([rows, cols])}), "{dtype}"), ' if with_prev else ""
    init = "prev[v_i, v_j]" if with_prev else f"T.{dtype}(0)"
    text = f"""
@T.prim_func(private=True, s_tir=True)
def batch_acc(a: T.Buffer(({dims([rows, bk])}), "{dtype}"), x: T.Buffer(({dims([bk, cols])}), "{dtype}"), {prev}out: T.Buffer(({dims([rows, cols])}), "{dtype}")):
    T.func_attr({{"tirx.noalias": True}})
    for i, j, k in T.grid({dims([rows, cols, bk])}):
        with T.sblock("batch_acc"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            with T.init():
                out[v_i, v_j] = {init}
            out[v_i, v_j] = out[v_i, v_j] + a[v_i, v_k] * x[v_k, v_j]
"""
    return tvm.script.from_source(text)


def _reader_kind(value, x) -> str:
    """'forward' (x R), 'grad' (A x) or InputSplitRefused: how a binding reads input x."""
    from tvm import relax

    from .micro_batch import _op_name

    if not isinstance(value, relax.Call):
        raise InputSplitRefused(f"a {type(value).__name__} reads it")
    name = _op_name(value)
    args = list(value.args)
    if name != "relax.matmul" or len(args) != 2 or len(_shape(args[0].ty) or []) != 2 \
            or len(_shape(args[1].ty) or []) != 2:
        raise InputSplitRefused(f"{name!r} reads it (only a 2-D matmul reads an input in batch slices)")
    if args[0].same_as(x) and not args[1].same_as(x):
        return "forward"
    if args[1].same_as(x) and not args[0].same_as(x):
        return "grad"
    raise InputSplitRefused("a matmul reads it on both sides")


def plan_input_split(func, name: str) -> dict:
    """{binding index: 'forward' | 'grad'} of every binding reading input `name`; InputSplitRefused says why not."""
    from tvm import relax

    from .split_region import _flat_bindings

    n = int(func.attrs["num_input"]) if func.attrs is not None and "num_input" in func.attrs else len(func.params)
    inputs = {p.name: p for p in func.params[:n]}
    if name not in inputs:
        raise InputSplitRefused(f"{name!r} is not an input of the function (inputs: {sorted(inputs)})")
    x = inputs[name]
    if any(x in relax.analysis.free_vars(e) for e in [func.body.body]):
        raise InputSplitRefused(f"{name!r} is returned")
    out = {}
    for i, b in enumerate(_flat_bindings(func)):
        if x in relax.analysis.free_vars(b.value):
            try:
                out[i] = _reader_kind(b.value, x)
            except InputSplitRefused as e:
                raise InputSplitRefused(f"cannot read input {name!r} in batch slices at binding {b.var.name!r}: "
                                        f"{e}") from None
    return out


class _Emitter:
    def __init__(self, bb, env, slices: dict, bounds: dict):
        self.bb, self.env, self.slices, self.bounds = bb, env, slices, bounds

    def forward(self, b, x):
        from tvm import relax

        from .split_region import _sub

        r = _sub(b.value.args[1], self.env)
        parts = [self.bb.emit(relax.Call(b.value.op, [xs, r], b.value.attrs, b.value.ty_args),
                              name_hint=f"{b.var.name}_b{c}") for c, xs in enumerate(self.slices[x])]
        return relax.op.concat(parts, axis=0)

    def grad(self, b, x):
        from tvm import relax

        from .split_region import _sub

        a = _sub(b.value.args[0], self.env)
        dtype = str(b.var.ty.dtype)
        rows = _shape(b.value.args[0].ty)[0]
        cols = _shape(x.ty)[1]
        acc = None
        for c, (xs, (lo, hi)) in enumerate(zip(self.slices[x], self.bounds[x])):
            a_c = self.bb.emit(relax.op.strided_slice(a, axes=[1], begin=[lo], end=[hi]),
                               name_hint=f"{b.var.name}_a{c}")
            prim = _acc_kernel([rows, hi - lo], [hi - lo, cols], dtype, acc is not None)
            gv = self.bb.add_func(prim, "batch_acc")
            call = relax.call_tir(gv, [a_c, xs, *([acc] if acc is not None else [])],
                                  relax.TensorType([rows, cols], dtype))
            if c < len(self.slices[x]) - 1:
                acc = self.bb.emit(call, name_hint=f"{b.var.name}_acc{c}")
        return call


def split_input_function(mod, splits: dict, func_name: str = "main"):
    """The module with `func_name` reading each input in `splits` ({name: K}) as K batch slices (module
    docstring); InputSplitRefused names what cannot."""
    import tvm
    from tvm import relax

    from .split_region import _flat_bindings, _sub
    from .split_rows import chunk_bounds

    func = mod[func_name]
    if func.attrs is None or "tvm_swap.updates" not in func.attrs:
        raise InputSplitRefused("input slices are for a training step (inference splits regions instead)")
    readers = {}
    for name in splits:
        readers.update({i: (name, kind) for i, kind in plan_input_split(func, name).items()})
    bindings = _flat_bindings(func)
    params, slices, bounds, position = [], {}, {}, {}
    for p in func.params:
        position[p] = len(params)
        if p.name in splits:
            s = _shape(p.ty)
            k = min(int(splits[p.name]), s[0])
            bounds[p] = chunk_bounds(s[0], k)
            slices[p] = [relax.Var(f"{p.name}_b{c}", relax.TensorType([hi - lo, *s[1:]], p.ty.dtype))
                         for c, (lo, hi) in enumerate(bounds[p])]
            params += slices[p]
        else:
            params.append(p)
    by_name = {p.name: p for p in func.params}
    others = tvm.IRModule({gv: f for gv, f in mod.functions_items() if gv.name_hint != func_name}, attrs=mod.attrs)
    bb = relax.BlockBuilder(others)          # (the slices' kernels are added beside the kernels there)
    env = {p: p for p in func.params}
    emitter = _Emitter(bb, env, slices, bounds)
    with bb.function(func_name, params, attrs=_attrs(func, slices, position), pure=True):
        with bb.dataflow():
            for i, b in enumerate(bindings):
                if i in readers:
                    name, kind = readers[i]
                    x = by_name[name]
                    value = emitter.forward(b, x) if kind == "forward" else emitter.grad(b, x)
                else:
                    value = _sub(b.value, env)
                emit = bb.emit if isinstance(b.var, relax.DataflowVar) else bb.emit_output
                env[b.var] = emit(value, name_hint=b.var.name)
            gv = bb.emit_output(_sub(func.body.body, env))
        bb.emit_func_output(gv)
    out = bb.get()
    return relax.transform.Normalize()(tvm.IRModule(dict(out.functions_items()), attrs=mod.attrs))


def _attrs(func, slices: dict, position: dict) -> dict:
    """num_input and tvm_swap.updates (parameter positions) after the inputs' slices, and the slices' record."""
    attrs = dict(func.attrs.items())
    shift = {i: position[p] for i, p in enumerate(func.params)}     # (a parameter's new position)
    extra = sum(len(s) - 1 for s in slices.values())
    attrs["num_input"] = int(func.attrs["num_input"]) + extra
    attrs["tvm_swap.updates"] = [[int(o), shift[int(p)]] for o, p in func.attrs["tvm_swap.updates"]]
    record = {x.name: [[v.name, *_bounds_of(v, x, slices)] for v in slices[x]] for x in slices}
    if "tvm_swap.input_splits" in attrs:
        record.update(json.loads(str(attrs["tvm_swap.input_splits"])))
    attrs[INPUT_SPLITS_ATTR] = json.dumps(record)
    return attrs


def _bounds_of(v, x, slices: dict) -> list:
    lo = sum(_shape(s.ty)[0] for s in slices[x][:slices[x].index(v)])
    return [lo, lo + _shape(v.ty)[0]]


class SplitInputBatch:
    """A module pass: `func_name`'s inputs in `splits` ({name: K}) read as K batch slices (module docstring).
    Called as TVM's passes are, not wrapped by tvm.transform.module_pass (its FFI would turn the refusal into a
    RuntimeError)."""

    def __init__(self, splits: dict, func_name: str = "main"):
        self.splits = {k: int(v) for k, v in splits.items() if int(v) > 1}
        self.func_name = func_name

    def __call__(self, mod):
        if not self.splits:
            return mod
        return split_input_function(mod, self.splits, self.func_name)
