"""Shared inputs of the CLI tests."""
import json

import pytest


@pytest.fixture
def odd_symbol(tmp_path):
    """An MXNet symbol file with two operators no frontend supports (FancyOp, OtherOp) around a relu."""
    sym = {"nodes": [{"op": "null", "name": "data", "inputs": []},
                     {"op": "FancyOp", "name": "f1", "inputs": [[0, 0, 0]]},
                     {"op": "relu", "name": "r1", "inputs": [[1, 0, 0]]},
                     {"op": "OtherOp", "name": "o1", "inputs": [[2, 0, 0]]}],
           "arg_nodes": [0], "heads": [[3, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}}
    path = tmp_path / "odd-symbol.json"
    path.write_text(json.dumps(sym))
    return path
