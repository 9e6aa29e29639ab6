"""tvm_swap.limits.mem_limit.MemLimit: the memory limit parsed once where it enters, carried through every check
(docs/REFUSALS.md), resolved against a graph once (issue 29)."""
import pytest

from tvm_swap.errors import TvmSwapError
from tvm_swap.limits.mem_limit import NO_SWAP_NEED, MemLimit, no_swap_bytes, resolve_limit
from tvm_swap.testing import random_training_graph
from tvm_swap.units import parse_limit


@pytest.mark.parametrize("given", ["25%", " 60 %", "16GB", "512MiB", 123456, 2.5e9, "abc%", "0%", "-3%", -5, "x"])
def test_the_value_means_what_parse_limit_says(given):
    limit, ref = MemLimit.of(given), 10**9
    try:
        want = parse_limit(given, ref)
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            limit.bytes_of(ref)
        assert str(got.value) == str(e)
        assert limit.absolute is None
        return
    assert limit.bytes_of(ref) == want
    assert limit.given == given and (limit.share is None) != (limit.size is None)
    assert limit.absolute == (None if limit.is_percent else want)


def test_a_percentage_without_a_reference_is_worded_as_before():
    with pytest.raises(ValueError, match="is a percentage, but there is no peak to take it of"):
        MemLimit.of("abc%").bytes_of(None)


def test_resolving_carries_the_bytes_the_share_and_the_graph_and_is_done_once():
    g = random_training_graph(3, n_layers=4)
    ref = no_swap_bytes(g)
    r = MemLimit.of("40%").resolve(g)
    assert (r.given, r.share, r.nbytes, r.reference_bytes, r.of) == ("40%", 0.4, int(ref * 0.4), ref, NO_SWAP_NEED)
    assert r.checked_against == g.name
    assert r.resolve(g) is r                              # the same graph: not parsed nor measured again
    other = random_training_graph(4, n_layers=6)
    assert r.resolve(other).nbytes == int(no_swap_bytes(other) * 0.4)
    assert resolve_limit(g, r) == resolve_limit(g, "40%") == r.nbytes
    size = MemLimit.of("1MB").resolve(g)
    assert (size.nbytes, size.share, size.reference_bytes, size.of) == (10**6, None, None, None)


@pytest.mark.parametrize("given, words", [("abc%", "bad memory limit: cannot read percentage 'abc%'"),
                                          ("-5GB", "bad memory limit: cannot read size '-5GB'"),
                                          (0, "memory limit must be positive, got 0"),
                                          ("0GB", "memory limit must be positive, got '0GB'")])
def test_a_bad_limit_is_refused_on_the_graph_in_the_words_of_before(given, words):
    with pytest.raises(TvmSwapError, match=words.replace("(", r"\(")):
        MemLimit.of(given).resolve(random_training_graph(3, n_layers=2))


def test_the_command_line_parses_the_limit_once(monkeypatch):
    """`tvm-swap plan` on a bundled example: the floor table, plan_graph's resolve and its checks read one
    parsed value (on main, the text was parsed by each of them)."""
    import tvm_swap.limits.mem_limit as limits
    import tvm_swap.units as units
    from tvm_swap.cli import main

    calls = []
    for name in ("parse_share", "parse_bytes"):
        real = getattr(units, name)

        def counting(text, _real=real, _name=name):
            calls.append((_name, text))
            return _real(text)
        monkeypatch.setattr(units, name, counting)
        monkeypatch.setattr(limits, name, counting)
    assert main(["plan", "mlp", "--mem-limit", "60%", "--generations", "1", "--workers", "1", "-q"]) == 0
    assert calls == [("parse_share", "60%")]
