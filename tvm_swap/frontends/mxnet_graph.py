"""Parse an MXNet symbol JSON (NNVM graph) into checked nodes with typed attribute access.

MXNet writes every attribute as a string ("(3, 3)", "True", "None", "-1") and omits attributes left at
their defaults, so every getter takes the operator's MXNet default.
"""
from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass, field

from ..errors import TvmSwapError, UnsupportedModelError


class SymbolFileError(TvmSwapError):
    """The symbol JSON is malformed."""


_REQUIRED = object()


class Attrs:
    """String attributes of one node; a bad value raises an error naming operator, node and attribute."""

    def __init__(self, op: str, node_name: str, raw: dict[str, str]):
        self.op, self.node_name, self.raw = op, node_name, dict(raw)

    def has(self, key: str) -> bool:
        return key in self.raw and not _is_none(self.raw[key])

    def unsupported(self, key: str, why: str = "") -> UnsupportedModelError:
        value = self.raw.get(key)
        shown = f"={value!r}" if value is not None else ""
        return UnsupportedModelError(
            f"operator {self.op!r} (node {self.node_name!r}): attribute {key!r}{shown} is not supported"
            + (f": {why}" if why else ""))

    def _bad(self, key: str, kind: str) -> UnsupportedModelError:
        return UnsupportedModelError(
            f"operator {self.op!r} (node {self.node_name!r}): attribute {key!r}={self.raw[key]!r} "
            f"is not a valid {kind}")

    def str(self, key: str, default: str | None = None) -> str | None:
        v = self.raw.get(key)
        return default if v is None or _is_none(v) else v.strip()

    def bool(self, key: str, default: bool) -> bool:
        v = self.str(key)
        if v is None:
            return default
        low = v.lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        raise self._bad(key, "boolean")

    def _missing(self, key: str) -> UnsupportedModelError:
        return UnsupportedModelError(
            f"operator {self.op!r} (node {self.node_name!r}): required attribute {key!r} is missing")

    def int(self, key: str, default=_REQUIRED):
        v = self.str(key)
        if v is None:
            if default is _REQUIRED:
                raise self._missing(key)
            return default
        try:
            return int(v)
        except ValueError:
            try:
                f = float(v)
            except ValueError:
                raise self._bad(key, "integer") from None
            if f != int(f):
                raise self._bad(key, "integer") from None
            return int(f)

    def float(self, key: str, default=_REQUIRED):
        v = self.str(key)
        if v is None:
            if default is _REQUIRED:
                raise self._missing(key)
            return default
        try:
            return float(v)
        except ValueError:
            raise self._bad(key, "number") from None

    def tuple(self, key: str, default=_REQUIRED, allow_none: bool = False):
        """A shape-like tuple: "(3, 3)", "[3,3]", "(3,)", or a bare "3" (a 1-tuple)."""
        v = self.str(key)
        if v is None:
            if default is _REQUIRED:
                raise self._missing(key)
            return default
        try:
            parsed = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            raise self._bad(key, "tuple") from None
        if isinstance(parsed, (int, float)) and not isinstance(parsed, bool):
            parsed = (parsed,)
        if not isinstance(parsed, (tuple, list)):
            raise self._bad(key, "tuple")
        out = []
        for item in parsed:
            if item is None and allow_none:
                out.append(None)
            elif isinstance(item, int) and not isinstance(item, bool):
                out.append(item)
            elif isinstance(item, float) and item == int(item):
                out.append(int(item))
            else:
                raise self._bad(key, "tuple of integers")
        return tuple(out)

    def axis(self, key: str, default=None):
        """An axis attribute: None/"()" -> default, an int, or a tuple of ints."""
        v = self.str(key)
        if v is None:
            return default
        t = self.tuple(key, allow_none=False)
        if v.lstrip().startswith(("(", "[")):
            return t if t else default
        return t[0]

    def choice(self, key: str, default: str, allowed) -> str:
        v = self.str(key, default)
        if v not in allowed:
            raise self.unsupported(key, f"supported values are {sorted(allowed)}")
        return v


def _is_none(v: str) -> bool:
    return v.strip() in ("None", "none")


@dataclass
class Node:
    index: int
    op: str                      # "null" for a variable
    name: str
    attrs: Attrs
    inputs: list[tuple[int, int]] = field(default_factory=list)  # (node index, output index)


@dataclass
class Graph:
    nodes: list[Node]
    heads: list[tuple[int, int]]


def _load_json(symbol) -> dict:
    if isinstance(symbol, dict):
        return symbol
    if isinstance(symbol, (str, os.PathLike)):
        text = os.fspath(symbol)
        if isinstance(symbol, os.PathLike) or not text.lstrip().startswith("{"):
            try:
                with open(text, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise SymbolFileError(f"cannot read MXNet symbol file {os.fspath(symbol)!r}: {e.strerror}") from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise SymbolFileError(f"MXNet symbol JSON is not valid JSON: {e}") from None
    raise SymbolFileError(
        f"expected a path to NAME-symbol.json, its JSON text or the parsed dict, got {type(symbol).__name__}")


def _entry(raw, where: str, n_nodes: int, limit: int) -> tuple[int, int]:
    """An input/head triple [node, output, version]; the node must come before `limit` (topological order)."""
    if not isinstance(raw, (list, tuple)) or len(raw) not in (2, 3) or not all(isinstance(x, int) for x in raw):
        raise SymbolFileError(f"{where}: expected [node_index, output_index, version], got {raw!r}")
    src, out = raw[0], raw[1]
    if not 0 <= src < limit or out < 0:
        raise SymbolFileError(f"{where}: entry {raw!r} refers to a node that is not before it (graph has {n_nodes})")
    return src, out


def parse_symbol(symbol) -> Graph:
    """Checked nodes and heads of an MXNet symbol (path, JSON text or dict)."""
    d = _load_json(symbol)
    if not isinstance(d, dict) or not isinstance(d.get("nodes"), list) or "heads" not in d:
        raise SymbolFileError("not an MXNet symbol JSON: it needs 'nodes' and 'heads'")
    raw_nodes = d["nodes"]
    nodes = []
    for i, rn in enumerate(raw_nodes):
        if not isinstance(rn, dict) or "op" not in rn or "name" not in rn:
            raise SymbolFileError(f"node {i} needs 'op' and 'name'")
        # Very old files use "param" (or "attr") instead of "attrs".
        raw_attrs = rn.get("attrs", rn.get("param", rn.get("attr", {}))) or {}
        if not isinstance(raw_attrs, dict):
            raise SymbolFileError(f"node {i} ({rn['name']!r}): attrs must be an object")
        attrs = Attrs(str(rn["op"]), str(rn["name"]), {str(k): str(v) for k, v in raw_attrs.items()})
        inputs = [_entry(e, f"node {i} ({rn['name']!r}) input {j}", len(raw_nodes), i)
                  for j, e in enumerate(rn.get("inputs", []))]
        nodes.append(Node(i, str(rn["op"]), str(rn["name"]), attrs, inputs))
    heads = [_entry(h, f"head {j}", len(raw_nodes), len(raw_nodes)) for j, h in enumerate(d["heads"])]
    if not heads:
        raise SymbolFileError("the symbol has no outputs ('heads' is empty)")
    return Graph(nodes, heads)
