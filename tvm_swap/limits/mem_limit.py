"""The memory limit as one value (MemLimit), what a percentage is a share of, and the numbers every report
gives beside a limit.

A limit is parsed once, where it enters (`tvm-swap`'s commands, `tvm_swap.build`, `plan_graph`), into a
MemLimit that every check on the way reads: the user's text, the bytes of a size, the share of a percentage,
and once resolved against a graph, the bytes, what the share was of, and which graph. The checks that run
before the graph exists (docs/REFUSALS.md lists them in order) pass over a limit they cannot read, so that
resolving it words the error once, as before.

"100%" means no swapping: a percentage is of what the model uses without tvm_swap, i.e. the device bytes
of TVM's own static memory plan on the default schedule (planner.baselines.noswap.noswap_need: its storage
tokens plus the largest kernel workspace, the pool the unlimited build runs with), not the idealised liveness
peak (planner.bounds.noswap_peak), which no pool meets: TVM's plan reserves 1.16x that peak for a ResNet-50
training step and 1.63x for SqueezeNet (issue 16). So `--planner noswap --mem-limit 100%` is accepted by
construction and "50%" is half of what the model uses today.

No TVM here (the planner imports this module).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace

from ..errors import TvmSwapError
from ..plan import DEFAULT_ALIGNMENT
from ..units import parse_bytes, parse_share, percent_at_least  # noqa: F401  (percent_at_least: re-exported)

NO_SWAP_NEED = "the no-swap need (TVM's static plan)"


@dataclass(frozen=True)
class MemLimit:
    """A memory limit parsed once (MemLimit.of), carried to every check.

    given       what the user wrote: a string ('25%', '16GB', '17179869184') or a number of bytes, kept so that
                every message quotes it as before
    share       0.25 for '25%' (None for a size); size: the bytes of a size (None for a percentage)
    error       why it cannot be read (the words resolve() raises with), else None
    nbytes, reference_bytes, of, checked_against: set by resolve(graph): the bytes, the bytes a share is of
                (None for a size), what those are, and the name of the graph it was checked against
    """
    given: object
    share: float | None = None
    size: int | None = None
    error: str | None = None
    nbytes: int | None = None
    reference_bytes: int | None = None
    of: str | None = None
    checked_against: str | None = None
    _graph: object = field(default=None, compare=False, repr=False)     # weakref to that graph
    _alignment: int | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, value) -> "MemLimit | None":
        """The limit `value` parsed (a MemLimit is returned as it is; None stays None: no limit)."""
        return None if value is None else cls.parse(value)

    @classmethod
    def parse(cls, value) -> "MemLimit":
        """`value` parsed; a MemLimit is returned as it is. Never raises: a bad limit keeps its error."""
        if isinstance(value, MemLimit):
            return value
        if isinstance(value, str) and value.strip().endswith("%"):
            try:
                return cls(value, share=parse_share(value))
            except ValueError as e:
                return cls(value, error=str(e))
        try:
            return cls(value, size=parse_bytes(value))
        except (TypeError, ValueError) as e:
            return cls(value, error=str(e))

    @property
    def is_percent(self) -> bool:
        return isinstance(self.given, str) and self.given.strip().endswith("%")

    @property
    def absolute(self) -> int | None:
        """The bytes of a limit given as a size; None for a percentage (it needs the graph) or a bad limit."""
        return None if self.is_percent or self.error is not None else self.size

    def bytes_of(self, reference_bytes: int | None) -> int:
        """The bytes this limit means when a percentage is of `reference_bytes`; ValueError when it cannot
        be read (or is a percentage with nothing to take it of)."""
        if self.is_percent and reference_bytes is None:
            raise ValueError(f"limit {self.given!r} is a percentage, but there is no peak to take it of")
        if self.error is not None:
            raise ValueError(self.error)
        return int(reference_bytes * self.share) if self.is_percent else int(self.size)

    def resolve(self, graph, alignment: int = DEFAULT_ALIGNMENT) -> "MemLimit":
        """This limit checked against `graph`: bytes (a percentage of its no-swap need), positive. Resolving
        again against the same graph and alignment returns it as it is."""
        if self.nbytes is not None and self._graph is not None and self._graph() is graph \
                and self._alignment == alignment:
            return self
        ref = no_swap_bytes(graph, alignment) if self.is_percent else None
        try:
            n = self.bytes_of(ref)
        except ValueError as e:
            raise TvmSwapError(f"bad memory limit: {e}") from None
        if n <= 0:
            raise TvmSwapError(f"memory limit must be positive, got {self.given!r}")
        return replace(self, nbytes=int(n), reference_bytes=ref, of=NO_SWAP_NEED if self.is_percent else None,
                       checked_against=getattr(graph, "name", None), _graph=weakref.ref(graph),
                       _alignment=alignment)


def no_swap_bytes(graph, alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Device bytes the model needs without tvm_swap (TVM's static plan): what "100%" means."""
    from ..planner.baselines.noswap import noswap_need

    return int(noswap_need(graph, alignment))


def liveness_peak_bytes(graph, alignment: int = DEFAULT_ALIGNMENT) -> int:
    """The idealised peak: every tensor exactly from its producer to its last reader, nothing fragmented."""
    from ..planner.bounds import noswap_peak

    return int(noswap_peak(graph, alignment=alignment))


def resolve_limit(graph, mem_limit, alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Bytes from an int, '16GB' / '512MiB', a percentage of no_swap_bytes ('25%'), or a MemLimit."""
    return MemLimit.parse(mem_limit).resolve(graph, alignment).nbytes


def limit_facts(graph, limit: int, alignment: int = DEFAULT_ALIGNMENT) -> dict:
    """The limit beside its two references, for the JSON of plan, compile and run."""
    ref, peak = no_swap_bytes(graph, alignment), liveness_peak_bytes(graph, alignment)
    return {"no_swap_bytes": ref, "liveness_peak_bytes": peak,
            "limit_vs_no_swap": round(limit / ref, 4) if ref else None,
            "limit_vs_liveness_peak": round(limit / peak, 4) if peak else None}


def floor_op(graph, alignment: int = DEFAULT_ALIGNMENT, in_place: bool = True) -> tuple[str, int, int]:
    """(name, aligned bytes of its inputs and outputs together, largest kernel workspace in the graph) of the
    op that needs the most memory at once (largest_op): what sets the floor no plan can go below."""
    from .floor_hint import largest_op

    op, best = largest_op(graph, alignment, in_place)
    workspace = max((o.workspace for o in graph.ops), default=0)
    return ("" if op is None else op.name), max(best, 0), int(workspace)


def floor_hint(graph, pool: str, alignment: int = DEFAULT_ALIGNMENT, limit: int | None = None) -> str:
    """One clause for a refusal: which op sets the floor and what would move that op's floor, for `limit`
    (tvm_swap.limits.floor_hint: the facts come from the graph, the words from the facts and the limit)."""
    from .floor_hint import hint_facts, hint_text

    return hint_text(hint_facts(graph, alignment, in_place=pool == "arena"), pool, limit)
