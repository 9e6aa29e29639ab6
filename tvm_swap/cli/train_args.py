"""`tvm-swap compile MODEL`: the flags that say what to build from a model file (`--init`, `--train` and its
options) and the preparation they ask for, before anything is lowered: params initialised from shapes,
missing params refused at once, the forward pass turned into one training step (tvm_swap.training)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from ..errors import TvmSwapError


# tvm_swap.training's names, repeated so building the parser needs no TVM (a test holds them equal)
LOSSES = ("cross_entropy", "mse", "output")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")


def add_model_build_args(p: argparse.ArgumentParser) -> None:
    from ..frontends.init_params import INIT_KINDS

    p.add_argument("--init", choices=INIT_KINDS, default=None,
                   help="give every parameter without a value one made from its shape (seeded by --seed): "
                        "for sizing and benchmarking an architecture; the library records the weights are not "
                        "trained")
    p.add_argument("--train", action="store_true",
                   help="compile one training step (forward, loss, backward, optimizer) instead of the forward "
                        "pass; `tvm-swap run` then chains steps and reports the loss per step")
    p.add_argument("--loss", choices=LOSSES, default="cross_entropy",
                   help="with --train (default cross_entropy); output: the model's first output is its own loss "
                        "(a model called with labels=), no labels input is added")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd", help="with --train (default sgd)")
    p.add_argument("--lr", type=float, default=0.01, metavar="X", help="with --train: learning rate (default 0.01)")
    p.add_argument("--label", default=None, metavar="NAME=D1,D2,...",
                   help="with --train: the labels input's name and shape (default labels, shaped by the loss)")


@dataclass(frozen=True)
class TrainOptions:
    loss: str = "cross_entropy"
    optimizer: str = "sgd"
    lr: float = 0.01
    label_name: str = "labels"
    label_shape: tuple | None = None


def train_options(args) -> TrainOptions | None:
    """TrainOptions from the parsed flags (None without --train); training flags without --train are an error."""
    if not getattr(args, "train", False):
        given = [f for f, v, d in (("--loss", args.loss, "cross_entropy"), ("--optimizer", args.optimizer, "sgd"),
                                   ("--lr", args.lr, 0.01), ("--label", args.label, None)) if v != d]
        if given:
            raise TvmSwapError(f"{', '.join(given)} only apply with --train")
        return None
    if args.lr <= 0:
        raise TvmSwapError(f"--lr must be positive, got {args.lr}")
    name, shape = "labels", None
    if args.label:
        from ..frontends.sources import parse_shapes

        if "=" in args.label:
            (name, shape), = parse_shapes([args.label]).items()
        else:
            name = args.label.strip()
        if not name.isidentifier():
            raise TvmSwapError(f"--label {args.label!r}: write NAME=D1,D2,... (or just NAME)")
    return TrainOptions(args.loss, args.optimizer, args.lr, name, shape)


def _params_note(how: str | None, seed: int, count: int) -> str | None:
    from ..frontends.init_params import weights_note

    return weights_note(how, seed, count) if how and count else None


def prepare_model(model: str, shapes=None, params=None, init: str | None = None, seed: int = 0,
                  train: TrainOptions | None = None, mem_limit=None):
    """-> (IRModule to build, params by name, example inputs by name, notes for the build info).

    Runs before lowering: every refusal here (missing params, shapes, unsupported operators, no gradient)
    comes in well under a second after the import."""
    from ..frontends.init_params import init_params
    from ..frontends.model_io import load_model_for_build, refuse_before_import
    from ..limits.mem_limit import MemLimit
    from ..limits.model_checks import check_limit_before_lowering, check_params, params_without_value

    mem_limit = MemLimit.of(mem_limit)     # (a MemLimit from compile_to_library stays as it is)
    refuse_before_import(model, shapes=shapes, params=params, init=init,   # what the file proves: before TVM
                         mem_limit=mem_limit if train is None else None)
    mod, prm, inputs = load_model_for_build(model, shapes=shapes, params=params)
    if train is None:       # before making params: a refusal costs nothing (a step is checked once made)
        check_limit_before_lowering(mod, mem_limit)
    prm = dict(prm or {}) if not isinstance(prm, (list, tuple)) else prm
    notes: dict = {}
    if init and isinstance(prm, dict):      # (a list of params, from a .py model file, is positional: complete)
        missing, _ = params_without_value(mod, prm)
        prm = {**init_params(mod, init, seed=seed, only=set(missing)), **prm}
        note = _params_note(init, seed, len(missing))
        if note:
            notes["weights"] = note
    check_params(mod, prm, cli=True, model=model)
    if train is None:
        return mod, prm, inputs, notes
    step, state, feeds = _training_step(mod, prm, inputs, train, seed)
    check_limit_before_lowering(step, mem_limit)
    return step, state, feeds, {**notes, "training_step": _describe(train)}


def _describe(t: TrainOptions) -> str:
    return f"{t.loss} loss, {t.optimizer} lr={t.lr}"


def _training_step(mod, prm, inputs, t: TrainOptions, seed: int):
    from ..training.step import train_step

    step, state = train_step(mod, prm, loss=t.loss, optimizer=t.optimizer, lr=t.lr, label_shape=t.label_shape,
                             label_name=t.label_name)
    feeds = dict(inputs or {})
    if t.loss == "output":              # the labels are one of the model's own inputs
        return step, state, feeds
    func = step["main"]
    n_in = int(func.attrs["num_input"])
    labels_var = func.params[n_in - 1]
    feeds[labels_var.name] = example_labels(mod, labels_var, t.loss, seed)
    return step, state, feeds


def example_labels(fwd_mod, labels_var, loss: str, seed: int = 0) -> np.ndarray:
    """Deterministic labels the loss accepts: class ids below the prediction's last dim for cross_entropy,
    values in [-1, 1) for mse."""
    from tvm import relax

    shape = [int(d) for d in labels_var.ty.shape.values]
    dtype = str(labels_var.ty.dtype.dtype)
    rng = np.random.default_rng(seed + 1)
    if loss == "cross_entropy":
        ret = fwd_mod["main"].ret_ty
        pred = ret.fields[0] if isinstance(ret, relax.TupleType) else ret
        classes = int(pred.shape.values[-1])
        return rng.integers(0, classes, size=shape).astype(dtype)
    return rng.uniform(-1, 1, size=shape).astype(dtype)
