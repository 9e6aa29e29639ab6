"""Tape: a CNN training step written as MXNet would run it, kernel by kernel, with its backward derived.

    tp = Tape("name")
    x = tp.input("data", (N, 3, 32, 32))
    y = tp.relu(tp.batch_norm(tp.conv(x, 16, 3, "c1", pad=1), "c1.bn"))
    loss = tp.softmax_cross_entropy(tp.dense(tp.global_avg_pool(y), 10, "fc"), tp.input("labels", (N,), "int64"))
    g = tp.finish(loss)          # forward, backward (reverse order), momentum updates: a DataflowGraph

Granularity is MXNet's (the paper's framework): one kernel per layer forward and one per layer backward
producing every input gradient at once (_backward_Convolution gives dx and dW; _backward_BatchNorm dx,
dgamma, dbeta), BatchNorm as one kernel each way (it outputs the batch mean and inverse std for its
backward), gradient contributions to one tensor summed by one ElementWiseSum kernel, an elementwise add's
backward passing its output gradient to both inputs without a kernel, and one sgd_mom_update kernel per
weight right after its gradient is complete. float32 throughout; no TVM.
"""
from __future__ import annotations

import math

from ...graph import DataflowGraph
from ..llm.builder import GraphBuilder

F32 = "float32"
MOMENTUM_FLOPS = 4          # v' = mu v + g; p' = p - lr v' (per element)


def _numel(shape) -> int:
    return math.prod(int(s) for s in shape)


def conv_out(h: int, k: int, stride: int, pad: int) -> int:
    return (h + 2 * pad - k) // stride + 1


class Tape:
    def __init__(self, name: str):
        self.b = GraphBuilder(name)
        self._backward: list[tuple[int, object]] = []      # (forward output, rule(dy)), in forward order
        self._grads: dict[int, list[int]] = {}              # tensor -> gradient contributions so far
        self._uses: dict[int, int] = {}                     # param -> forward uses (its grads to wait for)
        self._states: dict[int, int] = {}                   # param -> momentum state
        self._updates: dict[int, int] = {}
        self._outputs: list[int] = []
        self._no_grad: set[int] = set()

    # ---- tensors ----
    def shape(self, t: int) -> tuple:
        return self.b.tensors[t].shape

    def input(self, name: str, shape, dtype: str = F32) -> int:
        t = self.b.tensor(name, shape, dtype, "input")
        self._no_grad.add(t)
        return t

    def param(self, name: str, shape) -> int:
        p = self.b.tensor(name, shape, F32, "param")
        self._states[p] = self.b.tensor(name + ".momentum", shape, F32, "optimizer_state")
        self._uses[p] = 0
        return p

    def _op(self, kernel, inputs, outputs, flops, backward=None) -> list[int]:
        for t in inputs:
            if t in self._uses:
                self._uses[t] += 1
        ids = self.b.op(kernel, inputs, [o if len(o) > 2 else (o[0], o[1], F32) for o in outputs], flops=flops)
        if backward is not None:
            self._backward.append((ids[0], backward))
        return ids

    def _grad_out(self, kernel, inputs, wrt, flops) -> list[int]:
        """One backward kernel giving the gradients of `wrt` (tensors; None entries are skipped)."""
        want = [t for t in wrt if t is not None]
        outs = [(self.b.tensors[t].name + ".grad", self.shape(t), F32, "gradient") for t in want]
        ids = self.b.op(kernel, inputs, outs, flops=flops)
        for t, g in zip(want, ids):
            self._contribute(t, g)
        return ids

    def _contribute(self, t: int, g: int) -> None:
        if t in self._no_grad:
            return
        self._grads.setdefault(t, []).append(g)
        if t in self._uses and len(self._grads[t]) == self._uses[t]:
            self._update(t, self._sum(t))

    def _needs(self, t: int):
        return None if t in self._no_grad else t

    def _sum(self, t: int) -> int:
        gs = self._grads[t]
        if len(gs) == 1:
            return gs[0]
        (s,) = self.b.op("elementwise_sum", gs, [(self.b.tensors[t].name + ".grad_sum", self.shape(t), F32,
                                                  "gradient")], flops=(len(gs) - 1) * _numel(self.shape(t)))
        return s

    def _update(self, p: int, g: int) -> None:
        v = self._states[p]
        name, shape = self.b.tensors[p].name, self.shape(p)
        new_p, new_v = self.b.op("sgd_mom_update", [p, v, g],
                                 [(name + "_new", shape, F32, "param"), (name + ".momentum_new", shape, F32,
                                                                         "optimizer_state")],
                                 flops=MOMENTUM_FLOPS * _numel(shape))
        self._updates[new_p], self._updates[new_v] = p, v
        self._outputs += [new_p, new_v]

    # ---- layers ----
    def conv(self, x: int, out_ch: int, k: int, name: str, stride: int = 1, pad: int = 0, groups: int = 1) -> int:
        n, c, h, w = self.shape(x)
        wt = self.param(name + ".weight", (out_ch, c // groups, k, k))
        ho, wo = conv_out(h, k, stride, pad), conv_out(w, k, stride, pad)
        flops = 2 * n * out_ch * ho * wo * (c // groups) * k * k
        kernel = "depthwise_conv" if groups > 1 else "conv"

        def bwd(dy):
            self._grad_out(f"{kernel}_backward", [dy, x, wt], [self._needs(x), wt], 2 * flops)
        (y,) = self._op(kernel, [x, wt], [(name + ".out", (n, out_ch, ho, wo))], flops, bwd)
        return y

    def depthwise_conv(self, x: int, k: int, name: str, stride: int = 1) -> int:
        return self.conv(x, self.shape(x)[1], k, name, stride, k // 2, groups=self.shape(x)[1])

    def batch_norm(self, x: int, name: str) -> int:
        c = self.shape(x)[1]
        gamma, beta = self.param(name + ".gamma", (c,)), self.param(name + ".beta", (c,))
        size = _numel(self.shape(x))

        def bwd(dy):
            self._grad_out("batch_norm_backward", [dy, x, gamma, mean, inv_std], [self._needs(x), gamma, beta],
                           8 * size)
        y, mean, inv_std = self._op("batch_norm", [x, gamma, beta],
                                    [(name + ".out", self.shape(x)), (name + ".mean", (c,)),
                                     (name + ".inv_std", (c,))], 8 * size, bwd)
        return y

    def relu(self, x: int) -> int:
        name = self.b.tensors[x].name

        def bwd(dy):
            self._grad_out("relu_backward", [dy, y], [self._needs(x)], _numel(self.shape(x)))
        (y,) = self._op("relu", [x], [(name + ".relu", self.shape(x))], _numel(self.shape(x)), bwd)
        return y

    def pool(self, x: int, kind: str, k: int = 3, stride: int = 1, pad: int = 1) -> int:
        n, c, h, w = self.shape(x)
        shape = (n, c, conv_out(h, k, stride, pad), conv_out(w, k, stride, pad))
        flops = _numel(shape) * k * k

        def bwd(dy):
            self._grad_out(f"{kind}_pool_backward", [dy, x, y] if kind == "max" else [dy], [self._needs(x)], flops)
        (y,) = self._op(f"{kind}_pool", [x], [(self.b.tensors[x].name + f".{kind}pool", shape)], flops, bwd)
        return y

    def add(self, a: int, b: int) -> int:
        def bwd(dy):                      # the output gradient is each input's: no kernel
            self._contribute(a, dy)
            self._contribute(b, dy)
        (y,) = self._op("add", [a, b], [(self.b.tensors[a].name + ".add", self.shape(a))], _numel(self.shape(a)),
                        bwd)
        return y

    def concat(self, xs: list[int]) -> int:
        n, _, h, w = self.shape(xs[0])
        shape = (n, sum(self.shape(x)[1] for x in xs), h, w)

        def bwd(dy):
            self._grad_out("concat_backward", [dy], [self._needs(x) for x in xs], 0)
        (y,) = self._op("concat", xs, [(self.b.tensors[xs[0]].name + ".concat", shape)], 0, bwd)
        return y

    def global_avg_pool(self, x: int) -> int:
        n, c, h, w = self.shape(x)

        def bwd(dy):
            self._grad_out("global_avg_pool_backward", [dy], [self._needs(x)], _numel(self.shape(x)))
        (y,) = self._op("global_avg_pool", [x], [("gap.out", (n, c))], _numel(self.shape(x)), bwd)
        return y

    def dense(self, x: int, out: int, name: str) -> int:
        n, c = self.shape(x)
        wt, bias = self.param(name + ".weight", (out, c)), self.param(name + ".bias", (out,))

        def bwd(dy):
            self._grad_out("fully_connected_backward", [dy, x, wt], [self._needs(x), wt, bias], 4 * n * c * out)
        (y,) = self._op("fully_connected", [x, wt, bias], [(name + ".out", (n, out))], 2 * n * c * out, bwd)
        return y

    def softmax_cross_entropy(self, logits: int, labels: int) -> int:
        n, k = self.shape(logits)

        def bwd(_):
            self._grad_out("softmax_output_backward", [prob, labels], [logits], 2 * n * k)
        loss, prob = self._op("softmax_output", [logits, labels], [("loss", (), F32, "output"), ("prob", (n, k))],
                              4 * n * k, bwd)
        return loss

    # ---- the step ----
    def finish(self, loss: int, meta: dict) -> DataflowGraph:
        """Append the backward pass (reverse forward order) and the updates; the graph, validated."""
        self._grads[loss] = [loss]        # the loss's own seed: the softmax backward reads only prob/labels
        for y, rule in reversed(self._backward):
            gs = self._grads.get(y)
            if gs:
                rule(self._sum(y))
        missing = [self.b.tensors[p].name for p, n in self._uses.items() if len(self._grads.get(p, [])) != n]
        if missing:
            raise AssertionError(f"tape bug: no complete gradient for {missing[:5]}")
        return self.b.graph([loss, *self._outputs], self._updates, meta)
