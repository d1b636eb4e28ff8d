"""SIGKILL crash test: a child process appends, is killed at a random point, and the
reopened log must be an intact, gap-free prefix holding every acknowledged batch.
A handful of iterations here; `python bench/storage_bench.py crash --iterations 100`
runs the long version."""

import importlib.util
import os

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "storage_bench.py")


def load_bench():
    spec = importlib.util.spec_from_file_location("storage_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(120)
def test_sigkill_at_random_points_keeps_a_valid_prefix(tmp_path):
    bench = load_bench()
    stats = bench.crash_loop(4, seed=20260101, directory=str(tmp_path), verbose=False)
    assert stats["iterations"] == 4
    assert stats["records"] > 0
