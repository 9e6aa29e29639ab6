"""K, the number of chunks of a split dense weight, as the plan's choice (issue 26, item 3).

    best, table = choose_k(first, rescale, plan_one, budget_s)

split_to_fit / split_train_to_fit find the fewest chunks that make the limit feasible (K_min). At limits well
above the floor that leaves no room to keep chunks resident or to overlap their copies: a BERT head of 94 MB
plans at 1.83x its ideal time in K_min chunks and 1.07x in 2 K_min (bench/split_k.py). With split_k="auto"
every weight's K is scaled together by 1, 2 and 4 (at most the weight's rows), each candidate lowered, timed
and planned (verified) on its share of the search budget, and the fastest predicted plan kept; a candidate
whose graph's lower bound is already no faster than the best plan so far is not planned. split_k="fewest"
keeps K_min. No split (K_min = 1) tries nothing else: plans at limits that need no split stay what they were.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import TvmSwapError

SPLIT_K = ("fewest", "auto")
DEFAULT_SPLIT_K = "auto"
SCALES = (1, 2, 4)


def check_split_k(value) -> str:
    """The split_k option, or a short error saying what it may be."""
    if value is None:
        return DEFAULT_SPLIT_K
    if not isinstance(value, str) or value.lower() not in SPLIT_K:
        raise TvmSwapError(f"split_k must be one of {', '.join(repr(s) for s in SPLIT_K)} (the fewest chunks that "
                           f"fit, or the fastest plan of 1x, 2x, 4x as many), got {value!r}")
    return value.lower()


def scaled_splits(splits: dict, scale: int, maxima: dict) -> dict:
    """Every K of `splits` times `scale`, at most the weight's `maxima` (its rows or output features)."""
    return {w: int(min(int(k) * scale, int(maxima[w]))) for w, k in splits.items()}


@dataclass
class Candidate:
    """One K: its splits and what planning it made (plan None: not planned, `why` says why)."""
    scale: int
    splits: dict
    built: object = None          # what the caller needs to apply the plan (module, lowered, graph, times ...)
    plan: object = None
    bound_s: float | None = None
    why: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def time_s(self) -> float | None:
        return None if self.plan is None else float(self.plan.predicted["time_s"])

    def row(self) -> dict:
        out = {"scale": self.scale, "splits": dict(self.splits)}
        if self.time_s is not None:
            out["predicted_time_s"] = self.time_s
        if self.bound_s is not None:
            out["lower_bound_s"] = self.bound_s
        if self.why:
            out["not_planned"] = self.why
        return out


def candidate_splits(splits: dict, maxima: dict, scales=SCALES) -> list[tuple[int, dict]]:
    """(scale, splits) for each scale that gives splits of its own (a weight at its rows stops growing)."""
    out, seen = [], []
    for s in scales:
        ks = scaled_splits(splits, s, maxima)
        if ks not in seen:
            seen.append(ks)
            out.append((s, ks))
    return out


def choose_k(cands: list[tuple[int, dict]], build, bound, plan_one, budget_s: float):
    """(best Candidate, [row per candidate]). build(splits) -> built, or a string saying why that K cannot be
    used (its graph does not fit the limit); bound(built) -> seconds no plan of it beats; plan_one(built,
    budget_s) -> a verified Plan. Candidates are planned in order (the first is K_min), each on an equal share
    of `budget_s`; one whose bound is no faster than the best plan so far is skipped."""
    share = budget_s / max(1, len(cands))
    done, best = [], None
    for scale, ks in cands:
        c = Candidate(scale, ks)
        done.append(c)
        built = build(ks)
        if isinstance(built, str):
            c.why = built
            continue
        c.built = built
        c.bound_s = float(bound(built))
        if best is not None and c.bound_s >= best.time_s:
            c.why = f"its lower bound {c.bound_s:.6g} s is no faster than the plan of {best.scale}x"
            continue
        try:
            c.plan = plan_one(built, share)
        except TvmSwapError as e:       # (K_min's refusal is the caller's to see; another K is just not chosen)
            if best is None and scale == cands[0][0]:
                raise
            c.why = f"no plan: {str(e).splitlines()[0]}"
            continue
        if best is None or c.time_s < best.time_s:
            best = c
    if best is None:
        raise TvmSwapError("no K of the split fits the limit: " + "; ".join(f"{c.scale}x: {c.why}" for c in done))
    return best, [c.row() for c in done]
