"""Training steps: forward + loss + backward + optimizer update in one Relax function (step.py), with the
gradients TVM 0.27 lacks registered (gradients.py)."""
from .step import LOSSES, OPTIMIZERS, PARAM_KINDS_ATTR, UPDATES_ATTR, Optimizer, train_step

__all__ = ["train_step", "Optimizer", "LOSSES", "OPTIMIZERS", "UPDATES_ATTR", "PARAM_KINDS_ATTR"]
