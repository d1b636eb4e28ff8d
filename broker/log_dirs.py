"""Offline log dirs made visible: Kafka's OfflineLogDirectoryCount gauge and a /readyz condition.

Storage logs the cause once at ERROR when a dir goes offline (storage.manager); this module shows
it to operators: `kafka_log_logmanager_offlinelogdirectorycount` on /metrics and a `log_dirs`
condition on /readyz that names each offline dir and its cause, and fails once no dir is left. A
cluster node whose every dir failed halts instead (exit status 1), as Kafka's broker does.
"""

from __future__ import annotations

import logging
import os

from prometheus_client.core import Metric

logger = logging.getLogger("odradek.log_dirs")


class OfflineLogDirCollector:
    def __init__(self, broker) -> None:
        self.broker = broker

    def collect(self):
        logs = self.broker.logs
        gauge = Metric("kafka_log_logmanager_offlinelogdirectorycount",
                       "Log dirs taken offline by an I/O error (disk full, failing disk).", "gauge")
        gauge.add_sample(gauge.name, {}, len(logs.offline_dirs) if logs is not None else 0)
        yield gauge


def log_dirs_readiness(broker) -> tuple[bool, str]:
    logs = broker.logs
    if logs is None or not logs.offline_dirs:
        return True, "ok"
    offline = "; ".join(f"{d} offline ({cause})" for d, cause in sorted(logs.offline_dirs.items()))
    return len(logs.offline_dirs) < len(logs.log_dirs), offline


def halt_when_every_dir_fails(offline: dict[str, str]) -> None:
    """A cluster node with no log dir left halts, as Kafka's broker does ("Shutdown broker because
    all log dirs ... have failed"): alive, it would stay the leader of partitions it cannot write
    (they answer KAFKA_STORAGE_ERROR until a restart, even once the disk has room again); halted,
    it is fenced and its partitions move to in-sync replicas. No clean shutdown: nothing can be
    flushed, and the next start recovers the logs."""
    logger.critical("Shutdown broker because all log dirs in %s have failed",
                    ", ".join(sorted(offline)))
    logging.shutdown()
    os._exit(1)


def watch_log_dirs(broker) -> None:
    broker.metrics.registry.register(OfflineLogDirCollector(broker))
    broker.health.add_check("log_dirs", lambda: log_dirs_readiness(broker))
    if broker.config.multi_node and broker.logs is not None:
        # a single node stays up and says so on /readyz: there is no replica to take over
        broker.logs.on_every_dir_offline = halt_when_every_dir_fails
