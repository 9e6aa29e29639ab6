"""Turn what a user names on the command line into a DataflowGraph.

GRAPH may be `zoo:NAME[@batch=B]`, a graph JSON file (`.json` / `.json.gz` with "format": "tvm_swap.graph"),
or a model file that the frontends import (MXNet `-symbol.json`, `.onnx`, `module:factory`).
"""
from __future__ import annotations

from pathlib import Path

from ..errors import TvmSwapError
from ..graph import DataflowGraph


def is_graph_json(path: Path) -> bool:
    if path.suffix == ".gz":
        return path.name.endswith(".json.gz")
    if path.suffix != ".json":
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return '"tvm_swap.graph"' in head


def load_graph(spec: str, shapes: dict | None = None, params: str | None = None,
               target: str = "llvm", fuse_max_depth: int | None = None) -> DataflowGraph:
    if spec.startswith("zoo:"):
        from ..zoo import load_zoo

        return load_zoo(spec)
    path = Path(spec)
    if path.exists() and is_graph_json(path):
        return DataflowGraph.load(path)
    from .model_io import is_model_spec

    if path.exists() or is_model_spec(spec):
        from .model_io import graph_of_model

        return graph_of_model(spec, shapes=shapes, params=params, target=target, fuse_max_depth=fuse_max_depth)
    raise TvmSwapError(
        f"cannot find {spec!r}: give zoo:NAME[@batch=B] (see `tvm-swap zoo`), a graph JSON file, "
        f"a bundled example name, or a model file (MXNet -symbol.json, .onnx, module:factory)"
    )


def parse_shapes(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """['data=1,3,224,224'] -> {'data': (1, 3, 224, 224)}"""
    shapes = {}
    for item in items or []:
        if "=" not in item:
            raise TvmSwapError(f"--shape {item!r}: write NAME=D1,D2,... e.g. data=1,3,224,224")
        name, dims = item.split("=", 1)
        try:
            shapes[name.strip()] = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            raise TvmSwapError(f"--shape {item!r}: dimensions must be integers") from None
    return shapes

