"""Log start offset, retention, DeleteRecords and compaction stay consistent on followers, in a real
3-node cluster (RF 3): each replica is read on its own (a consumer's Fetch v12 to a follower, which
serves up to its own high watermark, as KIP-392 lets it) and the replicas compared."""

from __future__ import annotations

import os

from confluent_kafka import Producer

from protocol import ErrorCode, messages as m
from protocol import records as r

from broker.testing_cluster import call, running_cluster
from tests.replication.test_cluster_replication import FAST_FAILURE, _create, _state

MiB = 1 << 20
PADDING = b"." * 8000
HOUSEKEEPING = {"log.retention.check.interval.ms": "300", "log.cleaner.backoff.ms": "200"}


def fetch(cluster, broker: int, topic: str, offset: int):
    """One consumer Fetch (v12, no rack) of partition 0 served by `broker`'s own replica."""
    R = m.FetchRequest
    body = R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 * MiB, isolation_level=0,
             session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[
                 R.FetchTopic(topic=topic, partitions=[R.FetchPartition(
                     partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                     partition_max_bytes=8 * MiB)])])
    return call(cluster.nodes[broker].address, 1, 12, body, timeout=30).responses[0].partitions[0]


def replica_records(cluster, broker: int, topic: str, start: int) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record `broker`'s replica holds from `start` to its high watermark."""
    out, offset = [], start
    while True:
        answer = fetch(cluster, broker, topic, offset)
        assert answer.error_code == ErrorCode.NONE, (broker, offset, answer.error_code)
        batches = list(r.iter_batches(answer.records or b"", allow_partial=True))
        for batch in batches:
            out.extend((rec.offset, rec.key, rec.value) for rec in batch.records() if rec.offset >= offset)
        if not batches or batches[-1].next_offset >= answer.high_watermark:
            return out
        offset = batches[-1].next_offset


def oldest_segment(cluster, broker: int, topic: str) -> int:
    directory = os.path.join(cluster.nodes[broker].data_dir, f"{topic}-0")
    return min(int(name[:-4]) for name in os.listdir(directory) if name.endswith(".log"))


def produce(cluster, topic: str, records) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})
    for key, value in records:
        producer.produce(topic, value, key=key, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0


def test_retention_delete_records_and_compaction_on_followers(tmp_path):
    with running_cluster(tmp_path, nodes=3, overrides=dict(FAST_FAILURE, **HOUSEKEEPING)) as cluster:
        brokers = cluster.brokers

        # retention by size: every replica deletes old segments itself (never past its high
        # watermark); above the largest log start the replicas hold the same records
        _create(cluster, "trimmed", configs={"segment.bytes": str(MiB), "retention.bytes": str(MiB)})
        total = 450
        produce(cluster, "trimmed", [(None, b"%05d" % i + PADDING) for i in range(total)])
        cluster.wait_until(lambda: all(fetch(cluster, b, "trimmed", total - 1).high_watermark == total
                                       for b in brokers), 30, "every replica's high watermark at the end")
        cluster.wait_until(lambda: all(fetch(cluster, b, "trimmed", total - 1).log_start_offset > 0
                                       for b in brokers), 60, "retention on every replica")
        starts = {b: fetch(cluster, b, "trimmed", total - 1).log_start_offset for b in brokers}
        cluster.wait_until(lambda: all(0 < oldest_segment(cluster, b, "trimmed") <= starts[b] for b in brokers),
                           30, "the segments below every replica's log start deleted from its disk")
        common = max(starts.values())
        views = {b: replica_records(cluster, b, "trimmed", common) for b in brokers}
        assert views[brokers[0]] == [(o, None, b"%05d" % o + PADDING) for o in range(common, total)]
        assert all(view == views[brokers[0]] for view in views.values())

        # DeleteRecords: answered once every replica moved its log start there; below it every
        # replica answers OFFSET_OUT_OF_RANGE
        leader, _ = _state(cluster, brokers[0], "trimmed")
        target = common + 17
        R = m.DeleteRecordsRequest
        answer = call(cluster.nodes[leader].address, 21, 2, R(timeout_ms=30000, topics=[R.DeleteRecordsTopic(
            name="trimmed", partitions=[R.DeleteRecordsPartition(partition_index=0, offset=target)])]),
            timeout=60).topics[0].partitions[0]
        assert (answer.error_code, answer.low_watermark) == (ErrorCode.NONE, target)
        assert {b: fetch(cluster, b, "trimmed", total - 1).log_start_offset for b in brokers} == \
            {b: target for b in brokers}
        assert {fetch(cluster, b, "trimmed", target - 1).error_code for b in brokers} == \
            {ErrorCode.OFFSET_OUT_OF_RANGE}
        assert all(replica_records(cluster, b, "trimmed", target) == views[b][target - common:]
                   for b in brokers)

        # compaction: every replica's cleaner compacts its own log; each keeps every key's latest
        # value, and where two replicas hold the same offset they hold the same record
        _create(cluster, "compacted", configs={"cleanup.policy": "compact", "segment.bytes": str(MiB),
                                               "min.cleanable.dirty.ratio": "0.01"})
        rounds, keys = 40, 10
        written = [(b"k%d" % k, b"%02d-%d|" % (n, k) + PADDING) for n in range(rounds) for k in range(keys)]
        produce(cluster, "compacted", written)
        latest = {}
        for offset, (key, value) in enumerate(written):
            latest[key] = (offset, value)

        def compacted_everywhere():
            views = {b: replica_records(cluster, b, "compacted", 0) for b in brokers}
            if all(len(v) < len(written) and v and v[-1][0] == len(written) - 1 for v in views.values()):
                return views
            return None

        views = cluster.wait_until(compacted_everywhere, 90, "the cleaner on every replica")
        for broker, view in views.items():
            offsets = [o for o, _, _ in view]
            assert offsets == sorted(set(offsets))
            last = {}
            for offset, key, value in view:
                assert written[offset] == (key, value)   # what was written at that offset, unchanged
                last[key] = (offset, value)
            assert last == latest, broker                         # every key's latest value kept
