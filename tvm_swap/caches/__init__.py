"""On-disk caches keyed by what they were computed from: lowered graphs and their floors (`graph`), unlimited
reference builds (`build`)."""
