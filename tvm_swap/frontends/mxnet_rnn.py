"""MXNet's fused `RNN` operator (lstm, gru, rnn_relu, rnn_tanh), unrolled over time in Relax.

Parameter packing (MXNet rnn-inl.h, and Gluon's `_rnn_param_concat`): all weights first, for each layer and
then each direction `i2h_weight` (G*H, in) then `h2h_weight` (G*H, H); then all biases in the same order.
Gate order: LSTM input, forget, cell, output; GRU reset, update, new (cuDNN's). Layout TNC.
"""
from __future__ import annotations

from .lazy_tvm import LazyModule
from .mxnet_registry import register

relax = LazyModule("tvm.relax")           # TVM on the first conversion, not on import
R = LazyModule("tvm.relax.op")
GATES = {"lstm": 4, "gru": 3, "rnn_relu": 1, "rnn_tanh": 1}


def _piece_shapes(mode, num_layers, dirs, hidden, input_size):
    g = GATES[mode] * hidden
    weights, biases = [], []
    for layer in range(num_layers):
        in_l = input_size if layer == 0 else hidden * dirs
        for _ in range(dirs):
            weights += [(g, in_l), (g, hidden)]
            biases += [(g,), (g,)]
    return weights + biases


def _unpack(ctx, node, shapes):
    """The weight and bias tensors, taken from the `_rnn_param_concat` parts when they line up exactly."""
    sizes = [_numel(s) for s in shapes]
    total = sum(sizes)
    src = node.inputs[1][0]
    parts = ctx.side.get(("concat_parts", src))
    if parts is not None and [_numel(ctx.shape(p)) for p in parts] == sizes:
        return [p if ctx.shape(p) == tuple(s) else ctx.emit(R.reshape(p, s)) for p, s in zip(parts, shapes)]
    flat = ctx.input(node, 1, (total,))
    offsets, acc = [], 0
    for n in sizes[:-1]:
        acc += n
        offsets.append(acc)
    split = ctx.emit(R.split(flat, offsets, axis=0)) if offsets else None
    pieces = [relax.TupleGetItem(split, i) for i in range(len(sizes))] if split is not None else [flat]
    return [ctx.emit(R.reshape(ctx.emit(p), s)) for p, s in zip(pieces, shapes)]


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _time_steps(ctx, x, t, n, width):
    """Split a (T, N, W) tensor into T tensors of shape (N, W)."""
    if t == 1:
        return [ctx.emit(R.reshape(x, (n, width)))]
    parts = ctx.emit(R.split(x, t, axis=0))
    return [ctx.emit(R.reshape(ctx.emit(relax.TupleGetItem(parts, i)), (n, width))) for i in range(t)]


def _stack_time(ctx, hs, n, width):
    """T tensors of shape (N, W) -> (T, N, W); concat of reshapes (both have gradients in TVM 0.27)."""
    rows = [ctx.emit(R.reshape(h, (1, n, width))) for h in hs]
    return rows[0] if len(rows) == 1 else ctx.emit(R.concat(rows, axis=0))


def _direction(ctx, mode, xs_proj, wh, bh, h, c, hidden, reverse):
    """Run one direction of one layer; xs_proj are the per-step input projections (N, G*H).

    bh is None when it was already folded into xs_proj (LSTM and vanilla RNN; GRU needs it inside r * (.)).
    """
    wh_t = ctx.emit(R.permute_dims(wh))
    dt = ctx.dtype_of(h)
    one = ctx.const(1.0, dt)
    order = range(len(xs_proj) - 1, -1, -1) if reverse else range(len(xs_proj))
    outs = [None] * len(xs_proj)
    for t in order:
        hp = ctx.emit(R.matmul(h, wh_t))
        if bh is not None:
            hp = ctx.emit(R.add(hp, bh))
        if mode == "lstm":
            gates = ctx.emit(R.add(xs_proj[t], hp))
            parts = ctx.emit(R.split(gates, 4, axis=1))
            i, f, g, o = (ctx.emit(relax.TupleGetItem(parts, k)) for k in range(4))
            i, f, o = (ctx.emit(R.sigmoid(v)) for v in (i, f, o))
            g = ctx.emit(R.tanh(g))
            c = ctx.emit(R.add(ctx.emit(R.multiply(f, c)), ctx.emit(R.multiply(i, g))))
            h = ctx.emit(R.multiply(o, ctx.emit(R.tanh(c))))
        elif mode == "gru":
            xparts = ctx.emit(R.split(xs_proj[t], 3, axis=1))
            hparts = ctx.emit(R.split(hp, 3, axis=1))
            xr, xz, xn = (ctx.emit(relax.TupleGetItem(xparts, k)) for k in range(3))
            hr, hz, hn = (ctx.emit(relax.TupleGetItem(hparts, k)) for k in range(3))
            r = ctx.emit(R.sigmoid(ctx.emit(R.add(xr, hr))))
            z = ctx.emit(R.sigmoid(ctx.emit(R.add(xz, hz))))
            nn = ctx.emit(R.tanh(ctx.emit(R.add(xn, ctx.emit(R.multiply(r, hn))))))
            # h = (1 - z) * n + z * h_prev
            h = ctx.emit(R.add(ctx.emit(R.multiply(ctx.emit(R.subtract(one, z)), nn)),
                               ctx.emit(R.multiply(z, h))))
        else:
            pre = ctx.emit(R.add(xs_proj[t], hp))
            h = ctx.emit(R.nn.relu(pre) if mode == "rnn_relu" else R.tanh(pre))
        outs[t] = h
    return outs, h, c


@register("RNN")
def rnn(ctx, node):
    a = node.attrs
    mode = a.choice("mode", None, set(GATES))
    hidden = a.int("state_size")
    num_layers = a.int("num_layers", 1)
    dirs = 2 if a.bool("bidirectional", False) else 1
    for key in ("projection_size", "lstm_state_clip_min", "lstm_state_clip_max"):
        if a.has(key):
            raise a.unsupported(key)
    if a.bool("use_sequence_length", False):
        raise a.unsupported("use_sequence_length", "variable-length sequences are not supported")
    if a.str("layout", "TNC") != "TNC":
        raise a.unsupported("layout", "the fused RNN op takes TNC")
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    if len(shape) != 3:
        raise ctx.error(node, f"data must be (seq_len, batch, features) in TNC layout, got shape {shape}")
    t, n, c_in = shape
    state_shape = (num_layers * dirs, n, hidden)
    h0 = ctx.input(node, 2, state_shape)
    c0 = ctx.input(node, 3, state_shape) if mode == "lstm" else None
    pieces = _unpack(ctx, node, _piece_shapes(mode, num_layers, dirs, hidden, c_in))
    n_w = 2 * num_layers * dirs
    weights, biases = pieces[:n_w], pieces[n_w:]

    def state(s, k):  # (L*D, N, H)[k] -> (N, H)
        sl = ctx.emit(R.strided_slice(s, [0], [k], [k + 1]))
        return ctx.emit(R.reshape(sl, (n, hidden)))

    layer_in = x
    h_final, c_final = [], []
    for layer in range(num_layers):
        outs_per_dir = []
        for d in range(dirs):
            k = layer * dirs + d
            wx, wh = weights[2 * k], weights[2 * k + 1]
            bx, bh = biases[2 * k], biases[2 * k + 1]
            # One matmul projects every time step; for LSTM/RNN both biases fold in here.
            proj = ctx.emit(R.matmul(layer_in, ctx.emit(R.permute_dims(wx))))
            bias = bx if mode == "gru" else ctx.emit(R.add(bx, bh))
            proj = ctx.emit(R.add(proj, bias))
            steps = _time_steps(ctx, proj, t, n, GATES[mode] * hidden)
            outs, h, cell = _direction(ctx, mode, steps, wh, bh if mode == "gru" else None, state(h0, k),
                                       state(c0, k) if c0 is not None else None, hidden, reverse=d == 1)
            h_final.append(h)
            c_final.append(cell)
            outs_per_dir.append(_stack_time(ctx, outs, n, hidden))
        layer_in = outs_per_dir[0] if dirs == 1 else ctx.emit(R.concat(outs_per_dir, axis=2))
    results = [layer_in]
    if a.bool("state_outputs", False):
        results.append(_stack_time(ctx, h_final, n, hidden))
        if mode == "lstm":
            results.append(_stack_time(ctx, c_final, n, hidden))
    return results
