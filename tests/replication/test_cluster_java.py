"""The Java client's idempotent acks=all producer against a 3-node cluster while the leader is killed
(compat-tests' Java driver; skipped without a JDK and the kafka-clients jars). Marked slow: a JVM
plus a cluster; `pytest -m slow tests/replication/test_cluster_java.py` runs it."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from tests.replication.test_cluster_replication import FAST_FAILURE, _consume_all, _create, _state
from broker.testing_cluster import running_cluster

COMPAT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "compat-tests")
sys.path.insert(0, COMPAT)
from odradek_compat.clients.java import JavaClient, jars_missing  # noqa: E402
from odradek_compat.records import Rec  # noqa: E402

pytestmark = pytest.mark.slow

CHUNKS, PER_CHUNK = 12, 1500


@pytest.mark.skipif(jars_missing("java-4") is not None, reason=str(jars_missing("java-4")))
def test_java_idempotent_producer_loses_nothing_when_the_leader_dies(tmp_path):
    with running_cluster(tmp_path, nodes=3, overrides=FAST_FAILURE) as cluster:
        _create(cluster, "java-precious")
        leader, _ = _state(cluster, 1, "java-precious")
        client = JavaClient(cluster.bootstrap, "java-4")
        deliveries, failures = [], []
        progress = threading.Event()

        def stream():
            try:
                for chunk in range(CHUNKS):
                    records = [Rec(key=None, value=b"%08d" % (chunk * PER_CHUNK + i), partition=0)
                               for i in range(PER_CHUNK)]
                    deliveries.extend(client.produce("java-precious", records, acks="all",
                                                     idempotent=True, linger_ms=1, timeout=120))
                    progress.set()
            except Exception as exc:   # surfaced below
                failures.append(exc)

        worker = threading.Thread(target=stream)
        worker.start()
        assert progress.wait(120)
        time.sleep(0.3)                # the next chunk is on its way
        cluster.kill(leader)
        killed_at = len(deliveries)
        worker.join(600)
        client.close()
        assert not failures and not worker.is_alive()
        assert all(d.error is None for d in deliveries), [d.error for d in deliveries if d.error][:3]
        total = CHUNKS * PER_CHUNK
        assert killed_at <= total - 2 * PER_CHUNK      # the stream went on past the kill
        got = _consume_all(cluster.bootstrap, "java-precious", total, timeout=90)
        assert [value for _, value in got] == [b"%08d" % i for i in range(total)]
        assert sorted(d.offset for d in deliveries) == [offset for offset, _ in got]
