"""One way every benchmark records what it measured: the commit, the machine and its load, and one writer.

    run = record.start()                  # at the top of main(): the clock, the load before
    ...
    record.write(path, doc, run)          # doc gains "commit" and "provenance"; written whole or not at all

Machines are noisy (a shared 2-core box most of the time): the load average before and after is kept beside
every result so a reader can tell a loaded run from an idle one.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tvm_swap.cost.timing_cache import cpu_name
from tvm_swap.provenance import git_commit


def load_average() -> float:
    """The 1-minute load average (0.0 where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return 0.0


@dataclass
class Run:
    """A benchmark run: when it started and the load then (`start()`)."""
    started: float = field(default_factory=time.time)
    load_before: float = field(default_factory=load_average)
    argv: list = field(default_factory=lambda: list(sys.argv))

    def provenance(self) -> dict:
        return {"commit": git_commit(), "machine": platform.platform(), "cpu": cpu_name(),
                "cpus": os.cpu_count(), "python": platform.python_version(), "argv": self.argv,
                "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
                "wall_s": round(time.time() - self.started, 1),
                "load_before": self.load_before, "load_after": load_average()}


def start() -> Run:
    return Run()


def stamp(doc: dict, run: Run | None = None) -> dict:
    """`doc` with "commit" and "provenance" (this checkout, the machine, its load). A benchmark that measured
    another tree (a side-by-side run) names that tree's commit itself; "git_commit" is spelled "commit"."""
    prov = (run or Run()).provenance()
    out = dict(doc)
    if "git_commit" in out:
        out.setdefault("commit", out.pop("git_commit"))
    out.setdefault("commit", prov["commit"])
    out["provenance"] = prov
    return out


def write(path, doc: dict, run: Run | None = None, quiet: bool = False) -> Path:
    """Write `doc` stamped (see stamp) as JSON to `path`, atomically (a run cut short leaves the old file), and
    say so on stdout with the commit and the load (unless quiet: a benchmark rewriting its file after each piece)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        stamped = stamp(doc, run)
        with os.fdopen(fd, "w") as f:
            json.dump(stamped, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if not quiet:
        prov = stamped["provenance"]
        print(f"wrote {path} (commit {prov['commit']}, load {prov['load_before']:.1f} -> {prov['load_after']:.1f})",
              flush=True)
    return path

