"""Scenario 14: Celery with the broker as its message queue (kombu's ``confluentkafka`` transport).

A real ``celery worker`` process runs tasks sent with delay, apply_async, a chain and a group; then it
is stopped (SIGTERM, a warm shutdown) with tasks still queued and a new worker takes over: every result
comes back, none is lost. Results go through Celery's file system backend (no other server).
Skips unless celery and kombu are importable (``pip install celery "kombu[confluentkafka]"``).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("celery", reason="needs celery: pip install celery 'kombu[confluentkafka]'")
pytest.importorskip("kombu.transport.confluentkafka", reason="needs kombu with its confluentkafka transport")

from odradek_compat.brokers import terminate  # noqa: E402

TASKS = textwrap.dedent("""
    import os
    from celery import Celery

    app = Celery("celery_on_kafka", broker="confluentkafka://" + os.environ["CELERY_KAFKA_BOOTSTRAP"],
                 backend="file://" + os.environ["CELERY_KAFKA_RESULTS"])
    app.conf.update(task_default_queue=os.environ["CELERY_KAFKA_QUEUE"],
                    worker_enable_remote_control=False,      # pidbox needs fanout: not in this transport
                    broker_transport_options={"wait_time_seconds": 1})

    @app.task
    def add(x, y):
        return x + y

    @app.task
    def mul(x, y):
        return x * y

    @app.task
    def echo(i):
        import time
        time.sleep(0.02)
        return i
""")


@pytest.fixture
def celery_tasks(broker, names, tmp_path, monkeypatch):
    """The tasks module (importable here and by the worker), configured for this broker."""
    (tmp_path / "results").mkdir()
    (tmp_path / "celery_on_kafka.py").write_text(TASKS)
    monkeypatch.setenv("CELERY_KAFKA_BOOTSTRAP", broker["bootstrap"])
    monkeypatch.setenv("CELERY_KAFKA_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("CELERY_KAFKA_QUEUE", names("celery"))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("celery_on_kafka")
    yield module
    module.app.close()   # its producers, before the session's broker goes
    sys.modules.pop("celery_on_kafka", None)


def start_worker(directory, log_path):
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "celery_on_kafka", "worker", "--pool=solo",
             "--without-mingle", "--without-gossip", "--without-heartbeat", "--loglevel=info"],
            cwd=directory, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.timeout(120)
def test_celery_worker_on_kafka(celery_tasks, tmp_path):
    from celery import chain, group

    add, mul, echo = celery_tasks.add, celery_tasks.mul, celery_tasks.echo
    log_path = tmp_path / "worker.log"
    worker = start_worker(tmp_path, log_path)
    try:
        assert add.delay(2, 3).get(timeout=60) == 5
        assert mul.apply_async((4, 5)).get(timeout=30) == 20
        assert chain(add.s(1, 1), mul.s(10), add.s(7))().get(timeout=30) == 27
        assert group(add.s(i, i) for i in range(10))().get(timeout=30) == [2 * i for i in range(10)]

        queued = [echo.delay(i) for i in range(60)]
        deadline = time.monotonic() + 30
        while not any(r.ready() for r in queued) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert terminate(worker, 20) == 0   # warm shutdown, mid-stream
        queued += [echo.delay(i) for i in range(60, 80)]
        worker = start_worker(tmp_path, log_path)
        assert [r.get(timeout=60) for r in queued] == list(range(80))
    finally:
        terminate(worker, 20)
    log = log_path.read_text()
    assert log.count("celery@") >= 2 and " ready." in log, log[-2000:]
    assert "ERROR" not in log and "Traceback" not in log, log[-4000:]
