"""One partition whose data the cleaner cannot decode must not stop log maintenance for others.

Kafka's LogCleaner catches the failure, marks that partition uncleanable (KIP-346,
`LogCleanerManager.markPartitionUncleanable`) and keeps compacting the rest.
"""

from __future__ import annotations

import os
import random
import time

import pytest

from protocol import ErrorCode, messages
from protocol.records import Compression, SimpleRecord, build_batch, iter_batches

from broker.testing import running_broker
from tests.broker.raw_client import RawClient, batch
from storage.validation import AppendOrigin
from tests.robustness.support import with_fixed_crc

FAST_MAINTENANCE = {"log.retention.check.interval.ms": "200",
                    "log.flush.offset.checkpoint.interval.ms": "300"}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1048576",
           "min.cleanable.dirty.ratio": "0.01"}


def _record_count(client, topic) -> int:
    count, offset = 0, 0
    while True:
        data = client.fetch(topic, 0, offset, max_bytes=8 << 20).responses[0].partitions[0]
        batches = list(iter_batches(bytes(data.records or b"")))
        if not batches:
            return count
        count += sum(len(list(b.records())) for b in batches)
        offset = batches[-1].last_offset + 1


def _fill_with_one_key(client, topic, batches=12):
    now = int(time.time() * 1000)
    for _ in range(batches):   # ~1.2 MB: the first segment rolls and becomes cleanable
        assert client.produce(topic, 0, build_batch([SimpleRecord(
            value=os.urandom(100_000), key=b"same", timestamp=now)])).error_code == 0


def _compacted_within(client, topic, seconds, produced=12) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _record_count(client, topic) < produced:
            return True
        time.sleep(0.3)
    return False


def _wait_for_log(broker, topic):
    deadline = time.monotonic() + 10
    while (log := broker.logs.get_log(topic, 0)) is None:
        assert time.monotonic() < deadline, f"no log for {topic}"
        time.sleep(0.05)
    return log


def test_compaction_runs_on_a_healthy_broker(tmp_path):
    # The control for the test below: the same topic compacts within seconds.
    with running_broker(tmp_path / "data", FAST_MAINTENANCE) as running:
        with RawClient("127.0.0.1", running.port) as client:
            assert client.create_topic("healthy", 1, COMPACT).error_code == 0
            _fill_with_one_key(client, "healthy")
            assert _compacted_within(client, "healthy", 15)


def test_an_uncleanable_partition_does_not_stop_compaction_elsewhere(tmp_path):
    I = messages.IncrementalAlterConfigsRequest
    with running_broker(tmp_path / "data", FAST_MAINTENANCE) as running:
        with RawClient("127.0.0.1", running.port) as client:
            # Produce refuses a gzip batch that does not decompress (test_record_validation.py),
            # but replication stores batches as they come (Kafka's followers do not decompress
            # them): put one in the log that way; switching to compact hands it to the cleaner.
            assert client.create_topic("poisoned", 1, {"segment.bytes": "1048576"}).error_code == 0
            bad = bytearray(build_batch([SimpleRecord(value=b"x" * 100, key=b"k", timestamp=1000)] * 3,
                                        compression_type=Compression.GZIP))
            bad[61:] = random.Random(1).randbytes(len(bad) - 61)
            assert client.produce("poisoned", 0, with_fixed_crc(bad)).error_code \
                == ErrorCode.UNKNOWN_SERVER_ERROR
            log = _wait_for_log(running.broker, "poisoned")
            log.append(with_fixed_crc(bad), origin=AppendOrigin.REPLICATION)
            for _ in range(12):
                assert client.produce("poisoned", 0, batch([os.urandom(100_000)])).error_code == 0
            altered = client.request(44, 1, I(resources=[I.AlterConfigsResource(
                resource_type=2, resource_name="poisoned", configs=[
                    I.AlterableConfig(name="cleanup.policy", config_operation=0, value="compact"),
                    I.AlterableConfig(name="min.cleanable.dirty.ratio", config_operation=0,
                                      value="0.01")])], validate_only=False))
            assert altered.responses[0].error_code == 0
            time.sleep(1.0)
            assert client.create_topic("healthy", 1, COMPACT).error_code == 0
            _fill_with_one_key(client, "healthy")
            assert _compacted_within(client, "healthy", 10)
