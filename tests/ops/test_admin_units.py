"""Admin pieces that need no broker: consumer protocol bytes, range assignor, partitioner,
time parsing, argument parsing."""

import pytest

from broker.admin import build_parser
from broker.admin.client import KafkaError, parse_bootstrap
from broker.admin.consumer_protocol import (decode_assignment, decode_subscription,
                                            encode_assignment, encode_subscription, murmur2,
                                            murmur2_partition, range_assign)
from broker.admin.offsets import EARLIEST, LATEST, MAX_TIMESTAMP, parse_time


def _signed(x: int) -> int:
    return x - (1 << 32) if x >= 1 << 31 else x


def test_murmur2_matches_kafka_vectors():
    # Kafka's own test vectors for Utils.murmur2
    assert _signed(murmur2(b"21")) == -973932308
    assert _signed(murmur2(b"foobar")) == -790332482
    assert _signed(murmur2(b"a-little-bit-long-string")) == -985981536
    assert _signed(murmur2(b"a-little-bit-longer-string")) == -1486304829
    assert _signed(murmur2(b"abc")) == 479470107
    assert all(0 <= murmur2_partition(bytes([i]), 7) < 7 for i in range(256))


def test_subscription_and_assignment_round_trip():
    sub = encode_subscription(["b", "a", "a"])
    assert sub[:2] == b"\x00\x00" and decode_subscription(sub) == ["a", "b"]
    data = encode_assignment({"t": [0, 2], "u": [1]})
    assert decode_assignment(data) == {"t": [0, 2], "u": [1]}
    assert decode_assignment(b"") == {}
    with pytest.raises(ValueError):
        decode_assignment(data[:-3])


def test_range_assignor_like_kafka():
    plan = range_assign({"m2": ["t"], "m1": ["t", "u"]}, {"t": 5, "u": 2})
    assert plan["m1"] == {"t": [0, 1, 2], "u": [0, 1]}
    assert plan["m2"] == {"t": [3, 4]}
    assert range_assign({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 1}) == \
        {"a": {"t": [0]}, "b": {}, "c": {}}


def test_parse_time():
    assert parse_time("earliest") == EARLIEST and parse_time("latest") == LATEST
    assert parse_time("max-timestamp") == MAX_TIMESTAMP
    assert parse_time("1700000000000") == 1700000000000
    assert parse_time("2024-01-01T00:00:00Z") == 1704067200000
    assert parse_time("2024-01-01T01:00:00+01:00") == 1704067200000
    assert parse_time("2024-01-01") == 1704067200000  # no zone: UTC
    with pytest.raises(ValueError):
        parse_time("yesterday")


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, PLAINTEXT://b:2") == [("a", 1), ("b", 2)]
    with pytest.raises(ValueError):
        parse_bootstrap("nohost")


def test_every_subcommand_parses():
    parser = build_parser()
    for argv in (["topics", "create", "t", "-p", "3"], ["topics", "list"],
                 ["topics", "describe"], ["topics", "delete", "t"],
                 ["topics", "alter-configs", "t", "--set", "a=b"],
                 ["topics", "add-partitions", "t", "--total", "4"],
                 ["groups", "list"], ["groups", "describe", "g"],
                 ["groups", "reset-offsets", "g", "--all-topics", "--to-earliest"],
                 ["groups", "delete", "g"], ["configs", "describe", "--topic", "t"],
                 ["configs", "alter", "--broker", "1", "--set", "a=b"],
                 ["offsets", "t", "--time", "latest"], ["delete-records", "t", "--offset", "3"],
                 ["produce", "t", "-v", "x"], ["consume", "t", "--count", "1"],
                 ["cluster", "describe"], ["cluster", "api-versions"], ["quorum", "describe"]):
        args = parser.parse_args(argv + ["--json", "-b", "h:1"])
        assert callable(args.func) and args.bootstrap_server == "h:1" and args.json


def test_unreachable_broker_is_a_clear_error(capsys):
    from broker.admin import main
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["topics", "list", "-b", f"127.0.0.1:{port}", "--timeout", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("odradek: error: NETWORK_EXCEPTION: cannot connect to 127.0.0.1:")


def test_kafka_error_text():
    exc = KafkaError(36, "Topic 't' already exists.", "topic t")
    assert str(exc) == "topic t: TOPIC_ALREADY_EXISTS: Topic 't' already exists."
    assert KafkaError(9999).name == "UNKNOWN_ERROR_9999"
