"""The metadata image: deterministic application, snapshot round trip, record framing."""

import uuid

import pytest

from broker.controller import records as r
from broker.controller.image import ImageError, MetadataImage

T1 = uuid.UUID(int=11)


def _records():
    return [
        r.RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.UUID(int=5), broker_epoch=3,
                               end_points=[r.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)], rack="r1"),
        r.UnfenceBrokerRecord(id=1, epoch=3),
        r.TopicRecord(name="t", topic_id=T1),
        r.PartitionRecord(partition_id=0, topic_id=T1, replicas=[1], isr=[1], leader=1,
                          leader_epoch=0, partition_epoch=0),
        r.ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="5"),
        r.ConfigRecord(resource_type=4, resource_name="", name="log.retention.ms", value="7"),
        r.PartitionChangeRecord(partition_id=0, topic_id=T1, leader=-1),
        r.ProducerIdsRecord(broker_id=1, next_producer_id=2000),
    ]


def test_apply_and_round_trip():
    records = _records()
    framed = r.decode_records(r.encode_records(records))
    assert framed == records
    image = MetadataImage(cluster_id="c").apply(framed, 9)
    assert image.offset == 9 and image.cluster_id == "c"
    assert image.brokers[1].fenced is False and image.brokers[1].endpoints[0].port == 9092
    part = image.partition("t", 0)
    assert (part.leader, part.leader_epoch, part.partition_epoch) == (-1, 1, 1)
    assert image.topic_configs == {"t": {"retention.ms": "5"}}
    assert image.next_producer_id == 2000
    rebuilt = MetadataImage(cluster_id="c").apply(image.to_records(), 9)
    assert rebuilt == image


def test_image_is_not_mutated_by_apply():
    base = MetadataImage().apply(_records()[:4], 0)
    after = base.apply([r.RemoveTopicRecord(topic_id=T1)], 1)
    assert "t" in base.topics and "t" not in after.topics
    with pytest.raises(TypeError):
        base.topics["x"] = None


def test_bad_records_are_rejected():
    with pytest.raises(ImageError):
        MetadataImage().apply([r.PartitionRecord(partition_id=0, topic_id=T1)])
    with pytest.raises(r.RecordDecodeError):
        r.decode_record(b"\x00\x63\x00{}")
    with pytest.raises(r.RecordDecodeError):
        r.decode_records(b"\x00\x00\x00\x09\x00")
