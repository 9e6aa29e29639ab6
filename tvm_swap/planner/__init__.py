"""SwapAdvisor planning (no TVM imports anywhere in this package)."""
