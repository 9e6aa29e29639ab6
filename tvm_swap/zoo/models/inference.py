"""Inference graphs: one forward pass, no loss, no backward, no optimizer (the paper's Table 2 workload).

    mod = forward_module(resnet_forward(152)(batch))     # IRModule with one `forward`

`forward(inputs..., params...) -> logits`. Batch norm is the inference form (per-channel scale and shift,
what a deployed model keeps after folding its running statistics), so weights are the only params and
nothing is updated: the graph has params (host-resident, swapped in as needed), one input and one output.
"""
from __future__ import annotations

from tvm import relax
from tvm.relax import op as R

from .net import Net
from .wresnet import RESNET152_BLOCKS, _bottleneck

FORWARD_FUNC = "forward"
RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: RESNET152_BLOCKS}


class InferenceNet(Net):
    """Net with inference-mode batch norm: y = x * scale + shift, per channel."""

    def batch_norm(self, x, name: str, eps: float = 1e-5):
        c = x.ty.shape.values[1]
        scale = self.param(f"{name}.scale", (1, int(c), 1, 1))
        shift = self.param(f"{name}.shift", (1, int(c), 1, 1))
        return self.emit(R.add(R.multiply(x, scale), shift))


def forward_module(build_forward, dtype: str = "float32"):
    """The IRModule of `build_forward(net) -> output` as one function `forward` (num_input attr set)."""
    bb = relax.BlockBuilder()
    net = InferenceNet(bb, dtype)
    with bb.function(FORWARD_FUNC):
        with bb.dataflow():
            out = bb.emit_output(build_forward(net))
        bb.emit_func_output(out, params=net.inputs + net.params)
    mod = bb.get()
    func = mod[FORWARD_FUNC].with_attr("num_input", len(net.inputs))
    mod[FORWARD_FUNC] = func
    relax.analysis.well_formed(mod)
    return mod


def resnet_forward(depth: int = 152, width: int = 1, image: int = 224, classes: int = 1000):
    """ResNet-`depth` v1.5 forward to logits (width 1: the standard ResNet; see wresnet.py)."""
    if depth not in RESNET_BLOCKS:
        raise ValueError(f"ResNet depth must be one of {sorted(RESNET_BLOCKS)}, got {depth}")
    blocks = RESNET_BLOCKS[depth]

    def build(batch: int):
        def build_forward(net: Net):
            x = net.input("data", (batch, 3, image, image))
            y = net.conv_bn(x, 64, 7, "stem", stride=2, padding=3)
            y = net.max_pool(y, 3, 2, 1)
            for stage, n in enumerate(blocks):
                inner, out = 64 * width * 2 ** stage, 256 * 2 ** stage
                for i in range(n):
                    stride = 2 if stage > 0 and i == 0 else 1
                    y = _bottleneck(net, y, inner, out, stride, f"s{stage + 1}.b{i}", project=(i == 0))
            return net.dense(net.global_avg_pool(y), classes, "fc")

        return build_forward

    return build
