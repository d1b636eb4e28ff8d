"""Fixtures: an in-process broker (one per test, or one per module for the fuzzers) and a raw client."""

import logging

import pytest

from broker.testing import running_broker
from tests.broker.raw_client import RawClient


@pytest.fixture(autouse=True)
def _quiet_broker_logs():
    # The fuzzers make the broker log every closed connection; keep the output readable.
    logger = logging.getLogger("odradek")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


@pytest.fixture
def broker(tmp_path):
    with running_broker(tmp_path / "data") as running:
        yield running


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("shared") / "data") as running:
        yield running


@pytest.fixture
def client(broker):
    with RawClient("127.0.0.1", broker.port, timeout=10) as raw:
        yield raw
