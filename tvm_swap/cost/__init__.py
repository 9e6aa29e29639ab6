"""The cost stage: how long each op takes (roofline model, measured kernel timings and their cache,
the host's op times). Pure Python except `profile` (TVM, imported lazily by its callers)."""
