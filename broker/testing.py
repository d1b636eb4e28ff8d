"""An in-process broker for tests, on a free loopback port, up in a fraction of a second.

Synchronous tests (any client library)::

    from broker.testing import running_broker

    def test_roundtrip(tmp_path):
        with running_broker(tmp_path, {"num.partitions": "3"}) as broker:
            producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})

The broker runs its own trio loop in a background thread; leaving the block shuts it down cleanly.

Trio tests::

    async with serving_broker(tmp_path) as broker:
        ...   # broker.bootstrap, broker.port, broker.broker (the Broker object)

As a pytest fixture, import it into a ``conftest.py``::

    from broker.testing import odradek_broker      # then: def test_x(odradek_broker): ...
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from typing import Mapping

import trio

from broker.config import BrokerConfig
from broker.server import Broker

TEST_DEFAULTS = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
}


@dataclass
class RunningBroker:
    broker: Broker
    data_dir: str

    @property
    def port(self) -> int:
        return self.broker.port

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def make_config(data_dir, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    settings = dict(TEST_DEFAULTS)
    settings["log.dirs"] = os.fspath(data_dir)
    settings.update({k: str(v) for k, v in (overrides or {}).items()})
    return BrokerConfig(settings)


@contextlib.asynccontextmanager
async def serving_broker(data_dir, overrides: Mapping[str, str] | None = None):
    """Run a broker in the current trio loop for the duration of the block."""
    broker = Broker(make_config(data_dir, overrides))
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        try:
            yield RunningBroker(broker, os.fspath(data_dir))
        finally:
            broker.request_shutdown()


@contextlib.contextmanager
def running_broker(data_dir, overrides: Mapping[str, str] | None = None, timeout: float = 10.0):
    """Run a broker in a background thread (its own trio loop) for the duration of the block."""
    broker = Broker(make_config(data_dir, overrides))
    started = threading.Event()
    failure: list[BaseException] = []
    token_box: list = []

    async def main():
        token_box.append(trio.lowlevel.current_trio_token())
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.serve)
            started.set()

    def run():
        try:
            trio.run(main)
        except BaseException as exc:   # reported to the caller below
            failure.append(exc)
        finally:
            started.set()

    thread = threading.Thread(target=run, name="odradek-test-broker", daemon=True)
    thread.start()
    if not started.wait(timeout) or failure:
        if failure:
            raise RuntimeError("test broker failed to start") from failure[0]
        raise TimeoutError("test broker did not start in time")
    try:
        yield RunningBroker(broker, os.fspath(data_dir))
    finally:
        if token_box and thread.is_alive():
            try:
                trio.from_thread.run_sync(broker.request_shutdown, trio_token=token_box[0])
            except trio.RunFinishedError:
                pass
        thread.join(timeout)
        if failure:
            raise RuntimeError("test broker failed") from failure[0]


def _pytest_fixture():
    try:
        import pytest
    except ImportError:     # pytest is optional: the context managers work without it
        return None

    @pytest.fixture
    def odradek_broker(tmp_path):
        """A fresh in-process broker for one test (``.bootstrap``, ``.port``, ``.broker``)."""
        with running_broker(tmp_path / "odradek-data") as running:
            yield running

    return odradek_broker


odradek_broker = _pytest_fixture()
