"""CNN training steps written from formulas (no TVM): NASNet-A at the paper's size (see nasnet.py)."""
from .nasnet import nasnet_training_graph

__all__ = ["nasnet_training_graph"]
