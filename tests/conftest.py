"""Shared pytest configuration for the unit and integration tests."""

import pytest


def pytest_collection_modifyitems(config, items):
    """Tests marked `slow` (soaks, JVM-backed cluster runs) stay out of the default run; select them
    with `-m slow`."""
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
