"""The share coordinator inside the coordinator service: its `__share_group_state` topic (created on
first use with Kafka's share.coordinator.state.topic.* settings, followed partition by partition like
`__consumer_offsets`), its writes and its replay on load."""

from __future__ import annotations

import logging

from protocol import DecodeError
from protocol.internal_topics import decode_share_state_record, encode_share_state_record
from protocol.records import SimpleRecord, build_batch

from broker.coordinator.ownership import SHARE_STATE_TOPIC
from broker.coordinator.serde import partition_for

from .state_store import Key

log = logging.getLogger("odradek.share")


def share_state_topic_spec(config) -> tuple[int, int, dict]:
    """(partitions, replication factor, topic configs) of `__share_group_state`, as Kafka creates it."""
    return (config["share.coordinator.state.topic.num.partitions"],
            config["share.coordinator.state.topic.replication.factor"],
            {"cleanup.policy": "delete", "compression.type": "producer", "retention.ms": "-1",
             "min.insync.replicas": str(config["share.coordinator.state.topic.min.isr"]),
             "segment.bytes": str(config["share.coordinator.state.topic.segment.bytes"])})


def state_partition(service, coordinator_key: str) -> int:
    return partition_for(coordinator_key, service.share_state_partitions)


class ShareStateLog:
    """Appends the share coordinator's records to the `__share_group_state` partition of their key."""

    def __init__(self, service):
        self.service = service

    def append(self, coordinator_key: str, key, value) -> None:
        key_bytes, value_bytes = encode_share_state_record(key, value)
        batch = build_batch([SimpleRecord(value=value_bytes, key=key_bytes, timestamp=self.service.clock.now_ms())])
        self.service.append(SHARE_STATE_TOPIC, state_partition(self.service, coordinator_key), batch)


def replay_share_states(service, index: int, batches) -> int:
    count = 0
    for batch in batches:
        for key, value in batch["records"]:
            try:
                key_body, value_body = decode_share_state_record(bytes(key), None if value is None else bytes(value))
            except DecodeError as exc:
                log.warning("skipping unreadable %s-%d record: %s", SHARE_STATE_TOPIC, index, exc)
                continue
            service.share_states.replay(key_body, value_body)
            count += 1
    return count


def unload_share_states(service, index: int) -> None:
    from .state_store import coordinator_key
    gone: list[Key] = [k for k in service.share_states.states
                       if state_partition(service, coordinator_key(k)) == index]
    service.share_states.forget(gone)
    service.share_partitions.forget(gone)
