"""Replication metrics at scrape time, with the names a Kafka JMX-exporter setup produces.

- ``kafka_server_replicafetchermanager_maxlag``: the largest follower lag (messages behind the
  leader's high watermark) over the partitions this broker follows;
- ``kafka_server_fetcherlagmetrics_consumerlag{topic,partition}``: that lag per followed partition;
- ``kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Produce"}``: acks=all
  produce partitions waiting for their high watermark.

Under-replicated partitions and ISR shrinks/expands are ``broker.metrics``' own series (the replica
manager counts the ISR changes the controller commits for it).
"""

from __future__ import annotations

from prometheus_client.metrics_core import Metric


class ReplicationCollector:
    def __init__(self, manager):
        self.manager = manager

    def collect(self):
        lags = self.manager.fetchers.lag() if self.manager.fetchers is not None else {}
        max_lag = Metric("kafka_server_replicafetchermanager_maxlag",
                         "Largest lag of a followed partition behind its leader (messages).", "gauge")
        max_lag.add_sample(max_lag.name, {"clientId": "Replica"}, max(lags.values(), default=0))
        yield max_lag
        per_partition = Metric("kafka_server_fetcherlagmetrics_consumerlag",
                               "Lag of each followed partition behind its leader (messages).", "gauge")
        for (topic, partition), lag in sorted(lags.items()):
            per_partition.add_sample(per_partition.name, {"topic": topic, "partition": str(partition)},
                                     lag)
        yield per_partition
        purgatory = Metric("kafka_server_delayedoperationpurgatory_purgatorysize",
                           "Requests waiting in a purgatory (acks=all produce partitions).", "gauge")
        purgatory.add_sample(purgatory.name, {"delayedOperation": "Produce"},
                             self.manager.purgatory_size)
        yield purgatory
