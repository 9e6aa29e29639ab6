"""Rules a newcomer relies on, checked statically (issue 29): no function grows past its ceiling
(scripts/function_sizes.py), every test path the repository names exists, the tests need no folder outside the
repository, and no test skips itself when TVM (a hard dependency) is missing."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import function_sizes  # noqa: E402

TEXT = (".py", ".md", ".toml", ".cfg", ".sh", ".txt", ".yml", ".yaml")
TEST_PATH = re.compile(r"(?<![\w/.])(tests/[\w/.\-]+\.py)")


def _text_files():
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT).as_posix()
        if path.is_file() and path.suffix in TEXT and not rel.startswith((".git/", "tests/data/", "build/")) \
                and "/." not in "/" + rel and "__pycache__" not in rel:
            yield rel, path


def test_the_function_size_script_passes_and_names_the_largest():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "function_sizes.py")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    largest = r.stdout.splitlines()[1].split()
    assert int(largest[0]) > 0 and ":" in largest[1], r.stdout


def test_no_function_outgrows_its_ceiling():
    sizes = dict(function_sizes.functions())
    assert len(sizes) > 1000, len(sizes)                 # it walked the three packages
    assert function_sizes.over_ceiling(sizes) == []
    # an exception that was split below the ceiling (or renamed) leaves the list, so the list stays true
    stale = {name: sizes.get(name) for name in function_sizes.EXCEPTIONS
             if sizes.get(name, 0) <= function_sizes.CEILING}
    assert stale == {}, f"remove from EXCEPTIONS in scripts/function_sizes.py: {stale}"


def test_the_ceiling_catches_a_function_that_grows(monkeypatch):
    ceiling = function_sizes.CEILING
    assert function_sizes.over_ceiling({"tvm_swap/x.py:f": ceiling}) == []
    assert function_sizes.over_ceiling({"tvm_swap/x.py:f": ceiling + 1})
    # an exception (none is left since the arena split) is held at its length: it may not grow either
    monkeypatch.setitem(function_sizes.EXCEPTIONS, "tvm_swap/x.py:g", ceiling + 5)
    assert function_sizes.over_ceiling({"tvm_swap/x.py:g": ceiling + 5}) == []
    assert function_sizes.over_ceiling({"tvm_swap/x.py:g": ceiling + 6}) == [
        f"tvm_swap/x.py:g: {ceiling + 6} lines (allowed {ceiling + 5})"]


def test_every_test_path_the_repository_names_exists():
    stale, seen = [], 0
    for rel, path in _text_files():
        text = path.read_text(errors="replace")
        for m in TEST_PATH.finditer(text):
            seen += 1
            if not (ROOT / m.group(1)).exists():
                stale.append(f"{rel}:{text[:m.start()].count(chr(10)) + 1}: {m.group(1)}")
    assert seen > 20, seen
    assert stale == []


def test_no_test_reads_files_outside_the_repository():
    outside = [rel for rel, path in _text_files() if rel.startswith(("tests/", "scripts/"))
               and re.search(r"TVM_SWAP_FIXTURES|shared/fixtures|\"shared\"", path.read_text(errors="replace"))
               and rel != "tests/test_house_rules.py"]
    assert outside == []


def test_no_test_skips_when_tvm_is_missing():
    skipping = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "tests").rglob("*.py"))
                if 'importorskip("tvm")' in p.read_text() and p.name != "test_house_rules.py"]
    assert skipping == []
