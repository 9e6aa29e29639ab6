"""`python -m bench NAME [ARGS]`: run one benchmark (from the repository root); `python -m bench` lists them."""
from __future__ import annotations

import importlib
import sys

from bench import SUBCOMMANDS


def _usage() -> str:
    width = max(len(n) for n in SUBCOMMANDS)
    lines = ["usage: python -m bench NAME [ARGS]   (NAME --help for its options)", "", "benchmarks:"]
    lines += [f"  {name.ljust(width)}  {what}" for name, (_, what) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(_usage())
        return 0
    name = argv[0].replace("_", "-")
    if name not in SUBCOMMANDS:
        print(f"unknown benchmark {argv[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"bench.{SUBCOMMANDS[name][0]}")
    sys.argv = [f"python -m bench {name}", *argv[1:]]
    rc = module.main()
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
