"""The `tvm-swap` command line: argument parsing (main.py), the work of each command (commands.py), running
an exported library and reporting what happened (run.py)."""
from .main import build_parser, main

__all__ = ["main", "build_parser"]
