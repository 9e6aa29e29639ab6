"""Write the MXNet symbol JSON files in this folder: small Gluon-style architectures from their published
structure, with the node names, attribute strings and variable attributes Gluon 1.9's `export` writes.

    python tests/data/mxnet/make_symbols.py     # rewrites *-symbol.json here

No MXNet needed: a tiny builder emits the NNVM graph JSON directly. The tests check the importer on
these files against a float64 numpy reference.
"""
from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


class SymbolBuilder:
    """Appends nodes in topological order; `var` and `op` return [node, output] entries."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.nodes: list[dict] = []
        self.n_outputs: list[int] = []
        self.counts: dict[str, int] = {}

    def _add(self, node: dict, n_out: int) -> int:
        self.nodes.append(node)
        self.n_outputs.append(n_out)
        return len(self.nodes) - 1

    def data(self, name: str = "data"):
        return [self._add({"op": "null", "name": name, "inputs": []}, 1), 0]

    def var(self, name: str, shape: tuple | None = None, init: str | None = None):
        attrs = {"__dtype__": "0", "__lr_mult__": "1.0", "__storage_type__": "0", "__wd_mult__": "1.0"}
        if shape is not None:
            attrs["__shape__"] = str(tuple(shape))
        if init:
            attrs["__init__"] = init
        return [self._add({"op": "null", "name": self.prefix + name, "attrs": dict(sorted(attrs.items())),
                           "inputs": []}, 1), 0]

    def op(self, op: str, name: str, inputs, n_out: int = 1, **attrs):
        node = {"op": op, "name": self.prefix + name, "inputs": [[e[0], e[1], 0] for e in inputs]}
        if attrs:
            node["attrs"] = {k: str(v) for k, v in sorted(attrs.items())}
        idx = self._add(node, n_out)
        return [[idx, i] for i in range(n_out)] if n_out > 1 else [idx, 0]

    def uid(self, kind: str) -> str:
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + 1
        return f"{kind}{n}"

    # ---- Gluon layers, exported as Gluon 1.9 writes them ----------------------------------------------
    def conv(self, x, cin, cout, kernel, stride=(1, 1), pad=(0, 0), dilate=(1, 1), groups=1, bias=False):
        name = self.uid("conv")
        w = self.var(f"{name}_weight", (cout, cin // groups) + tuple(kernel))
        ins = [x, w] + ([self.var(f"{name}_bias", (cout,), "zeros")] if bias else [])
        return self.op("Convolution", f"{name}_fwd", ins, dilate=tuple(dilate), kernel=tuple(kernel),
                       layout="NCHW", no_bias=not bias, num_filter=cout, num_group=groups,
                       pad=tuple(pad), stride=tuple(stride))

    def bn(self, x, c, gluon=True, **override):
        name = self.uid("batchnorm")
        ins = [x, self.var(f"{name}_gamma", (c,), "ones"), self.var(f"{name}_beta", (c,), "zeros"),
               self.var(f"{name}_running_mean", (c,), "zeros"), self.var(f"{name}_running_var", (c,), "ones")]
        # Gluon writes every attribute; the symbol API writes only what was given (defaults then apply).
        attrs = dict(axis=1, eps=1e-05, fix_gamma=False, momentum=0.9, use_global_stats=False) if gluon else {}
        attrs.update(override)
        node = self.op("BatchNorm", f"{name}_fwd", ins, n_out=3, **attrs)
        for aux in (3, 4):  # running stats are aux states: MXNet writes version 1 in their entries
            self.nodes[node[0][0]]["inputs"][aux][2] = 1
        return node[0]

    def act(self, x, act_type="relu"):
        return self.op("Activation", f"{self.uid(act_type)}_fwd", [x], act_type=act_type)

    def relu6(self, x):  # Gluon's RELU6 is F.clip(x, 0, 6)
        return self.op("clip", f"{self.uid('relu6')}_clip0", [x], a_max=6.0, a_min=0.0)

    def pool(self, x, pool_type, kernel, stride, pad=(0, 0), convention="valid", global_pool=False,
             count_include_pad=None):
        attrs = dict(global_pool=global_pool, kernel=tuple(kernel), layout="NCHW", pad=tuple(pad),
                     pool_type=pool_type, pooling_convention=convention, stride=tuple(stride))
        if count_include_pad is not None:
            attrs["count_include_pad"] = count_include_pad
        return self.op("Pooling", f"{self.uid('pool')}_fwd", [x], **attrs)

    def dense(self, x, cin, cout, flatten=True, bias=True):
        name = self.uid("dense")
        ins = [x, self.var(f"{name}_weight", (cout, cin))] + (
            [self.var(f"{name}_bias", (cout,), "zeros")] if bias else [])
        return self.op("FullyConnected", f"{name}_fwd", ins, flatten=flatten, no_bias=not bias, num_hidden=cout)

    def rnn(self, x, mode, input_size, hidden, layers, bidirectional, begin_batch_infer=True):
        """Gluon rnn.LSTM/GRU/RNN: reshape(-1) every weight, _rnn_param_concat, zero begin states, fused RNN."""
        name = self.uid(mode.replace("rnn_", "rnn"))
        gates = {"lstm": 4, "gru": 3, "rnn_relu": 1, "rnn_tanh": 1}[mode] * hidden
        dirs = ["l", "r"] if bidirectional else ["l"]
        weights, biases = [], []
        for layer in range(layers):
            in_l = input_size if layer == 0 else hidden * len(dirs)
            for d in dirs:
                weights += [(f"{d}{layer}_i2h_weight", (gates, in_l)), (f"{d}{layer}_h2h_weight", (gates, hidden))]
                biases += [(f"{d}{layer}_i2h_bias", (gates,)), (f"{d}{layer}_h2h_bias", (gates,))]
        flat = []
        for i, (pname, shape) in enumerate(weights + biases):
            v = self.var(f"{name}_{pname}", shape, "zeros" if "bias" in pname else None)
            flat.append(self.op("Reshape", f"{name}_reshape{i}", [v], shape=-1))
        params = self.op("_rnn_param_concat", f"{name}__rnn_param_concat0", flat, dim=0, num_args=len(flat))
        state = (layers * len(dirs), 0 if begin_batch_infer else 1, hidden)
        states = [self.op("_zeros", f"{self.prefix}{name}_h0_{i}", [], __layout__="LNC", dtype="float32",
                          shape=state) for i in range(2 if mode == "lstm" else 1)]
        n_out = 3 if mode == "lstm" else 2
        return self.op("RNN", f"{name}_rnn0", [x, params] + states, n_out=n_out, bidirectional=bidirectional,
                       lstm_state_clip_max=None, lstm_state_clip_min=None, lstm_state_clip_nan=False,
                       mode=mode, num_layers=layers, p=0.0, projection_size=None, state_outputs=True,
                       state_size=hidden, use_sequence_length=False)

    def to_json(self, heads) -> dict:
        row, acc = [0], 0
        for n in self.n_outputs:
            acc += n
            row.append(acc)
        return {"nodes": self.nodes,
                "arg_nodes": [i for i, n in enumerate(self.nodes) if n["op"] == "null"],
                "node_row_ptr": row,
                "heads": [[h[0], h[1], 0] for h in heads],
                "attrs": {"mxnet_version": ["int", 10901]}}


def mobilenet_block():
    """MobileNet v1 stem + depthwise-separable block, a MobileNet v2 inverted residual (relu6 = clip),
    a strided dilated depthwise conv, global average pooling and the classifier."""
    b = SymbolBuilder("mobilenet0_")
    x = b.data()
    x = b.act(b.bn(b.conv(x, 3, 8, (3, 3), (2, 2), (1, 1)), 8))
    x = b.act(b.bn(b.conv(x, 8, 8, (3, 3), (1, 1), (1, 1), groups=8), 8))           # depthwise
    x = b.act(b.bn(b.conv(x, 8, 16, (1, 1)), 16))                                    # pointwise
    y = b.relu6(b.bn(b.conv(x, 16, 32, (1, 1)), 32))                                 # expand x2
    y = b.relu6(b.bn(b.conv(y, 32, 32, (3, 3), (1, 1), (1, 1), groups=32), 32))
    y = b.bn(b.conv(y, 32, 16, (1, 1)), 16)                                          # linear bottleneck
    x = b.op("elemwise_add", "add0", [x, y])
    x = b.act(b.bn(b.conv(x, 16, 16, (3, 3), (2, 2), (2, 2), (2, 2), groups=16), 16))
    x = b.pool(x, "avg", (1, 1), (1, 1), global_pool=True)
    x = b.op("Flatten", "flatten0", [x])
    x = b.dense(x, 16, 10)
    return b.to_json([x]), {"data": (2, 3, 16, 16)}


def inception_block():
    """Inception v3 A-style block (1x1; 1x1-5x5; 1x1-(1,7)-(7,1); avg pool 3x3 count_include_pad -> 1x1),
    concat, then SqueezeNet-style 'full' pooling and both avg-pool padding conventions, with symbol-API
    BatchNorm defaults on one branch and use_global_stats on another."""
    b = SymbolBuilder("inception0_")
    x = b.data()
    b1 = b.act(b.bn(b.conv(x, 8, 4, (1, 1)), 4))
    b2 = b.act(b.bn(b.conv(x, 8, 4, (1, 1)), 4, gluon=False))                       # fix_gamma, eps defaults
    b2 = b.act(b.bn(b.conv(b2, 4, 6, (5, 5), pad=(2, 2)), 6), "softrelu")
    b3 = b.act(b.bn(b.conv(x, 8, 4, (1, 1)), 4, use_global_stats=True))
    b3 = b.act(b.bn(b.conv(b3, 4, 4, (1, 7), pad=(0, 3)), 4))
    b3 = b.act(b.bn(b.conv(b3, 4, 6, (7, 1), pad=(3, 0)), 6))
    b4 = b.pool(x, "avg", (3, 3), (1, 1), (1, 1), count_include_pad=True)
    b4 = b.act(b.conv(b4, 8, 4, (1, 1), bias=True))
    cat = b.op("Concat", "concat0", [b1, b2, b3, b4], dim=1, num_args=4)
    m = b.pool(cat, "max", (3, 3), (2, 2), convention="full")                        # 16 -> 8 (valid: 7)
    m = b.pool(m, "avg", (1, 1), (1, 1), convention="full", global_pool=True)
    logits = b.dense(b.op("Flatten", "flatten0", [m]), 20, 5)
    excl = b.pool(cat, "avg", (3, 3), (2, 2), (1, 1), "full", count_include_pad=False)  # 16 -> 9
    incl = b.pool(cat, "avg", (3, 3), (2, 2), (1, 1), "full", count_include_pad=True)
    return b.to_json([logits, excl, incl]), {"data": (2, 8, 16, 16)}


def gru_lm():
    """Embedding -> 2-layer gluon.rnn.GRU (TNC) -> Dense(flatten=False); the final hidden state is a 2nd output."""
    b = SymbolBuilder("grulm0_")
    x = b.data()
    emb = b.op("Embedding", "embedding0_fwd", [x, b.var("embedding0_weight", (20, 8))], dtype="float32",
               input_dim=20, output_dim=8, sparse_grad=False)
    outs = b.rnn(emb, "gru", 8, 6, 2, False)
    logits = b.dense(outs[0], 6, 20, flatten=False)
    return b.to_json([logits, outs[1]]), {"data": (5, 3)}


def bilstm():
    """2-layer bidirectional gluon.rnn.LSTM with layout NTC (exported with SwapAxis around the fused op);
    outputs the sequence and both final states."""
    b = SymbolBuilder("bilstm0_")
    x = b.data()
    tnc = b.op("SwapAxis", "swapaxes0", [x], dim1=0, dim2=1)
    outs = b.rnn(tnc, "lstm", 5, 4, 2, True)
    ntc = b.op("SwapAxis", "swapaxes1", [outs[0]], dim1=0, dim2=1)
    return b.to_json([ntc, outs[1], outs[2]]), {"data": (3, 4, 5)}


def rnn_flat_params():
    """Symbol-API vanilla RNNs: one flat `parameters` variable each (no __shape__), explicit zero states;
    a bidirectional tanh layer feeding a 2-layer relu RNN."""
    b = SymbolBuilder("")
    x = b.data()
    p1 = [b._add({"op": "null", "name": "rnn1_parameters", "inputs": []}, 1), 0]
    s1 = b.op("_zeros", "rnn1_begin_state", [], shape=(2, 3, 4))
    r1 = b.op("RNN", "rnn1", [x, p1, s1], mode="rnn_tanh", state_size=4, num_layers=1, bidirectional=True)
    p2 = [b._add({"op": "null", "name": "rnn2_parameters", "inputs": []}, 1), 0]
    s2 = b.op("_zeros", "rnn2_begin_state", [], shape=(2, 0, 3))
    r2 = b.op("RNN", "rnn2", [r1, p2, s2], n_out=2, mode="rnn_relu", state_size=3, num_layers=2,
              state_outputs=True)
    return b.to_json([r2[0], r2[1]]), {"data": (4, 3, 2)}


MODELS = {"mobilenet_block": mobilenet_block, "inception_block": inception_block, "gru_lm": gru_lm,
          "bilstm": bilstm, "rnn_flat_params": rnn_flat_params}


def main():
    for name, fn in MODELS.items():
        sym, shapes = fn()
        with open(os.path.join(HERE, f"{name}-symbol.json"), "w") as f:
            json.dump(sym, f, indent=1)
            f.write("\n")
        with open(os.path.join(HERE, f"{name}.input.json"), "w") as f:
            json.dump({"model": name, "inputs": [{"name": k, "shape": list(v), "dtype": "float32"}
                                                 for k, v in shapes.items()]}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
