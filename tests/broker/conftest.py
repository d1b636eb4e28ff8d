"""Fixtures: an in-process broker per test (on a free loopback port) and a raw client to it."""

import pytest

from broker.testing import running_broker
from tests.broker.raw_client import RawClient


@pytest.fixture
def broker(tmp_path):
    with running_broker(tmp_path / "data") as running:
        yield running


@pytest.fixture
def client(broker):
    with RawClient("127.0.0.1", broker.port) as raw:
        yield raw
