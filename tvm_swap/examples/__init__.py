"""Small bundled example models, built in Python (no files): forward passes and training steps.

Each builder returns an `Example(mod, params, inputs)` (a NamedTuple, so `mod, params, inputs = mlp()`
works): a Relax IRModule whose function `main` takes `(*inputs, *params)` in that order and carries
`num_input`, plus deterministic random data as name -> np.ndarray dicts in parameter order.
Training steps also carry `tvm_swap.updates` (see tvm_swap.graph.extract) so the new weights they return
are recognised as updates of the old ones.

    EXAMPLES["mlp-train"]()      # by name: "mlp", "cnn", "mlp-train", "cnn-train"
"""
from .models import EXAMPLES, Example, cnn_train_step, get_example, mlp, mlp_train_step, small_cnn

__all__ = ["EXAMPLES", "Example", "get_example", "mlp", "small_cnn", "mlp_train_step", "cnn_train_step"]
