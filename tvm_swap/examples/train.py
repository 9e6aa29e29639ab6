"""Turn a Relax loss function into ONE flat training step: forward + loss + backward + SGD, with the one
step builder of tvm_swap.training (step_from_loss): relax.transform.Gradient on the loss function, then a
`main` that calls the adjoint and applies `p - lr * grad` to every parameter; the callee is inlined
(notes/tvm-0.27.md §2) so `main` is a single dataflow function the swap planner sees whole.

    main(*inputs, *params) -> (loss, *new_params)
    attrs: num_input = len(inputs), tvm_swap.updates = [[1 + i, num_inputs + i] for each param i]
"""
from __future__ import annotations

def sgd_train_step(loss_func, num_inputs: int, lr: float = 0.01):
    """An IRModule with only `main`: one SGD step of `loss_func(*inputs, *params) -> scalar loss`.

    `loss_func` must be a relax.Function with a single dataflow block and a 0-d float result.
    """
    from ..training.step import Optimizer, step_from_loss

    return step_from_loss(loss_func, num_inputs, Optimizer("sgd", lr=float(lr)))
