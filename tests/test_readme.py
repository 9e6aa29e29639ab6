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


def test_the_readme_starts_with_the_user_and_the_results_live_in_docs():
    """Issue 29: what it is, quick start, Python API, command line, CUDA, layout, in that order; the generated
    results table (bench/paper.py --readme) is in docs/RESULTS.md, said to be measured once, not per row."""
    text = README.read_text()
    assert re.findall(r"^## (.+)$", text, re.M) == ["Quick start", "Python API", "Command line", "CUDA", "Layout"]
    assert "<!--" not in text
    results = (README.parent / "docs" / "RESULTS.md").read_text()
    table = results[results.index("<!-- paper-table"):results.index("<!-- /paper-table -->")]
    assert table.count("| ") > 100 and "measured at" not in table.splitlines()[1]
    assert len(re.findall(r"^Measured at ", table, re.M)) >= 1


def test_every_relative_link_in_the_readme_and_docs_exists():
    checked = 0
    for doc in [README, *sorted((README.parent / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" in target:
                continue
            checked += 1
            assert (doc.parent / target).exists(), f"{doc.name} links to {target}, which is not there"
    assert checked >= 10
