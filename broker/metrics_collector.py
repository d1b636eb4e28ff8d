"""Scrape-time collection of ``broker.metrics.BrokerMetrics``: its plain counters and its sources
turned into Prometheus metric families."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.metrics_core import Metric

from broker.metrics import _PHASES, _TOPIC_COUNTERS, BrokerMetrics, PartitionSnapshot, _error_name


def _family(name: str, doc: str, kind: str) -> Metric:
    return Metric(name, doc, kind)


class Collector:
    """Turns a BrokerMetrics' plain counters and its sources into metric families at scrape time."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.m = metrics

    def collect(self) -> Iterable[Metric]:
        yield from self._info()
        yield from self._topic_metrics()
        yield from self._request_metrics()
        yield from self._connection_metrics()
        yield from self._storage_and_raft_events()
        partitions = _safe_list(self.m.source("partition"))
        yield from self._partition_metrics(partitions)
        yield from self._group_metrics(partitions)
        yield from self._controller_metrics()

    # -- recorded

    def _info(self) -> Iterable[Metric]:
        info = _family("odradek_build_info", "Always 1; the labels say which broker this is.", "gauge")
        info.add_sample("odradek_build_info",
                        {"version": self.m.version, "node_id": str(self.m.node_id)}, 1)
        yield info
        lag = _family("odradek_event_loop_lag_seconds",
                      "How late the event loop last woke a timer (see /healthz).", "gauge")
        lag.add_sample("odradek_event_loop_lag_seconds", {}, self.m.loop_lag_seconds)
        yield lag

    def _topic_metrics(self) -> Iterable[Metric]:
        topics = list(self.m._topics.items())
        for suffix, (attr, doc) in _TOPIC_COUNTERS.items():
            name = f"kafka_server_brokertopicmetrics_{suffix}"
            fam = _family(name, doc + " Without a topic label: all topics.", "counter")
            for topic, stats in topics:
                labels = {} if topic is None else {"topic": topic}
                fam.add_sample(name + "_total", labels, getattr(stats, attr))
            yield fam

    def _request_metrics(self) -> Iterable[Metric]:
        reqs = self.m.request_stats()
        rate = _family("kafka_network_requestmetrics_requests",
                       "Requests answered, per API and version.", "counter")
        errors = _family("kafka_network_requestmetrics_errors",
                         "Error codes returned, per API and Kafka error name.", "counter")
        phases = {attr: _family(f"kafka_network_requestmetrics_{suffix}", doc, "histogram")
                  for suffix, (attr, doc) in _PHASES.items()}
        for api_key, stats in reqs:
            request = self.m.api_name(api_key)
            for version, n in sorted(stats.by_version.items()):
                rate.add_sample(rate.name + "_total", {"request": request, "version": str(version)}, n)
            for code, n in sorted(stats.errors.items()):
                errors.add_sample(errors.name + "_total",
                                  {"request": request, "error": _error_name(code)}, n)
            for attr, fam in phases.items():
                getattr(stats, attr).add_to(fam, {"request": request})
        yield rate
        yield errors
        yield from phases.values()
        inflight = _family("kafka_network_requestchannel_requestqueuesize",
                           "Requests received and not yet answered (in flight).", "gauge")
        inflight.add_sample(inflight.name, {}, self.m.in_flight)
        yield inflight

    def _connection_metrics(self) -> Iterable[Metric]:
        base = "kafka_server_socket_server_metrics_"
        count = _family(base + "connection_count", "Open client connections.", "gauge")
        created = _family(base + "connection_creation", "Connections accepted.", "counter")
        closed = _family(base + "connection_close", "Connections closed.", "counter")
        for listener, (n_open, n_created, n_closed) in sorted(self.m._connections.items()):
            labels = {"listener": listener}
            count.add_sample(count.name, labels, n_open)
            created.add_sample(created.name + "_total", labels, n_created)
            closed.add_sample(closed.name + "_total", labels, n_closed)
        yield from (count, created, closed)

    def _storage_and_raft_events(self) -> Iterable[Metric]:
        m = self.m
        shrinks = _family("kafka_server_replicamanager_isrshrinks", "ISR shrinks.", "counter")
        shrinks.add_sample(shrinks.name + "_total", {}, m.isr_shrinks)
        expands = _family("kafka_server_replicamanager_isrexpands", "ISR expands.", "counter")
        expands.add_sample(expands.name + "_total", {}, m.isr_expands)
        yield shrinks
        yield expands
        with m._lock:
            flush = _family("kafka_log_logflushstats_logflushrateandtimems",
                            "Log flush (fsync) latency (ms).", "histogram")
            m._flush.add_to(flush, {})
            elections = _family("kafka_server_raft_metrics_election_latency_ms",
                                "Controller elections and their duration (ms); _count is the "
                                "number of elections.", "histogram")
            m._elections.add_to(elections, {})
            recovery_ms, segments = m.recovery_duration_ms, m.recovered_segments
        yield flush
        yield elections
        if recovery_ms is not None:
            rec = _family("kafka_log_logmanager_recoverytimems",
                          "How long start-up log recovery took (ms).", "gauge")
            rec.add_sample(rec.name, {}, recovery_ms)
            yield rec
            seg = _family("kafka_log_logmanager_recoveredsegments",
                          "Segments scanned by start-up log recovery.", "gauge")
            seg.add_sample(seg.name, {}, segments)
            yield seg

    # -- lazy

    def _partition_metrics(self, partitions: list[PartitionSnapshot]) -> Iterable[Metric]:
        base = "kafka_server_replicamanager_"
        counts = {"partitioncount": ("Partitions hosted on this broker.", len(partitions)),
                  "leadercount": ("Partitions this broker leads.",
                                  sum(1 for p in partitions if p.is_leader)),
                  "underreplicatedpartitions": ("Led partitions whose ISR is smaller than the "
                                                "replica set.",
                                                sum(1 for p in partitions
                                                    if p.is_leader and p.isr < p.replicas))}
        for suffix, (doc, value) in counts.items():
            fam = _family(base + suffix, doc, "gauge")
            fam.add_sample(fam.name, {}, value)
            yield fam
        if self.m.source("controller") is None:    # else the controller counts the whole cluster
            offline = _family("kafka_controller_kafkacontroller_offlinepartitionscount",
                              "Partitions without a live leader.", "gauge")
            offline.add_sample(offline.name, {}, sum(1 for p in partitions if p.offline))
            yield offline

        per_partition = {
            "size": ("Bytes of the partition's log on disk.", "size_bytes"),
            "logendoffset": ("The partition's log end offset.", "log_end_offset"),
            "logstartoffset": ("The partition's log start offset.", "log_start_offset"),
            "numlogsegments": ("Segments in the partition's log.", "num_segments"),
        }
        for suffix, (doc, attr) in per_partition.items():
            fam = _family(f"kafka_log_log_{suffix}", doc, "gauge")
            for p in partitions:
                fam.add_sample(fam.name, {"topic": p.topic, "partition": str(p.partition)},
                               getattr(p, attr))
            yield fam

    def _group_metrics(self, partitions: list[PartitionSnapshot]) -> Iterable[Metric]:
        if self.m.source("group") is None:
            return
        groups = _safe_list(self.m.source("group"))
        latest = {(p.topic, p.partition): p.log_end_offset if p.high_watermark is None
                  else p.high_watermark for p in partitions}
        base = "kafka_coordinator_group_groupmetadatamanager_"
        numgroups = _family(base + "numgroups", "Consumer groups this coordinator owns.", "gauge")
        numgroups.add_sample(numgroups.name, {}, len(groups))
        yield numgroups
        for state in ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead"):
            fam = _family(base + "numgroups" + state.lower(), f"Groups in state {state}.", "gauge")
            fam.add_sample(fam.name, {}, sum(1 for g in groups if g.state == state))
            yield fam

        members = _family("kafka_consumergroup_members", "Members of each consumer group.", "gauge")
        offset = _family("kafka_consumergroup_current_offset",
                         "Committed offset per group and partition.", "gauge")
        lag = _family("kafka_consumergroup_lag",
                      "Latest offset minus committed offset per group and partition.", "gauge")
        lag_sum = _family("kafka_consumergroup_lag_sum", "Lag summed per group and topic.", "gauge")
        # Every per-group series draws on one budget, so many groups cannot explode cardinality.
        budget = self.m.max_lag_series
        for g in groups:
            if budget <= 0:
                break
            budget -= 1
            members.add_sample(members.name, {"consumergroup": g.group_id}, g.members)
            sums: dict[str, int] = {}
            for (topic, partition), committed in sorted(g.committed.items()):
                end = latest.get((topic, partition))
                if end is None or committed < 0:
                    continue  # not hosted here, or no real commit yet
                behind = max(0, end - committed)
                sums[topic] = sums.get(topic, 0) + behind
                if budget > 0:
                    budget -= 1
                    labels = {"consumergroup": g.group_id, "topic": topic,
                              "partition": str(partition)}
                    offset.add_sample(offset.name, labels, committed)
                    lag.add_sample(lag.name, labels, behind)
            for topic, total in sorted(sums.items()):
                budget -= 1
                lag_sum.add_sample(lag_sum.name, {"consumergroup": g.group_id, "topic": topic},
                                   total)
        yield from (members, offset, lag, lag_sum)

    def _controller_metrics(self) -> Iterable[Metric]:
        source = self.m.source("controller")
        if source is None:
            return
        try:
            c = source()
        except Exception:
            return
        if c is None:
            return
        values = [
            ("kafka_controller_kafkacontroller_activecontrollercount",
             "1 on the node that is the active controller.", int(c.is_active)),
            ("kafka_controller_kafkacontroller_lastcommittedrecordoffset",
             "Offset of the last metadata record committed by the quorum.", c.last_committed_offset),
            ("kafka_controller_kafkacontroller_lastappliedrecordoffset",
             "Offset of the last metadata record applied to this node's image.",
             c.last_applied_offset),
            ("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster.",
             c.topic_count),
            ("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster.",
             c.partition_count),
            ("kafka_controller_kafkacontroller_activebrokercount", "Registered live brokers.",
             c.broker_count),
            ("kafka_controller_kafkacontroller_fencedbrokercount",
             "Registered brokers that are fenced (heartbeats stopped, or shutting down).",
             c.fenced_broker_count),
            ("kafka_controller_kafkacontroller_offlinepartitionscount",
             "Partitions without a live leader (counted by the active controller).",
             c.offline_partition_count),
            ("kafka_server_raft_metrics_current_epoch", "The quorum's current epoch.", c.epoch),
            ("kafka_server_raft_metrics_current_leader",
             "Node id of the quorum leader, -1 when unknown.",
             -1 if c.leader_id is None else c.leader_id),
            ("kafka_server_raft_metrics_high_watermark", "The metadata log's high watermark.",
             c.high_watermark),
        ]
        for name, doc, value in values:
            fam = _family(name, doc, "gauge")
            fam.add_sample(name, {}, value)
            yield fam
        lag = _family("kafka_server_raft_metrics_replica_lag",
                      "On the active controller: how many metadata log entries each voter and "
                      "observer (broker) is behind its log end.", "gauge")
        for node, behind in sorted(c.replica_lag.items()):
            lag.add_sample(lag.name, {"node_id": str(node)}, behind)
        yield lag


def _safe_list(source: Callable[[], Iterable] | None) -> list:
    """Read a source at scrape time; a failing source yields no series rather than a 500."""
    if source is None:
        return []
    try:
        return list(source())
    except Exception:
        return []


