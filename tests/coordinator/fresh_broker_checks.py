"""Running a raw-wire check against a fresh broker: ours in a test, or any broker (Kafka itself, to
prove the check right) from the command line, as `python -m tests.coordinator.MODULE HOST:PORT`."""

from __future__ import annotations

import sys
import time

from broker.testing import running_broker
from tests.broker.raw_client import RawClient


def on_fresh_odradek(check, tmp_path) -> None:
    with running_broker(tmp_path / "data") as broker, RawClient("127.0.0.1", broker.port) as client:
        client.create_topic("t", 1)
        check(client)


def on_broker_named_in_argv(check) -> None:
    host, _, port = sys.argv[1].rpartition(":")
    with RawClient(host, int(port)) as raw:
        raw.create_topic("t", 1)
        time.sleep(1)
        check(raw)
    print("as expected")
