"""A Metadata response spliced from pre-encoded topics is byte for byte the generated encoder's."""

import uuid

import pytest

import protocol
from protocol import messages
from protocol.metadata_answer import EncodedTopicsResponse, encode_topic

Response = messages.MetadataResponse


def _topic(name: str, partitions: int, error: int = 0):
    return Response.MetadataResponseTopic(
        error_code=error, name=name, topic_id=uuid.uuid4(), is_internal=name.startswith("__"),
        partitions=[Response.MetadataResponsePartition(
            error_code=5 if p == 1 else 0, partition_index=p, leader_id=p % 3, leader_epoch=p,
            replica_nodes=[0, 1, 2], isr_nodes=[0, 1], offline_replicas=[2] if p % 2 else [])
            for p in range(partitions)],
        topic_authorized_operations=-2147483648)


def _head(**fields):
    return Response(throttle_time_ms=fields.get("throttle", 0),
                    brokers=[Response.MetadataResponseBroker(node_id=n, host=f"host-{n}", port=9092 + n,
                                                             rack="r1" if n else None) for n in range(3)],
                    cluster_id="cluster-x", controller_id=1, topics=[],
                    cluster_authorized_operations=fields.get("cluster_ops", -2147483648))


@pytest.mark.parametrize("version", range(0, 13))
@pytest.mark.parametrize("count", [0, 1, 7, 130])
def test_spliced_answer_equals_the_direct_encoding(version, count):
    topics = [_topic(f"t{i}", i % 4, error=3 if i == 2 else 0) for i in range(count)]
    if count == 130:
        topics.append(_topic("__consumer_offsets", 50))
    throttle, cluster_ops = 25, (0x0F if 8 <= version <= 10 else -2147483648)
    direct = _head(throttle=throttle, cluster_ops=cluster_ops)
    direct.topics = topics
    expected = protocol.encode_response(3, version, 4242, direct)

    answer = EncodedTopicsResponse(_head(cluster_ops=cluster_ops), [encode_topic(version, t) for t in topics], [])
    answer.throttle_time_ms = throttle          # as the quotas set it after the handler
    assert b"".join(protocol.encode_response_parts(3, version, 4242, answer)) == expected
    assert protocol.encode_response(3, version, 4242, answer) == expected
    _, decoded = protocol.decode_response(3, version, expected)
    assert [t.name for t in decoded.topics] == [t.name for t in topics]
