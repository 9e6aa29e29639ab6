"""The README's Python section runs as written (in a scratch folder, since it writes files)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_api_block() -> str:
    text = README.read_text()
    section = text[text.index("## Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow   # a build with kernel profiling and a BERT-large plan: ~25 s on an idle 2-core machine
def test_readme_python_section_runs_as_written(tmp_path, monkeypatch, capsys):
    import tvm  # noqa: F401
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(python_api_block(), str(README), "exec"), scope)
    assert (tmp_path / "model.so").exists() and (tmp_path / "plan.json").exists()
    assert scope["loss"].shape == () and len(scope["new_params"]) == len(scope["params"])
    out = capsys.readouterr().out.splitlines()
    print("\n".join(out))
    assert out[-1].startswith("<Plan bert-large@batch=8: swapadvisor on v100-16gb") and "verified>" in out[-1]
    assert scope["m2"].plan.mem_limit == scope["m"].plan.mem_limit
