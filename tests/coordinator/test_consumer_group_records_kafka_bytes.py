"""A KIP-848 consumer group's `__consumer_offsets` records against the bytes Kafka 3.9 wrote.

The hex below is what a Kafka 3.9.0 broker (new group coordinator, `group.coordinator.rebalance.
protocols=classic,consumer`) wrote for group `g-j848`: one Java 3.9 consumer (`group.protocol=consumer`,
client id `m1`) subscribed to topic `j848` (2 partitions), got both partitions at epoch 1 and was stable.
"""

from __future__ import annotations

import uuid

from broker.coordinator.consumer_group import records
from broker.coordinator.consumer_group.model import ClassicMetadata, ConsumerMember, MemberState
from broker.coordinator.serde import decode_group_record, encode_group_record

GROUP = "g-j848"
MEMBER_ID = "BKvDrd6yR6qspVkZEcxX0Q"
TOPIC_ID = uuid.UUID("4dad1ab0-79ad-4601-9d8c-61b2c58c8879")
MEMBER_KEY = "00050006672d6a3834380016424b7644726436795236717370566b5a456378583051"
MEMBER_VALUE = "00000000036d310b2f3132372e302e302e3102056a38343801000493e00001000100"
CURRENT_KEY = "00080006672d6a3834380016424b7644726436795236717370566b5a456378583051"
CURRENT_VALUE = "0000000000010000000000024dad1ab079ad46019d8c61b2c58c8879030000000000000001000100"


def stable_member() -> ConsumerMember:
    member = ConsumerMember(MEMBER_ID)
    member.client_id, member.client_host = "m1", "/127.0.0.1"
    member.subscribed_topic_names, member.rebalance_timeout_ms = ("j848",), 300000
    member.member_epoch, member.previous_member_epoch = 1, 0
    member.assigned = {TOPIC_ID: frozenset({0, 1})}
    return member


def test_a_stable_members_current_assignment_is_written_as_kafka_writes_it():
    member = stable_member()
    assert member.state is MemberState.STABLE
    key, value = encode_group_record(records.current_assignment(GROUP, member))
    assert (key.hex(), value.hex()) == (CURRENT_KEY, CURRENT_VALUE)   # state byte 0 = STABLE


def test_kafkas_current_assignment_replays_as_a_stable_member():
    groups = {}
    records.apply(groups, decode_group_record(bytes.fromhex(MEMBER_KEY), bytes.fromhex(MEMBER_VALUE)))
    records.apply(groups, decode_group_record(bytes.fromhex(CURRENT_KEY), bytes.fromhex(CURRENT_VALUE)))
    member = groups[GROUP].members[MEMBER_ID]
    assert member.state is MemberState.STABLE
    assert (member.member_epoch, member.assigned) == (1, {TOPIC_ID: frozenset({0, 1})})


def test_a_consumer_protocol_members_metadata_is_written_as_kafka_writes_it():
    # "" for no regex, and ClassicMemberMetadata as an explicit null tag (tag 0, size 1, varint 0):
    # Kafka 3.9 reads a missing tag as an empty struct, i.e. a classic-protocol member
    key, value = encode_group_record(records.member_metadata(GROUP, stable_member()))
    assert (key.hex(), value.hex()) == (MEMBER_KEY, MEMBER_VALUE)


def test_kafkas_member_metadata_replays_as_a_consumer_protocol_member():
    value = decode_group_record(bytes.fromhex(MEMBER_KEY), bytes.fromhex(MEMBER_VALUE)).value
    assert value.classic_member_metadata is None and value.subscribed_topic_regex == ""
    groups = {}
    records.apply(groups, decode_group_record(bytes.fromhex(MEMBER_KEY), bytes.fromhex(MEMBER_VALUE)))
    member = groups[GROUP].members[MEMBER_ID]
    assert member.subscribed_topic_regex is None
    assert (member.client_id, member.subscribed_topic_names, member.classic) == ("m1", ("j848",), None)


def test_a_classic_members_metadata_round_trips_behind_a_present_marker():
    member = stable_member()
    member.classic = ClassicMetadata(45000, (("range", b"\x00\x01"),))
    key, value = encode_group_record(records.member_metadata(GROUP, member))
    # one tag (0) of 17 bytes: the present marker 1, then the struct
    assert value.hex().endswith("01" + "00" + "11" + "01" + "0000afc8" + "02" + "0672616e6765" + "03" + "0001" + "00" + "00")
    groups = {}
    records.apply(groups, decode_group_record(key, value))
    assert groups[GROUP].members[MEMBER_ID].classic == member.classic
