"""Structured logging: text and JSON lines, the banner, the optional request log."""

import io
import json
import logging

import pytest

from broker.logs import RequestLogger, configure_logging, log_startup_banner


@pytest.fixture
def restore_logger():
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield
    root.handlers[:], root.level = saved
    logging.getLogger("odradek.request").setLevel(logging.NOTSET)


def test_json_banner_and_request_lines(restore_logger):
    out = io.StringIO()
    configure_logging("INFO", "json", out, request_log=True)
    log_startup_banner(version="0.1.0", node_id=1, listeners=["PLAINTEXT://127.0.0.1:9092"],
                       log_dirs=["/data"], overrides={"num.partitions": "3"}, metrics_port=9404)
    logging.getLogger("odradek.other").debug("not at INFO")
    RequestLogger().log("Produce", 9, "my-app", 0.0123, error="NOT_LEADER_OR_FOLLOWER",
                        correlation_id=7)
    configure_logging("INFO", "json", out)  # request log off again
    assert not RequestLogger().enabled
    RequestLogger().log("Fetch", 12, "x", 0.1)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 3
    banner, override, request = lines
    assert banner["msg"] == "Odradek broker started" and banner["level"] == "INFO"
    assert banner["listeners"] == "PLAINTEXT://127.0.0.1:9092" and banner["metrics_port"] == 9404
    assert override["key"] == "num.partitions" and override["value"] == "3"
    assert request == {**request, "logger": "odradek.request", "level": "DEBUG", "api": "Produce",
                       "version": 9,
                       "client_id": "my-app", "latency_ms": 12.3, "correlation_id": 7,
                       "error": "NOT_LEADER_OR_FOLLOWER"}
    assert request["ts"].endswith("Z")


def test_text_format_and_levels(restore_logger):
    out = io.StringIO()
    configure_logging("warning", "text", out)
    log = logging.getLogger("odradek.storage")
    log.info("hidden")
    log.warning("segment rolled", extra={"fields": {"topic": "a b", "offset": 10}})
    (line,) = out.getvalue().splitlines()
    assert " WARNING odradek.storage segment rolled " in line
    assert line.endswith('topic="a b" offset=10')


def test_configure_is_idempotent_and_validates(restore_logger):
    out = io.StringIO()
    configure_logging("INFO", "text", out)
    configure_logging("INFO", "text", out)
    logging.getLogger("odradek").info("once")
    logging.getLogger("broker.controller.controller").info("libraries too")
    assert out.getvalue().count("once") == 1 and "libraries too" in out.getvalue()
    with pytest.raises(ValueError):
        configure_logging("LOUD")
    with pytest.raises(ValueError):
        configure_logging("INFO", "xml")


def test_banner_hides_secrets_also_per_listener(restore_logger):
    out = io.StringIO()
    configure_logging("INFO", "json", out)
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="s3cret";'
    log_startup_banner(version="0.1.0", node_id=1, listeners=[], overrides={
        "listener.name.client.plain.sasl.jaas.config": jaas, "ssl.keystore.password": "s3cret",
        "listener.name.client.ssl.keystore.location": "/keys/server.pem"})
    assert "s3cret" not in out.getvalue()
    shown = {line["key"]: line["value"] for line in map(json.loads, out.getvalue().splitlines())
             if line["msg"] == "config override"}
    assert shown == {"listener.name.client.plain.sasl.jaas.config": "[hidden]",
                     "ssl.keystore.password": "[hidden]",
                     "listener.name.client.ssl.keystore.location": "/keys/server.pem"}
