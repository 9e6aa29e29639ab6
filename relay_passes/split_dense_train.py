"""SplitTrainableDense: a trainable dense weight streams through the training step in K chunks of its rows.

A training step's floor is often one dense layer (mlp: the first layer's weight is 46% of the step's no-swap
need): the kernel that computes its gradient and updates it holds the weight, the gradient's inputs and the
new weight at once. Here the weight W (OUT, IN), read as y = x W^T, becomes K parameters W_s{k}: its rows
[b_k, e_k) (output features), and every kernel that read the whole weight reads one chunk:

    forward   y = x W^T          -> y = concat_k(x W_s{k}^T)                     each output column: same sum
    dX        dX = dY W          -> acc_0 = dY[.., b_0:e_0] W_s0,                 the chunks continue ONE sum:
                                    acc_k = acc_{k-1} + dY[.., b_k:e_k] W_s{k}    each kernel starts from the
                                                                                  last one's result (TE init)
    dW and the optimizer update (elementwise over W, its state, its gradient)
              -> per chunk: the rows [b_k, e_k) of each, back through the gradient's matmul, transpose and
                 collapse_sum (dW_s{k} = dY[.., b_k:e_k]^T x: the same sums, disjoint rows)

so the step's results are bitwise equal to the unsplit step's (llvm). Optimizer state of W's shape (momentum,
Adam's m and v) that only the update reads is split the same way. Each chunk is a parameter with a `slice`
step of its recipe (tvm_swap.param_layouts), so the user still gives and gets W (and its state) whole; the
step's outputs and `tvm_swap.updates` name the chunks. `plan_split` says why a weight cannot be split.
"""
from __future__ import annotations

import json

import tvm
import tvm.script
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from tvm_swap.param_layouts import Fold, ParamLayouts

from .param_layout import ATTR, UPDATES_ATTR, _static_shape, folded_layouts
from .split_dense import _identity_layouts, chunk_bounds

PARAM_KINDS_ATTR = "tvm_swap.param_kinds"
ELEMENTWISE = {"relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.sqrt", "relax.rsqrt",
               "relax.negative", "relax.maximum", "relax.minimum", "relax.power", "relax.abs", "relax.sign",
               "relax.astype", "relax.exp", "relax.square"}
# ops whose chunk along an axis is computed from chunks of their arguments (the others: the whole, sliced)
RULE_OPS = ELEMENTWISE | {"relax.permute_dims", "relax.matmul", "relax.collapse_sum_to"}


def _op(value) -> str:
    return value.op.name if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) else ""


def _shape(expr):
    return _static_shape(expr.ty) if isinstance(expr.ty, relax.TensorType) else None


class _Facts:
    """The bindings of a step function: definitions, readers (binding vars), the result tuple."""

    def __init__(self, func):
        self.func = func
        self.bindings = [b for blk in func.body.blocks for b in blk.bindings]
        self.defn = {b.var: b.value for b in self.bindings}
        self.readers: dict = {}
        for b in self.bindings:
            for v in relax.analysis.free_vars(b.value):
                self.readers.setdefault(v, []).append(b.var)
        ret = func.body.body
        self.result = ret if isinstance(self.defn.get(ret), relax.Tuple) else None
        self.fields = list(self.defn[ret].fields) if self.result is not None else []
        attrs = func.attrs
        self.num_input = int(attrs["num_input"])
        self.updates = [(int(o), int(p)) for o, p in attrs[UPDATES_ATTR]] if UPDATES_ATTR in attrs else []


def _arg_axes(value, axis: int, out_shape) -> list:
    """[(arg var, its axis)] whose chunks make `value`'s chunk along `axis` (negative); None: no rule."""
    name = _op(value)
    if name in ELEMENTWISE:
        out = []
        for a in value.args:
            s = _shape(a)
            if s is None or len(s) < -axis or s[axis] == 1:
                continue            # a scalar or broadcast along the axis: read whole
            if not isinstance(a, relax.Var) or s[axis] != out_shape[axis]:
                return None
            out.append((a, axis))
        return out
    if name == "relax.permute_dims":
        nd = len(out_shape)
        axes = list(range(nd))[::-1] if value.attrs.axes is None else [int(x) for x in value.attrs.axes]
        return [(value.args[0], axes[nd + axis] - nd)] if isinstance(value.args[0], relax.Var) else None
    if name == "relax.matmul":
        a, b = value.args
        if axis == -1 and len(_shape(b) or ()) >= 2 and isinstance(b, relax.Var):
            return [(b, -1)]
        if axis == -2 and len(_shape(a) or ()) >= 2 and isinstance(a, relax.Var):
            return [(a, -2)]
        return None
    if name == "relax.collapse_sum_to":
        s = _shape(value.args[0])
        ok = s is not None and len(s) >= -axis and s[axis] == out_shape[axis]
        return [(value.args[0], axis)] if ok and isinstance(value.args[0], relax.Var) else None
    return None


def plan_split(func, name: str):
    """(plan, None) or (None, why): how weight `name` splits. plan: {"weight": Var, "chunked": {var: axis},
    "params": [param vars split by rows], "forward": [permute_dims vars], "dx": [matmul vars]}."""
    f = _Facts(func)
    params = {p.name: (i, p) for i, p in enumerate(func.params)}
    if name not in params:
        return None, f"no parameter {name!r}"
    pi, w = params[name]
    shape = _shape(w)
    if shape is None or len(shape) != 2:
        return None, "not a 2-D weight with a static shape"
    outs = {p: o for o, p in f.updates}
    if pi not in outs or f.result is None:
        return None, "not updated by the step (a frozen weight: relay_passes.split_dense)"
    root = f.fields[outs[pi]]
    if not isinstance(root, relax.Var) or f.fields.count(root) != 1:
        return None, "its new value is not one result of the step"
    chunked, sliced = _chunked_region(f, root, shape[0])
    if chunked is None:
        return None, sliced
    index = {p: i for i, p in enumerate(func.params)}
    split_params = []
    for p, axis in sliced.items():
        if p in index and index[p] >= f.num_input:
            i = index[p]
            if axis != -2 or _shape(p) != shape or i not in outs or f.fields[outs[i]] not in chunked:
                return None, f"parameter {p.name!r} is read by the update in another layout"
            split_params.append(p)
    if w not in split_params:
        return None, "its update does not read it elementwise"
    chunked_results = {v for v in f.fields if isinstance(v, relax.Var) and v in chunked}
    if chunked_results != {f.fields[outs[index[p]]] for p in split_params}:
        return None, "its update's chunks would also change a result that is not a parameter's new value"
    forward, dx = [], []
    for r in f.readers.get(w, []):
        if r in chunked:
            continue
        v = f.defn[r]
        if _op(v) == "relax.permute_dims" and v.attrs.axes is None or (
                _op(v) == "relax.permute_dims" and [int(a) for a in v.attrs.axes] == [1, 0]):
            if all(_op(f.defn.get(m)) == "relax.matmul" and f.defn[m].args[1].same_as(r)
                   and not f.defn[m].args[0].same_as(r) for m in f.readers.get(r, [])):
                forward.append(r)
                continue
        if _op(v) == "relax.matmul" and v.args[1].same_as(w) and not v.args[0].same_as(w) \
                and v.attrs.out_dtype in (None, "") and len(_shape(v.args[0]) or ()) >= 1:
            dx.append(r)
            continue
        return None, f"read by {_op(v) or type(v).__name__} ({r.name}), not a dense layer's matmul"
    if not forward:
        return None, "not read as a dense layer's weight (matmul(x, permute_dims(W)))"
    for p in split_params:
        if not p.same_as(w) and any(r not in chunked for r in f.readers.get(p, [])):
            return None, f"its optimizer state {p.name!r} is read outside the update"
    return {"weight": w, "chunked": chunked, "params": split_params, "forward": forward, "dx": dx}, None


def _chunked_region(f: _Facts, root, rows: int):
    """({var: axis} computed in chunks, {var: axis} read in slices (params included)) from the update's
    result `root` back; (None, why) when a chunk's dimension is not the weight's rows."""
    want: dict = {root: -2}
    chunked, sliced = {}, {}
    news = {f.fields[o] for o, _ in f.updates}      # new values of parameters: may be results in chunks
    for b in reversed(f.bindings):
        v = b.var
        if v not in want:
            continue
        axis = want.pop(v)
        rd = f.readers.get(v, [])
        own = v.same_as(root) or (all(r in chunked or r.same_as(f.result) for r in rd)
                            and (v in news or not any(v.same_as(x) for x in f.fields)))
        args = _arg_axes(b.value, axis, _shape(v)) if own and _op(b.value) in RULE_OPS else None
        if args is None:
            sliced[v] = axis
            continue
        if _shape(v)[axis] != rows:
            return None, f"{v.name}'s axis {axis} is not the weight's rows"
        chunked[v] = axis
        for a, ax in args:
            if a in f.defn:
                if want.get(a, ax) != ax:
                    return None, f"{a.name} is read along two axes"
                want[a] = ax
            else:
                sliced[a] = ax      # a parameter or input of the step
    sliced.update(want)
    if root not in chunked:
        return None, "its update is not elementwise"
    return chunked, sliced


def trainable_splittable(func) -> dict:
    """{name: (OUT, IN)} of the updated 2-D weights plan_split can split."""
    if func.attrs is None or UPDATES_ATTR not in func.attrs:
        return {}
    out = {}
    n = int(func.attrs["num_input"])
    for i, p in enumerate(func.params):
        if i >= n and len(_shape(p) or ()) == 2 and plan_split(func, p.name)[0] is not None:
            out[p.name] = tuple(_shape(p))
    return out


def split_param_names(func) -> set:
    """The parameters a split of every trainable_splittable weight cuts (the weights and their state)."""
    out = set()
    for name in trainable_splittable(func):
        out |= {p.name for p in plan_split(func, name)[0]["params"]}
    return out


def _acc_matmul(dy_shape, rows: int, cols: int, begin: int, dtype: str, with_prev: bool):
    """TIR: out = [prev +] dY[.., begin:begin+rows] W_s (rows, cols), one sequential sum per element whose
    reduction starts from `prev` (the previous chunk's result), as the unsplit matmul's sum runs on. (TE's
    reduction `init` is dropped by create_prim_func in TVM 0.27, hence the script.)"""
    out_shape = [*dy_shape[:-1], cols]
    nd = len(out_shape)

    def dims(shape):
        return ", ".join(f"T.int64({int(d)})" for d in shape)
    loops = [f"i{d}" for d in range(nd)]
    vs = [f"v_i{d}" for d in range(nd)]
    out_ix = ", ".join(vs)
    prev = f'prev: T.Buffer(({dims(out_shape)}), "{dtype}"), ' if with_prev else ""
    init = f"prev[{out_ix}]" if with_prev else f'T.{dtype}(0)'
    text = f"""
@T.prim_func(private=True, s_tir=True)
def matmul_acc(dy: T.Buffer(({dims(dy_shape)}), "{dtype}"), wk: T.Buffer(({dims([rows, cols])}), "{dtype}"), {prev}out: T.Buffer(({dims(out_shape)}), "{dtype}")):
    T.func_attr({{"tirx.noalias": True}})
    for {", ".join(loops)}, k in T.grid({dims([*out_shape, rows])}):
        with T.sblock("matmul_acc"):
            {out_ix}, v_k = T.axis.remap("{"S" * nd}R", [{", ".join(loops)}, k])
            with T.init():
                out[{out_ix}] = {init}
            out[{out_ix}] = out[{out_ix}] + dy[{", ".join(vs[:-1] + [f"v_k + T.int64({int(begin)})"])}] * wk[v_k, {vs[-1]}]
"""
    return tvm.script.from_source(text)


def _chunk_call(value, args, axis: int, size: int):
    """`value`'s op on one chunk's arguments (a collapse_sum_to's target shape cut along `axis` too)."""
    if _op(value) == "relax.collapse_sum_to":
        target = [int(d) for d in value.args[1].values]
        target[axis] = size
        return relax.op.collapse_sum_to(args[0], relax.ShapeExpr(target))
    return relax.Call(value.op, args, value.attrs)


@mutator
class _TrainSplitter(PyExprMutator):
    def __init__(self, mod, plans: list, chunks: dict, bounds: dict):
        super().__init__(mod)
        self.chunks = dict(chunks)        # param or chunked var -> [its K chunks]
        self.bounds = bounds              # param or chunked var -> [(begin, end)] of its chunks
        self.axis, self.forward, self.dx, self.cut = {}, {}, {}, {}
        for p in plans:
            w = p["weight"]
            self.axis.update(p["chunked"])
            self.bounds.update({v: bounds[w] for v in p["chunked"]})
            self.forward.update({v: w for v in p["forward"]})
            self.dx.update({v: w for v in p["dx"]})

    def _emit(self, var, value):
        emit = self.builder_.emit if isinstance(var, relax.DataflowVar) else self.builder_.emit_output
        self.set_var_remap(var, emit(value, var.name))

    def _piece(self, arg, axis: int, k: int, bounds):
        """Chunk k of `arg` along `axis`: its own chunk, or a slice of the whole (emitted once)."""
        if arg in self.chunks:
            return self.chunks[arg][k]
        key = (arg, axis, k)
        if key not in self.cut:
            whole = self.visit_expr(arg)
            nd = len(_shape(arg))
            b, e = bounds[k]
            self.cut[key] = self.builder_.emit(
                relax.op.strided_slice(whole, [nd + axis], [b], [e]), f"{arg.name}_cut{k}")
        return self.cut[key]

    def visit_var_binding_(self, binding):  # noqa: N802  (TVM's visitor naming)
        v, value = binding.var, binding.value
        if v in self.forward:
            return                                  # W^T: each forward slice transposes its chunk
        if _op(value) == "relax.matmul" and isinstance(value.args[1], relax.Var) and value.args[1] in self.forward:
            x = self.visit_expr(value.args[0])
            w = self.forward[value.args[1]]
            parts = [self.builder_.emit(relax.op.matmul(x, self.builder_.emit(relax.op.permute_dims(c)),
                                                        out_dtype=value.attrs.out_dtype), f"{v.name}_s{k}")
                     for k, c in enumerate(self.chunks[w])]
            self._emit(v, relax.op.concat(parts, axis=-1))
            return
        if v in self.dx:
            w = self.dx[v]
            dy, acc = self.visit_expr(value.args[0]), None
            for k, (c, bounds) in enumerate(zip(self.chunks[w], self.bounds[w])):
                (b, e), cols = bounds, _shape(c)[1]
                prim = _acc_matmul(_shape(value.args[0]), e - b, cols, b, str(c.ty.dtype.dtype), acc is not None)
                call = relax.call_tir(self.builder_.add_func(prim, "matmul_acc"), [dy, c, *([acc] if acc is not None else [])],
                                      relax.TensorType([*_shape(value.args[0])[:-1], cols], c.ty.dtype))
                if k < len(self.chunks[w]) - 1:
                    acc = self.builder_.emit(call, f"{v.name}_acc{k}")
            self._emit(v, call)
            return
        if v in self.axis:
            axis, bounds = self.axis[v], self.bounds[v]
            rule = dict(_arg_axes(value, axis, _shape(v)))
            self.chunks[v] = []
            for k in range(len(bounds)):
                args = [self._piece(a, rule[a], k, bounds) if isinstance(a, relax.Var) and a in rule
                        else self.visit_expr(a) for a in value.args]
                size = bounds[k][1] - bounds[k][0]
                self.chunks[v].append(self.builder_.emit(_chunk_call(value, args, axis, size), f"{v.name}_s{k}"))
            return
        if isinstance(value, relax.Tuple) and any(isinstance(x, relax.Var) and x in self.axis for x in value.fields):
            fields = []
            for x in value.fields:
                fields += self.chunks[x] if isinstance(x, relax.Var) and x in self.axis else [self.visit_expr(x)]
            self._emit(v, relax.Tuple(fields))
            return
        super().visit_var_binding_(binding)


def split_trainable_function(mod, func_name: str, splits: dict):
    """(module with `func_name` reading each weight in `splits` ({name: K}) as K row chunks, {name: why} of
    the weights that could not be split). See the module docstring."""
    func = mod[func_name]
    plans, refused = [], {}
    for name, k in sorted(splits.items()):
        plan, why = plan_split(func, name)
        if plan is not None and any(q.same_as(x) for p in plans for q in p["params"] for x in plan["params"]):
            continue        # its optimizer state, already split with it (or the weight of that state)
        if plan is None:
            refused[name] = why
        else:
            plan["k"] = min(int(k), _shape(plan["weight"])[0])
            plans.append(plan)
    if not plans:
        return mod, refused
    f = _Facts(func)
    rows = {p["weight"]: chunk_bounds(_shape(p["weight"])[0], p["k"]) for p in plans}
    new_of, bounds = {}, {}
    for p in plans:
        for q in p["params"]:
            s = _shape(q)
            bounds[q] = rows[p["weight"]]
            new_of[q] = [relax.Var(f"{q.name}_s{k}", relax.TensorType([e - b, *s[1:]], q.ty.dtype))
                         for k, (b, e) in enumerate(bounds[q])]
    work = tvm.IRModule(dict(mod.functions.items()), attrs=mod.attrs)     # (the builder adds kernels to it)
    splitter = _TrainSplitter(work, plans, new_of, bounds)
    body = splitter.visit_expr(func.body)
    params = [c for p in func.params for c in new_of.get(p, [p])]
    attrs = _split_attrs(func, f, new_of, bounds)
    out = splitter.builder_.get()
    gv = out.get_global_var(func_name)
    out[gv] = relax.Function(params, body, None, func.is_pure, tvm.ir.make_node("ir.DictAttrs", **attrs))
    return relax.transform.Normalize()(out), refused


def _split_attrs(func, f: _Facts, new_of: dict, bounds: dict) -> dict:
    """updates, param kinds and the parameter recipes (tvm_swap.param_layouts) after the split."""
    param_at, i = {}, 0
    for p in func.params:
        param_at[p] = list(range(i, i + len(new_of.get(p, [p]))))
        i += len(param_at[p])
    split_results = {f.fields[o]: len(new_of[func.params[pi]]) for o, pi in f.updates
                     if func.params[pi] in new_of}
    result_at, i = [], 0
    for x in f.fields:
        n = split_results.get(x, 1) if isinstance(x, relax.Var) else 1
        result_at.append(list(range(i, i + n)))
        i += n
    attrs = dict(func.attrs.items())
    attrs[UPDATES_ATTR] = [[o, p] for old_o, old_p in f.updates
                           for o, p in zip(result_at[old_o], param_at[func.params[old_p]])]
    if PARAM_KINDS_ATTR in attrs:
        kinds = {str(k): str(v) for k, v in attrs[PARAM_KINDS_ATTR].items()}
        for p, cs in new_of.items():
            if p.name in kinds:
                kind = kinds.pop(p.name)
                kinds.update({c.name: kind for c in cs})
        attrs[PARAM_KINDS_ATTR] = kinds
    layouts = folded_layouts(func) or _identity_layouts(func)
    kept = [n for n in layouts.kept if n not in {p.name for p in new_of}]
    folds = list(layouts.folds)
    for p, cs in new_of.items():
        folds += [Fold(c.name, p.name, tuple(_shape(p)), (("slice", (0, b, e)),))
                  for c, (b, e) in zip(cs, bounds[p])]
    attrs[ATTR] = json.dumps(ParamLayouts(layouts.user, tuple(kept), tuple(folds)).to_dict())
    return attrs


@tvm.transform.module_pass(opt_level=0, name="tvm_swap.SplitTrainableDense")
class SplitTrainableDense:
    """Read the trainable weights in `splits` ({param name: K}) as K chunks of their rows through the whole
    training step (module docstring); a weight that cannot be split is refused with why."""

    def __init__(self, splits: dict, func_name: str = "main"):
        self.splits = {k: int(v) for k, v in splits.items() if int(v) > 1}
        self.func_name = func_name

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        if not self.splits:
            return mod
        out, refused = split_trainable_function(mod, self.func_name, self.splits)
        if refused:
            raise ValueError("cannot split " + "; ".join(f"{n!r}: {why}" for n, why in sorted(refused.items())))
        return out
