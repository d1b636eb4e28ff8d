"""A topic of many partitions: their logs are opened off the event loop, in chunks, after the
CreateTopics answer; a Produce for a partition whose log is still queued waits for it (opened ahead
of the rest) instead of answering NOT_LEADER_OR_FOLLOWER, then it takes records. Deleting or
recreating the topic meanwhile leaves no stray log."""

import os
import time

from protocol import ErrorCode, messages

from broker.partitions import INLINE_OPENS
from tests.broker.raw_client import batch

PARTITIONS = INLINE_OPENS * 3 + 5


def _produce_until_accepted(client, topic, partition, deadline):
    while True:
        answer = client.produce(topic, partition, batch([b"x"]), acks=1)
        if answer.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def test_every_partition_of_a_large_topic_takes_records(client, broker):
    assert client.create_topic("wide", PARTITIONS).error_code == 0
    deadline = time.monotonic() + 60
    for partition in range(PARTITIONS):
        answer = _produce_until_accepted(client, "wide", partition, deadline)
        assert (answer.error_code, answer.base_offset) == (0, 0), partition
    assert client.list_offset("wide", PARTITIONS - 1, -1).offset == 1


def test_a_produce_right_after_creation_waits_for_the_log_instead_of_failing(client, broker):
    """The last partitions are the last in the open queue: one Produce sent the moment the topic
    exists is answered with its offset at the first try (no NOT_LEADER_OR_FOLLOWER to retry)."""
    assert client.create_topic("eager", PARTITIONS * 4).error_code == 0
    for partition in (PARTITIONS * 4 - 1, PARTITIONS * 4 - 2):
        answer = client.produce("eager", partition, batch([b"x"]), acks=1)
        assert (answer.error_code, answer.base_offset) == (0, 0), partition


def test_deleting_and_recreating_while_logs_open(client, broker):
    assert client.create_topic("churn", PARTITIONS).error_code == 0
    D = messages.DeleteTopicsRequest
    deleted = client.request(20, 4, D(topic_names=["churn"], timeout_ms=5000))
    assert deleted.responses[0].error_code == 0
    assert client.create_topic("churn", 2).error_code == 0
    deadline = time.monotonic() + 60
    for partition in range(2):
        answer = _produce_until_accepted(client, "churn", partition, deadline)
        assert (answer.error_code, answer.base_offset) == (0, 0), partition
    # the partitions of the deleted incarnation are gone, none was installed
    answer = client.produce("churn", PARTITIONS - 1, batch([b"x"]), acks=1)
    assert answer.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_large_deletion_goes_off_the_loop_and_a_recreation_starts_empty(client, broker):
    """Deleting many partitions detaches their logs at once and renames the directories in a
    worker thread; the topic created again under the same name never sees the old records."""
    assert client.create_topic("again", PARTITIONS).error_code == 0
    deadline = time.monotonic() + 60
    for partition in (0, PARTITIONS - 1):
        assert _produce_until_accepted(client, "again", partition, deadline).base_offset == 0
    D = messages.DeleteTopicsRequest
    assert client.request(20, 4, D(topic_names=["again"], timeout_ms=5000)).responses[0].error_code == 0
    assert client.create_topic("again", PARTITIONS).error_code == 0
    for partition in (0, PARTITIONS - 1):
        answer = _produce_until_accepted(client, "again", partition, deadline)
        assert (answer.error_code, answer.base_offset) == (0, 0), partition
    # (the two partitions produced to were opened ahead of the queue: wait for the rest)
    while True:
        live = [name for name in os.listdir(broker.broker.config.log_dirs[0])
                if name.startswith("again-") and not name.endswith("-delete")]
        if len(live) >= PARTITIONS or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(live) == PARTITIONS
