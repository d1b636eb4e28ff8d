"""Garbage in: the broker answers with an error or closes that connection, never crashes or hangs."""

import random
import socket
import struct

import protocol
from protocol import messages

from tests.broker.raw_client import RawClient, batch  # noqa: F401


def _frames(api_key: int, version: int, rng: random.Random):
    header = struct.pack(">hhi", api_key, version, 99) + struct.pack(">h", 4) + b"fuzz"
    flexible_from = protocol.API_SPECS[api_key].flexible_from
    if flexible_from is not None and version >= flexible_from:
        header += b"\x00"   # empty tagged fields of request header v2
    yield header + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
    yield header + b"\xff" * rng.randint(1, 16)


def test_random_bodies_for_every_api_and_version(broker):
    rng = random.Random(4)
    for api_key, (low, high, _) in sorted(broker.broker.handlers.items()):
        for version in range(low, high + 1):
            for frame in _frames(api_key, version, rng):
                with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
                    sock.sendall(struct.pack(">i", len(frame)) + frame)
                    sock.shutdown(socket.SHUT_WR)
                    while sock.recv(65536):    # an answer or a close; either way, no hang
                        pass
    with RawClient("127.0.0.1", broker.port) as raw:   # still serving
        assert raw.request(18, 3, messages.ApiVersionsRequest(
            client_software_name="x", client_software_version="1")).error_code == 0


def test_truncated_valid_requests(broker):
    with RawClient("127.0.0.1", broker.port) as raw:
        raw.create_topic("trunc")
    P = messages.ProduceRequest
    produce = protocol.encode_request(0, 9, 5, "fuzz", P(
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(
            name="trunc", partition_data=[P.PartitionProduceData(index=0, records=batch([b"x"]))])]))
    for cut in range(8, len(produce), 7):
        frame = produce[:cut]
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
    with RawClient("127.0.0.1", broker.port) as raw:
        assert raw.list_offset("trunc", 0, -1).offset in (0, 1)


def test_unknown_api_key_and_unsupported_version_close_the_connection(broker):
    for api_key, version in ((999, 0), (3, 99), (1, 0)):   # Fetch v0 is below what we serve
        header = struct.pack(">hhi", api_key, version, 1) + struct.pack(">h", 1) + b"x"
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(struct.pack(">i", len(header)) + header)
            assert sock.recv(1) == b""


def test_odd_values_in_valid_requests_get_error_codes(client):
    from protocol import ErrorCode

    client.create_topic("odd")
    assert client.produce("odd", -1, batch([b"x"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.produce("", 0, batch([b"x"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.produce("odd", 0, None).error_code == ErrorCode.INVALID_RECORD
    assert client.produce("odd", 0, b"").error_code == ErrorCode.INVALID_RECORD
    assert client.produce("odd", 0, b"\x00" * 70).error_code in (
        ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE)

    F = messages.FetchRequest
    for offset, partition in ((-10, 0), (0, -5), (2**62, 0)):
        body = F(replica_id=-1, max_wait_ms=-5, min_bytes=-1, max_bytes=-1, isolation_level=7,
                 session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic="odd", partitions=[
                     F.FetchPartition(partition=partition, fetch_offset=offset,
                                      partition_max_bytes=-1)])])
        data = client.request(1, 11, body).responses[0].partitions[0]
        assert data.error_code in (ErrorCode.OFFSET_OUT_OF_RANGE,
                                   ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    assert client.list_offset("odd", 0, -7).offset == -1
    assert client.list_offset("odd", 9, -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    M = messages.MetadataRequest
    [topic] = client.request(3, 12, M(topics=[M.MetadataRequestTopic(name="")])).topics
    assert topic.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION

    D = messages.DescribeConfigsRequest
    result = client.request(32, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=99, resource_name="x", configuration_keys=None)])).results[0]
    assert result.error_code == ErrorCode.INVALID_REQUEST

    R = messages.DeleteRecordsRequest
    response = client.request(21, 2, R(topics=[R.DeleteRecordsTopic(name="odd", partitions=[
        R.DeleteRecordsPartition(partition_index=0, offset=-5)])], timeout_ms=1000))
    assert response.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE

    O = messages.OffsetForLeaderEpochRequest
    response = client.request(23, 4, O(replica_id=-1, topics=[O.OffsetForLeaderTopic(
        topic="odd", partitions=[O.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                            leader_epoch=-5)])]))
    # Kafka 3.9 answers an epoch older than every known one with it and the first epoch's start
    # offset (only -1 is "undefined"): asked on a fresh Kafka, error 0, epoch -5, end offset 0
    answer = response.topics[0].partitions[0]
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (0, -5, 0)
    # and the connection still works
    assert client.list_offset("odd", 0, -2).error_code == 0
