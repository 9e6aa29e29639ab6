"""The limit stage: the memory limit as one value (`mem_limit.MemLimit`), and the checks and refusals it meets,
in the order docs/REFUSALS.md lists."""
