"""Messages raised by the Python API name Python arguments (`mem_limit`, `shapes={...}`); the command line
says the same in its flags. One table turns the first into the second, so a message is written once."""
from __future__ import annotations

import re

_PY_TO_CLI = [
    (re.compile(r"shapes=\{\{?'([^']+)': \(\.\.\.\)\}?\}"), r"--shape \1=D1,D2,..."),
    (re.compile(r"shapes=\{\{?\"([^\"]+)\": \(\.\.\.\)\}?\}"), r"--shape \1=D1,D2,..."),
    (re.compile(r"\bshapes names\b"), "--shape names"),
    (re.compile(r"params=\{name: array\}"), "--params FILE (or --init random|zeros)"),
    (re.compile(r"\bpool='([a-z-]+)'"), r"--pool \1"),
    (re.compile(r"\bfuse_max_depth=(\w+)"), r"--fuse-max-depth \1"),
    (re.compile(r"\bmicro_batches=(\w+)"), r"--micro-batches \1"),
    (re.compile(r"\bsplit_dense=True"), "--split-dense"),
    (re.compile(r"\bsplit_ops=True"), "--split-ops"),
    (re.compile(r"\bsplit_k must\b"), "--split-k must"),
    (re.compile(r"\bbudget_s=(\w+)"), r"--budget-s \1"),
    (re.compile(r"\braise mem_limit\b"), "raise --mem-limit"),
    (re.compile(r"\bmem_limit=(\S+)"), r"--mem-limit \1"),
]


def cli_message(message: str) -> str:
    """The message with each Python argument it names written as the command line's flag."""
    for pattern, repl in _PY_TO_CLI:
        message = pattern.sub(repl, message)
    return message
