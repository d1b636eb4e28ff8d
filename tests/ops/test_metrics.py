"""BrokerMetrics: recorded counters, lazy gauges and the exposition format."""

from ops_helpers import parse_metrics, sample

from broker.metrics import (BrokerMetrics, ControllerSnapshot, GroupSnapshot, OTHER_TOPICS,
                            PartitionSnapshot)


def scrape(m: BrokerMetrics) -> dict:
    return parse_metrics(m.render().decode())


def test_registries_are_per_broker():
    a, b = BrokerMetrics(1), BrokerMetrics(2)
    a.record_produce("t", 3, 300)
    assert sample(scrape(a), "kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 3
    assert sample(scrape(b), "kafka_server_brokertopicmetrics_messagesin_total", topic="t") is None
    assert sample(scrape(b), "kafka_server_brokertopicmetrics_messagesin_total") == 0


def test_topic_counters_per_topic_and_total():
    m = BrokerMetrics(process_metrics=False)
    m.record_produce("a", 10, 1000)
    m.record_produce("a", 5, 500)
    m.record_produce("b", 1, 70)
    m.record_fetch("a", 1500)
    m.record_failed_produce("b")
    m.record_failed_fetch("a")
    s = scrape(m)
    assert sample(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="a") == 15
    assert sample(s, "kafka_server_brokertopicmetrics_messagesin_total") == 16
    assert sample(s, "kafka_server_brokertopicmetrics_bytesin_total", topic="b") == 70
    assert sample(s, "kafka_server_brokertopicmetrics_bytesin_total") == 1570
    assert sample(s, "kafka_server_brokertopicmetrics_bytesout_total", topic="a") == 1500
    assert sample(s, "kafka_server_brokertopicmetrics_totalproducerequests_total") == 3
    assert sample(s, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="b") == 1
    assert sample(s, "kafka_server_brokertopicmetrics_failedfetchrequests_total") == 1
    m.forget_topic("a")
    s = scrape(m)
    assert sample(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="a") is None
    assert sample(s, "kafka_server_brokertopicmetrics_messagesin_total") == 16


def test_topic_series_are_capped():
    m = BrokerMetrics(process_metrics=False, max_topic_series=3)
    for i in range(10):
        m.record_produce(f"t{i}", 1, 1)
    s = scrape(m)
    topics = {dict(labels).get("topic") for (name, labels) in s
              if name == "kafka_server_brokertopicmetrics_messagesin_total"}
    assert len(topics - {None}) <= 4 and OTHER_TOPICS in topics
    assert sample(s, "kafka_server_brokertopicmetrics_messagesin_total") == 10


def test_answers_folded_in_bulk_scrape_as_if_observed_one_by_one():
    """observe_answered keeps answers pending and folds them in bulk (every 256 and before a
    scrape): the exposition must be the same as with observe_request per answer."""
    one_by_one, folded = BrokerMetrics(process_metrics=False), BrokerMetrics(process_metrics=False)
    for i in range(700):   # more than two folds' worth, then a remainder folded by the scrape
        queue_s, local_s, version = (i % 7) * 0.0004, (i % 13) * 0.0031, 7 + i % 3
        one_by_one.observe_request(0, version, queue_s=queue_s, local_s=local_s)
        folded.observe_answered(0, version, queue_s, local_s)
    expected, got = scrape(one_by_one), scrape(folded)
    request = folded.api_name(0)
    assert sample(got, "kafka_network_requestmetrics_requests_total", request=request, version="8") == 233
    for key, value in expected.items():
        if key[0].startswith("kafka_network_requestmetrics"):
            assert abs(got[key] - value) < 1e-6, key
    folded.observe_answered(0, 9, 0.0, 0.001)   # answers after a scrape are counted too
    assert sample(scrape(folded), "kafka_network_requestmetrics_totaltimems_count",
                  request=request) == 701


def test_request_metrics_histograms_and_errors():
    m = BrokerMetrics(process_metrics=False)
    for _ in range(4):
        m.request_received()
    m.observe_request(0, 9, queue_s=0.001, local_s=0.002, send_s=0.0005)
    m.observe_request(0, 9, queue_s=0.0, local_s=0.020, error_code=3)
    m.observe_request(0, 7, local_s=0.0001)
    m.request_done()
    m.count_error(1, 1, 2)
    s = scrape(m)
    request = m.api_name(0)
    assert sample(s, "kafka_network_requestmetrics_requests_total", request=request, version="9") == 2
    assert sample(s, "kafka_network_requestmetrics_requests_total", request=request, version="7") == 1
    assert sample(s, "kafka_network_requestmetrics_totaltimems_count", request=request) == 3
    total = sample(s, "kafka_network_requestmetrics_totaltimems_sum", request=request)
    assert abs(total - (3.5 + 20 + 0.1)) < 1e-6
    # 3.5 ms and 0.1 ms are under 5 ms, 20 ms is not
    assert sample(s, "kafka_network_requestmetrics_totaltimems_bucket", request=request, le="5.0") == 2
    assert sample(s, "kafka_network_requestmetrics_totaltimems_bucket", request=request, le="+Inf") == 3
    assert sample(s, "kafka_network_requestmetrics_requestqueuetimems_sum", request=request) == 1.0
    errors = {dict(l)["error"]: v for (n, l), v in s.items()
              if n == "kafka_network_requestmetrics_errors_total" and dict(l)["request"] == request}
    assert list(errors.values()) == [1] and next(iter(errors)) in ("3", "UNKNOWN_TOPIC_OR_PARTITION")
    assert sample(s, "kafka_network_requestchannel_requestqueuesize") == 3


def test_connections():
    m = BrokerMetrics(process_metrics=False)
    for _ in range(3):
        m.connection_opened("PLAINTEXT")
    m.connection_closed("PLAINTEXT")
    s = scrape(m)
    base = "kafka_server_socket_server_metrics_connection_"
    assert sample(s, base + "count", listener="PLAINTEXT") == 2
    assert sample(s, base + "creation_total", listener="PLAINTEXT") == 3
    assert sample(s, base + "close_total", listener="PLAINTEXT") == 1


def test_lazy_partition_group_and_controller_gauges():
    m = BrokerMetrics(process_metrics=False)
    calls = []

    def partitions():
        calls.append(1)
        return [PartitionSnapshot("t", 0, size_bytes=4096, log_end_offset=100, high_watermark=90,
                                  num_segments=2),
                PartitionSnapshot("t", 1, is_leader=False, log_end_offset=7, replicas=3, isr=2),
                PartitionSnapshot("u", 0, replicas=3, isr=2, log_end_offset=5)]

    m.set_sources(partitions=partitions,
                  groups=lambda: [GroupSnapshot("g", "Stable", 2, {("t", 0): 40, ("u", 0): 5,
                                                                     ("gone", 0): 3}),
                                  GroupSnapshot("h", "Empty", 0, {})],
                  controller=lambda: ControllerSnapshot(is_active=True, leader_id=1, epoch=4,
                                                        high_watermark=12,
                                                        last_committed_offset=11))
    assert calls == []  # nothing read before a scrape
    s = scrape(m)
    assert calls == [1]
    assert sample(s, "kafka_server_replicamanager_partitioncount") == 3
    assert sample(s, "kafka_server_replicamanager_leadercount") == 2
    assert sample(s, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert sample(s, "kafka_log_log_size", topic="t", partition="0") == 4096
    assert sample(s, "kafka_log_log_logendoffset", topic="t", partition="0") == 100
    assert sample(s, "kafka_log_log_numlogsegments", topic="t", partition="0") == 2
    # lag is measured against what consumers can read (the high watermark)
    assert sample(s, "kafka_consumergroup_lag", consumergroup="g", topic="t", partition="0") == 50
    assert sample(s, "kafka_consumergroup_lag", consumergroup="g", topic="u", partition="0") == 0
    assert sample(s, "kafka_consumergroup_lag", consumergroup="g", topic="gone", partition="0") is None
    assert sample(s, "kafka_consumergroup_current_offset", consumergroup="g", topic="t",
                  partition="0") == 40
    assert sample(s, "kafka_consumergroup_lag_sum", consumergroup="g", topic="t") == 50
    assert sample(s, "kafka_consumergroup_members", consumergroup="g") == 2
    assert sample(s, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 2
    assert sample(s, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1
    assert sample(s, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1
    assert sample(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert sample(s, "kafka_server_raft_metrics_current_epoch") == 4
    assert sample(s, "kafka_controller_kafkacontroller_lastcommittedrecordoffset") == 11


def test_failing_source_does_not_break_the_scrape():
    m = BrokerMetrics(process_metrics=False)
    m.set_sources(partitions=lambda: 1 / 0, controller=lambda: 1 / 0)
    s = scrape(m)
    assert sample(s, "kafka_server_replicamanager_partitioncount") == 0


def test_flush_election_recovery():
    m = BrokerMetrics(process_metrics=False)
    m.observe_flush(0.003)
    m.observe_flush(0.2)
    m.observe_election(0.15)
    m.isr_shrink()
    m.isr_expand(2)
    m.set_recovery_duration(1.5, segments=7)
    s = scrape(m)
    assert sample(s, "kafka_log_logflushstats_logflushrateandtimems_count") == 2
    assert sample(s, "kafka_log_logflushstats_logflushrateandtimems_bucket", le="5.0") == 1
    assert sample(s, "kafka_server_raft_metrics_election_latency_ms_count") == 1
    assert sample(s, "kafka_server_replicamanager_isrshrinks_total") == 1
    assert sample(s, "kafka_server_replicamanager_isrexpands_total") == 2
    assert sample(s, "kafka_log_logmanager_recoverytimems") == 1500
    assert sample(s, "kafka_log_logmanager_recoveredsegments") == 7


def test_process_metrics_present():
    s = scrape(BrokerMetrics())
    assert any(name == "process_cpu_seconds_total" for name, _ in s) or \
        not __import__("os").path.exists("/proc/self/stat")


def test_response_error_counts_walk_generated_bodies():
    from protocol import messages

    from broker.metrics import response_error_counts

    resp = messages.ProduceResponse
    body = resp(responses=[
        resp.TopicProduceResponse(name="a", partition_responses=[
            resp.PartitionProduceResponse(index=0, error_code=0),
            resp.PartitionProduceResponse(index=1, error_code=6),
            resp.PartitionProduceResponse(index=2, error_code=6)]),
        resp.TopicProduceResponse(name="b", partition_responses=[
            resp.PartitionProduceResponse(index=0, error_code=3)])])
    assert response_error_counts(body) == {6: 2, 3: 1}
    assert response_error_counts(resp()) == {}

    m = BrokerMetrics(process_metrics=False)
    assert m.count_response_errors(0, body) in (6, 3)
    meta = messages.MetadataResponse(topics=[messages.MetadataResponse.MetadataResponseTopic(
        name="x", error_code=3)])
    assert m.count_response_errors(3, meta) == 3
    s = scrape(m)
    errors = {(dict(l)["request"], dict(l)["error"]): v for (n, l), v in s.items()
              if n == "kafka_network_requestmetrics_errors_total"}
    assert errors == {("Produce", "NOT_LEADER_OR_FOLLOWER"): 2,
                      ("Produce", "UNKNOWN_TOPIC_OR_PARTITION"): 1,
                      ("Metadata", "UNKNOWN_TOPIC_OR_PARTITION"): 1}


def test_group_series_share_a_bounded_budget():
    m = BrokerMetrics(process_metrics=False, max_lag_series=50)
    m.set_sources(partitions=lambda: [PartitionSnapshot("t", p, log_end_offset=10)
                                      for p in range(10)],
                  groups=lambda: [GroupSnapshot(f"g{i}", "Empty", 0,
                                                {("t", p): 5 for p in range(10)})
                                  for i in range(100)])
    s = scrape(m)
    group_series = [name for name, _ in s if name.startswith("kafka_consumergroup_")]
    assert 0 < len(group_series) <= 50 + 50  # lag and current_offset come in pairs
    assert sample(s, "kafka_consumergroup_lag_sum", consumergroup="g0", topic="t") == 50
    assert sample(s, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 100
