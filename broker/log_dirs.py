"""Offline log dirs made visible: Kafka's OfflineLogDirectoryCount gauge and a /readyz condition.

Storage logs the cause once at ERROR when a dir goes offline (storage.manager); this module shows
it to operators: `kafka_log_logmanager_offlinelogdirectorycount` on /metrics and a `log_dirs`
condition on /readyz that names each offline dir and its cause, and fails once no dir is left.
"""

from __future__ import annotations

from prometheus_client.core import Metric


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


def watch_log_dirs(broker) -> None:
    broker.metrics.registry.register(OfflineLogDirCollector(broker))
    broker.health.add_check("log_dirs", lambda: log_dirs_readiness(broker))
