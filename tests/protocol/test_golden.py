"""Golden frames recorded from real clients (confluent-kafka/librdkafka, kafka-python, aiokafka, the
Java client) talking to the reference Apache Kafka 3.9 through tests/protocol/golden/record.py.

Every request re-encodes byte-identically: real clients write Kafka's canonical form. (librdkafka
appends three stray bytes after one Metadata v12 body; like Kafka, decoding ignores bytes after
the body, and the rest is identical.) Every response of Kafka's decodes and re-encodes to exactly
its bytes. (The first vectors came from Tansu, which writes tagged fields at their defaults.)
"""

import json
from pathlib import Path

import pytest

import protocol

GOLDEN = Path(__file__).resolve().parent / "golden"
FRAMES = [
    (path.stem, json.loads(line))
    for path in sorted(GOLDEN.glob("*.jsonl"))
    for line in path.read_text().splitlines()
]
REQUESTS = [(client, f) for client, f in FRAMES if f["dir"] == "request"]
RESPONSES = [(client, f) for client, f in FRAMES if f["dir"] == "response"]


def _id(item):
    client, frame = item
    spec = protocol.API_SPECS[frame["api_key"]]
    return f"{client}-{spec.name}-v{frame['api_version']}"


def test_vectors_cover_every_client_and_the_hot_apis():
    clients = {client for client, _ in FRAMES}
    assert clients == {"confluent-kafka", "kafka-python", "aiokafka", "java"}
    apis = {f["api_key"] for _, f in FRAMES}
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 16, 18, 19, 20, 22, 24, 26, 32, 60} <= apis


@pytest.mark.parametrize("client, frame", REQUESTS, ids=[_id(r) for r in REQUESTS])
def test_requests_reencode_byte_identically(client, frame):
    data = bytes.fromhex(frame["hex"])
    header, body = protocol.decode_request(data)
    assert (header.api_key, header.api_version) == (frame["api_key"], frame["api_version"])
    again = protocol.encode_request(header.api_key, header.api_version, header.correlation_id, header.client_id, body)
    if again != data:
        assert client == "confluent-kafka" and header.api_key == 3 and data.startswith(again), \
            "only librdkafka's Metadata request carries trailing bytes"
        assert len(data) - len(again) == 3


@pytest.mark.parametrize("client, frame", RESPONSES, ids=[_id(r) for r in RESPONSES])
def test_responses_decode_and_reencode(client, frame):
    data = bytes.fromhex(frame["hex"])
    key, version = frame["api_key"], frame["api_version"]
    correlation_id, body = protocol.decode_response(key, version, data)
    again = protocol.encode_response(key, version, correlation_id, body)
    assert protocol.decode_response(key, version, again) == (correlation_id, body)
    assert again == data


def test_fetch_records_decode_as_slices_of_the_frame():
    fetches = [f for _, f in RESPONSES if f["api_key"] == 1]
    found = 0
    for frame in fetches:
        data = bytearray.fromhex(frame["hex"])
        _, body = protocol.decode_response(1, frame["api_version"], data)
        for topic in body.responses:
            for partition in topic.partitions:
                if partition.records:
                    assert partition.records.obj is data
                    found += 1
    assert found


def test_interpreted_construct_path_agrees_on_real_requests():
    """construct's interpreted parse (the reference path) reads real frames as the compiled one does."""
    from protocol import messages as m

    for _, frame in REQUESTS:
        data = bytes.fromhex(frame["hex"])
        header, offset = protocol.decode_request_header(data)
        schema = m.REQUESTS[header.api_key].SCHEMAS[header.api_version]
        compiled = protocol.decode_request_body(header, data, offset)
        assert schema.parse(data[offset:]) == compiled
