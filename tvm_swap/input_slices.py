"""A training step's input shipped in batch slices, and the way from the user's whole array to them. No TVM here.

relay_passes.split_input_train makes a user input (`data`, batch B) K function inputs `data_b0..`, each rows
[lo, hi) of the batch, so that no kernel holds the whole input. The user still gives `data` whole: `InputSlices`
(in the manifest, `meta["input_splits"]`) says which program inputs are slices of which user input, and cuts
the user's array into them (pure data movement: numpy slices, bit for bit).
"""
from __future__ import annotations

import numpy as np

META_KEY = "input_splits"


class InputSlices:
    """{user input: [(slice input name, lo, hi), ...]} in batch order."""

    def __init__(self, record: dict):
        self.slices = {str(u): [(str(n), int(lo), int(hi)) for n, lo, hi in parts] for u, parts in record.items()}
        self.source = {n: u for u, parts in self.slices.items() for n, _, _ in parts}

    def user_specs(self, program_specs) -> list[tuple[str, tuple, str]]:
        """(name, shape, dtype) of each input the user gives, in the program's order: a sliced input at its
        first slice's place, its batch the slices' together. program_specs: [(name, shape, dtype)]."""
        out, seen = [], set()
        for name, shape, dtype in program_specs:
            user = self.source.get(name)
            if user is None:
                out.append((name, tuple(shape), dtype))
            elif user not in seen:
                seen.add(user)
                rows = self.slices[user][-1][2]
                out.append((user, (rows, *tuple(shape)[1:]), dtype))
        return out

    def cut(self, values: dict) -> dict:
        """{program input: value} from {user input: value} (each sliced input cut along its batch)."""
        out = {}
        for name, v in values.items():
            for part, lo, hi in self.slices.get(name, ()):
                out[part] = np.ascontiguousarray(np.asarray(v)[lo:hi])
            if name not in self.slices:
                out[name] = v
        return out


def input_slices_of(meta: dict) -> InputSlices | None:
    rec = meta.get(META_KEY) if isinstance(meta, dict) else None
    return InputSlices(rec) if rec else None
