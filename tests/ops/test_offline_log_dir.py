"""A log dir going offline (disk full, I/O error): the cause logged once at ERROR, Kafka's
OfflineLogDirectoryCount gauge on /metrics, and /readyz naming the dir (503: it was the only one)."""

from __future__ import annotations

import errno
import json
import logging
import os
import urllib.error
import urllib.request

from broker.testing import running_broker
from protocol import ErrorCode
from tests.broker.raw_client import RawClient, batch


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_an_offline_log_dir_is_logged_once_counted_and_shown_in_readyz(tmp_path, monkeypatch, caplog):
    with running_broker(tmp_path / "data", {"metrics.port": "0"}) as running:
        port = running.broker.metrics_port
        with RawClient("127.0.0.1", running.port) as client:
            assert client.create_topic("doomed", 2).error_code == 0
            assert client.produce("doomed", 0, batch([b"before"])).error_code == 0
            assert _get(port, "/readyz")[0] == 200

            def disk_full(*_args):
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(os, "pwritev", disk_full)
            with caplog.at_level(logging.ERROR, logger="storage"):
                for partition in (0, 0, 1):
                    answer = client.produce("doomed", partition, batch([b"lost"]))
                    assert answer.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            monkeypatch.undo()

        offline = [r for r in caplog.records if "is offline" in r.getMessage()]
        assert len(offline) == 1 and offline[0].levelno == logging.ERROR
        assert "No space left on device" in offline[0].getMessage()
        metrics = _get(port, "/metrics")[1]
        assert "kafka_log_logmanager_offlinelogdirectorycount 1.0" in metrics
        status, body = _get(port, "/readyz")
        assert status == 503
        detail = json.loads(body)["checks"]["log_dirs"]
        assert "offline" in detail and "No space left on device" in detail
