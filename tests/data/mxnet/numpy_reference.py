"""An independent float64 numpy interpreter of MXNet symbol JSON, written from MXNet 1.9's operator
definitions (not from the importer): the reference the importer's Relax output is checked against.

It is itself checked against the outputs MXNet produced for the shipped fixtures.
"""
from __future__ import annotations

import ast
import json
import math

import numpy as np
from scipy.special import erf


def _attr(attrs, key, default=None):
    v = attrs.get(key)
    if v is None or v == "None":
        return default
    return ast.literal_eval(v) if not isinstance(default, str) else v


def _b(attrs, key, default):
    v = attrs.get(key)
    return default if v is None else v in ("True", "true", "1")


def _tup(attrs, key, default):
    v = attrs.get(key)
    if v is None or v in ("()", "None"):
        return default
    t = ast.literal_eval(v)
    return (t,) if isinstance(t, int) else tuple(t)


def conv2d(x, w, stride, pad, dilate, groups):
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    ho = (h + 2 * pad[0] - dilate[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + 2 * pad[1] - dilate[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, f, ho, wo))
    fg = f // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * fg:(g + 1) * fg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dilate[0]: i * dilate[0] + stride[0] * (ho - 1) + 1: stride[0],
                           j * dilate[1]: j * dilate[1] + stride[1] * (wo - 1) + 1: stride[1]]
                out[:, g * fg:(g + 1) * fg] += np.einsum("nchw,fc->nfhw", patch, ws[:, :, i, j])
    return out


def pool2d(x, kind, kernel, stride, pad, full, include_pad):
    """MXNet pool.h: window [start, min(start+k, H+pad)) sized before clipping to the input."""
    n, c, h, w = x.shape
    rnd = math.ceil if full else math.floor
    ho = int(rnd((h + 2 * pad[0] - kernel[0]) / stride[0])) + 1
    wo = int(rnd((w + 2 * pad[1] - kernel[1]) / stride[1])) + 1
    out = np.zeros((n, c, ho, wo))
    for i in range(ho):
        for j in range(wo):
            hs, ws = i * stride[0] - pad[0], j * stride[1] - pad[1]
            he, we = min(hs + kernel[0], h + pad[0]), min(ws + kernel[1], w + pad[1])
            size = (he - hs) * (we - ws)
            hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
            win = x[:, :, hs:he, ws:we]
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                count = size if include_pad else (he - hs) * (we - ws)
                out[:, :, i, j] = win.sum(axis=(2, 3)) / count
    return out


def reshape_shape(spec, src):
    out, i, j, infer = [], 0, 0, None
    while j < len(spec):
        v = spec[j]
        if v == 0:
            out.append(src[i]); i += 1
        elif v == -1:
            infer = len(out); out.append(1); i += 1
        elif v == -2:
            out += list(src[i:]); i = len(src)
        elif v == -3:
            out.append(src[i] * src[i + 1]); i += 2
        elif v == -4:
            a, b = spec[j + 1], spec[j + 2]
            a = src[i] // b if a == -1 else a
            b = src[i] // a if b == -1 else b
            out += [a, b]; i += 1; j += 2
        else:
            out.append(v); i += 1
        j += 1
    if infer is not None:
        out[infer] = int(np.prod(src)) // int(np.prod(out))
    return tuple(out)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def rnn(x, flat, h0, c0, mode, hidden, layers, bidir):
    gates = {"lstm": 4, "gru": 3, "rnn_relu": 1, "rnn_tanh": 1}[mode]
    dirs = 2 if bidir else 1
    g = gates * hidden
    pos = 0

    def take(shape):
        nonlocal pos
        size = int(np.prod(shape))
        out = flat[pos:pos + size].reshape(shape)
        pos += size
        return out

    w = []
    for layer in range(layers):
        in_l = x.shape[2] if layer == 0 else hidden * dirs
        for _ in range(dirs):
            w.append((take((g, in_l)), take((g, hidden))))
    b = [(take((g,)), take((g,))) for _ in range(layers * dirs)]
    assert pos == flat.size, "parameter vector size mismatch"
    seq = x
    hn, cn = [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            (wx, wh), (bx, bh) = w[k], b[k]
            h = h0[k]
            c = c0[k] if c0 is not None else None
            ys = [None] * seq.shape[0]
            for t in (range(seq.shape[0] - 1, -1, -1) if d else range(seq.shape[0])):
                xi = seq[t] @ wx.T + bx
                hh = h @ wh.T + bh
                if mode == "lstm":
                    i, f, gg, o = np.split(xi + hh, 4, axis=1)
                    c = sigmoid(f) * c + sigmoid(i) * np.tanh(gg)
                    h = sigmoid(o) * np.tanh(c)
                elif mode == "gru":
                    xr, xz, xn = np.split(xi, 3, axis=1)
                    hr, hz, hn_ = np.split(hh, 3, axis=1)
                    r, z = sigmoid(xr + hr), sigmoid(xz + hz)
                    nn = np.tanh(xn + r * hn_)
                    h = (1 - z) * nn + z * h
                else:
                    pre = xi + hh
                    h = np.maximum(pre, 0) if mode == "rnn_relu" else np.tanh(pre)
                ys[t] = h
            hn.append(h)
            cn.append(c)
            outs.append(np.stack(ys))
        seq = np.concatenate(outs, axis=2)
    return seq, np.stack(hn), (np.stack(cn) if c0 is not None else None)


def run(symbol, inputs: dict, params: dict):
    """Evaluate the graph in float64; returns the list of head values."""
    d = json.load(open(symbol)) if isinstance(symbol, str) else symbol
    nodes = d["nodes"]
    vals: list[list] = []
    for node in nodes:
        op, attrs = node["op"], node.get("attrs", {})
        ins = [vals[i][o] for i, o, *_ in node["inputs"]]
        if op == "null":
            name = node["name"]
            vals.append([np.asarray(inputs[name] if name in inputs else params.get(name), dtype=np.float64)
                         if (name in inputs or name in params) else None])
            continue
        x = ins[0] if ins else None
        if op == "Convolution":
            k = _tup(attrs, "kernel", None)
            y = conv2d(x, ins[1], _tup(attrs, "stride", (1, 1)), _tup(attrs, "pad", (0, 0)),
                       _tup(attrs, "dilate", (1, 1)), int(attrs.get("num_group", 1)))
            assert y.shape[1] == int(attrs["num_filter"]) and ins[1].shape[2:] == k
            if not _b(attrs, "no_bias", False):
                y = y + ins[2][None, :, None, None]
            out = [y]
        elif op == "BatchNorm":
            gamma = np.ones_like(ins[2]) if _b(attrs, "fix_gamma", True) else ins[1]
            eps = float(attrs.get("eps", 1e-3))
            shp = [1] * x.ndim
            shp[int(attrs.get("axis", 1))] = -1
            y = (x - ins[3].reshape(shp)) / np.sqrt(ins[4].reshape(shp) + eps) * gamma.reshape(shp) \
                + ins[2].reshape(shp)
            out = [y, None, None]
        elif op in ("Activation", "relu"):
            act = attrs.get("act_type", "relu")
            out = [{"relu": lambda v: np.maximum(v, 0), "sigmoid": sigmoid, "tanh": np.tanh,
                    "softrelu": lambda v: np.where(v > 20, v, np.log1p(np.exp(np.minimum(v, 20)))),
                    "softsign": lambda v: v / (1 + np.abs(v))}[act](x)]
        elif op == "LeakyReLU":
            act, slope = attrs.get("act_type", "leaky"), float(attrs.get("slope", 0.25))
            if act == "leaky":
                y = np.where(x > 0, x, slope * x)
            elif act == "elu":
                y = np.where(x > 0, x, slope * (np.exp(x) - 1))
            elif act == "selu":
                y = 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1))
            elif act == "gelu":
                y = 0.5 * x * (1 + erf(x / np.sqrt(2)))
            else:  # prelu
                g = ins[1].reshape((1, -1) + (1,) * (x.ndim - 2)) if ins[1].size > 1 else ins[1]
                y = np.where(x > 0, x, g * x)
            out = [y]
        elif op == "Pooling":
            kind = attrs.get("pool_type", "max")
            if _b(attrs, "global_pool", False):
                y = x.max(axis=(2, 3), keepdims=True) if kind == "max" else x.mean(axis=(2, 3), keepdims=True)
            else:
                y = pool2d(x, kind, _tup(attrs, "kernel", None), _tup(attrs, "stride", (1, 1)),
                           _tup(attrs, "pad", (0, 0)), attrs.get("pooling_convention", "valid") == "full",
                           _b(attrs, "count_include_pad", True))
            out = [y]
        elif op == "FullyConnected":
            if _b(attrs, "flatten", True):
                x = x.reshape(x.shape[0], -1)
            y = x @ ins[1].T
            if not _b(attrs, "no_bias", False):
                y = y + ins[2]
            out = [y]
        elif op == "Flatten":
            out = [x.reshape(x.shape[0], -1)]
        elif op == "Reshape":
            out = [x.reshape(reshape_shape(_tup(attrs, "shape", None), x.shape))]
        elif op in ("Concat", "_rnn_param_concat"):
            out = [np.concatenate(ins, axis=int(attrs.get("dim", 1)))]
        elif op == "transpose":
            axes = _tup(attrs, "axes", None)
            out = [np.transpose(x, axes)]
        elif op == "SwapAxis":
            out = [np.swapaxes(x, int(attrs.get("dim1", 0)), int(attrs.get("dim2", 0)))]
        elif op in ("softmax", "SoftmaxOutput"):
            axis = int(attrs.get("axis", -1))
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            out = [e / e.sum(axis=axis, keepdims=True)]
        elif op == "Dropout":
            out = [x, None]
        elif op == "Embedding":
            out = [ins[1][x.astype(np.int64)]]
        elif op == "LayerNorm":
            axis = int(attrs.get("axis", -1))
            eps = float(attrs.get("eps", 1e-5))
            mu, var = x.mean(axis=axis, keepdims=True), x.var(axis=axis, keepdims=True)
            out = [(x - mu) / np.sqrt(var + eps) * ins[1] + ins[2]]
        elif op == "batch_dot":
            a, b = ins
            if _b(attrs, "transpose_a", False):
                a = np.swapaxes(a, -1, -2)
            if _b(attrs, "transpose_b", False):
                b = np.swapaxes(b, -1, -2)
            out = [a @ b]
        elif op in ("elemwise_add", "broadcast_add"):
            out = [ins[0] + ins[1]]
        elif op == "_div_scalar":
            out = [x / float(attrs["scalar"])]
        elif op == "clip":
            out = [np.clip(x, float(attrs["a_min"]), float(attrs["a_max"]))]
        elif op == "_zeros":
            out = [("zeros", _tup(attrs, "shape", None))]
        elif op == "RNN":
            mode, hidden = attrs["mode"], int(attrs["state_size"])
            layers, bidir = int(attrs.get("num_layers", 1)), _b(attrs, "bidirectional", False)
            t, n, _ = x.shape
            state = (layers * (2 if bidir else 1), n, hidden)

            def fill(v):
                return np.zeros(state) if isinstance(v, tuple) else v
            y, hn, cn = rnn(x, ins[1], fill(ins[2]), fill(ins[3]) if mode == "lstm" else None,
                            mode, hidden, layers, bidir)
            out = [y, hn] + ([cn] if mode == "lstm" else [])
        else:
            raise NotImplementedError(f"numpy reference has no {op}")
        vals.append(out)
    return [vals[i][o] for i, o, *_ in d["heads"]]


def random_inputs(symbol, params_shapes: dict, seed: int = 0):
    """Random float params in [-0.5, 0.5) (running variances in [0.5, 1.5)) for the given shapes."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in params_shapes.items():
        if name.endswith("_var"):
            out[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        else:
            out[name] = rng.uniform(-0.5, 0.5, shape).astype(np.float32)
    return out
