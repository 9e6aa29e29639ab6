"""The zoo's models as Relax training steps (imports TVM; only scripts/gen_zoo.py uses this).

    mod = training_module("bert-large", batch=32)     # IRModule with one `train_step`
    mod = training_module("resnet-152-inference", 1)   # inference models: one `forward` (entry_function)

`MODELS[name]` says how each zoo graph is made: the model builder (batch -> build_loss), the
optimizer, and the FuseOps depth used when lowering (RNN training graphs get a small one, see
notes/real-models.md G6: unlimited fusion of the weight-gradient accumulation chains keeps every
per-step partial alive).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import ZOO
from .bert import bert
from .inception import inception_v4
from .inference import FORWARD_FUNC, forward_module, resnet_forward
from .lstm import lstm_lm
from .nasnet import nasnet_a
from .training import TRAIN_FUNC, train_step_module
from .wresnet import wide_resnet


@dataclass(frozen=True)
class ModelSpec:
    builder: object                 # (**config) -> (batch -> build_loss)
    optimizer: str = "momentum"
    fuse_max_depth: int | None = None
    extra: dict = field(default_factory=dict)   # config beyond ZOO[name]["config"]
    inference: bool = False         # builder gives build_forward (forward only), not build_loss


# The sizes come from ZOO[name]["config"] (the loader's descriptions), so the two cannot drift apart.
MODELS = {
    "wresnet-152-10": ModelSpec(wide_resnet),
    "inception-4": ModelSpec(inception_v4),
    "rnn-8-8k": ModelSpec(lstm_lm, fuse_max_depth=4, extra=dict(bidirectional=False)),
    "brnn-4-8k": ModelSpec(lstm_lm, fuse_max_depth=4, extra=dict(bidirectional=True)),
    "bert-large": ModelSpec(bert, optimizer="adam"),
    "nasnet-25": ModelSpec(nasnet_a),
    "wresnet-152-4": ModelSpec(wide_resnet),
    "resnet-152-inference": ModelSpec(resnet_forward, inference=True),
}


def model_config(name: str) -> dict:
    if name not in MODELS:
        raise KeyError(f"unknown zoo model {name!r}; models: {', '.join(MODELS)}")
    return {**ZOO[name]["config"], **MODELS[name].extra}


def training_module(name: str, batch: int, **overrides):
    """The train_step IRModule of zoo model `name` at `batch`; `overrides` replace config entries."""
    config = {**model_config(name), **overrides}
    spec = MODELS[name]
    if spec.inference:
        return forward_module(spec.builder(**config)(batch))
    return train_step_module(spec.builder(**config)(batch), optimizer=spec.optimizer)


def entry_function(name: str) -> str:
    """The Relax function that holds zoo model `name`'s graph."""
    return FORWARD_FUNC if MODELS[name].inference else TRAIN_FUNC
