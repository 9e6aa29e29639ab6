"""Tests mirror the package folders; the shared helpers (swap_models, cuda_fake, inplace_module) stay in
tests/, so put that folder on the import path for every test module (and the root, for bench/)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the repository root too: tests read the benchmarks' own code (bench/) as `import bench.paper`
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    """Kernel timings and unlimited builds cached on disk (tvm_swap.cost.timing_cache) go to this session's own
    folder, never the user's ~/.cache; subprocesses (the CLI tests) inherit it."""
    os.environ["TVM_SWAP_CACHE_DIR"] = str(tmp_path_factory.mktemp("tvm_swap_cache"))
    yield
