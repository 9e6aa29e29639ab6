"""Which code a benchmark measured: the git commit of this checkout, recorded in every benchmark's JSON."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def git_commit(short: bool = True) -> str:
    """HEAD of the checkout tvm_swap runs from ("unknown" outside git, e.g. an installed wheel)."""
    cmd = ["git", "rev-parse", *(["--short"] if short else []), "HEAD"]
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out or "unknown"
