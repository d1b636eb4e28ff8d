"""Creating scenario topics through the helper client (so every client under test starts from the same state)."""

from __future__ import annotations

from .checks import wait_until
from .clients import ClientError


def create_topic(helper, name: str, partitions: int = 1, configs: dict | None = None) -> str:
    helper.create_topic(name, partitions, configs)

    def count():
        try:
            return helper.partition_count(name)
        except ClientError:
            return None
    found = wait_until("topic ready", count, lambda n: n == partitions, 15)
    if found != partitions:
        raise AssertionError(f"[setup] topic {name}: expected {partitions} partitions, metadata shows {found}")
    return name


def produce_ok(step, client, topic, records, **options):
    """Produces through the client under test and fails the step on any delivery error."""
    deliveries = client.produce(topic, records, **options)
    step("produce without errors", [], sorted({d.error for d in deliveries if d.error}))
    step("one delivery per record", len(records), len(deliveries))
    return deliveries
