"""The broker side of moving a replica between log dirs (broker.log_dir_moves, PartitionManager)."""

import threading
import time

import pytest

from protocol import records as r
from storage.errors import StorageError
from storage.manager import LogManager

from broker.partitions import Partition, PartitionManager
from broker.replication.fetcher import ReplicaFetcher


def _produce(partition, record):
    manager = PartitionManager.__new__(PartitionManager)   # append_now needs no broker
    [outcome] = manager.append_now([(partition, record)])
    return outcome


def _replicate(partition, record):
    """A follower's append of the batch as its leader has it (offset 1)."""
    batch = r.build_batch([r.SimpleRecord(value=b"v", timestamp=1_700_000_000_000)], base_offset=1,
                          partition_leader_epoch=0)
    try:
        ReplicaFetcher._append(partition, batch)
    except StorageError as exc:
        return exc
    return partition.log.log_end_offset - 1


@pytest.mark.parametrize("append", [_produce, _replicate], ids=["produce", "follower"])
def test_an_append_that_meets_the_swap_lands_in_the_new_log(tmp_path, append):
    """A Produce (or a follower's append) that picked up the partition's log just before the move
    swapped it waits on the old log's lock, finds it retired, and appends to the new log: nothing
    is refused or lost."""
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    logs = LogManager(dirs)
    old = logs.get_or_create_log("t", 0)
    partition = Partition(topic="t", index=0, topic_id=None, log=old, leader=1, leader_epoch=0)
    record = r.build_batch([r.SimpleRecord(value=b"v", timestamp=1_700_000_000_000)])
    _produce(partition, record)
    assert logs.start_move("t", 0, dirs[1])
    outcomes = []

    def switch(new_log):
        # under the old log's lock: an append that already holds the old log waits on it
        appender.start()
        time.sleep(0.3)
        partition.log = new_log

    appender = threading.Thread(target=lambda: outcomes.append(append(partition, record)))
    new = logs.finish_move("t", 0, on_switch=switch)
    appender.join(10)
    assert not any(isinstance(o, StorageError) for o in outcomes), outcomes
    assert [getattr(o, "first_offset", o) for o in outcomes] == [1]
    assert partition.log is new and new.log_end_offset == 2
    logs.close()


def test_a_fetch_that_meets_the_swap_reads_the_new_log(tmp_path):
    """A Fetch that picked up the partition's log just before the swap finds it retired and reads
    the new one: the consumer gets its records, not KAFKA_STORAGE_ERROR."""
    from protocol import messages

    from broker.testing import running_broker

    from .raw_client import batch, raw_client_with_topic

    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with running_broker(tmp_path, {"log.dirs": ",".join(dirs)}) as running:
        with raw_client_with_topic(running.bootstrap, "t", 1) as client:
            assert client.produce("t", 0, batch([b"one", b"two"])).error_code == 0
            logs, partitions = running.broker.logs, running.broker.partitions
            source = logs.dir_of("t", 0)
            target = next(d for d in logs.log_dirs if d != source)
            assert logs.start_move("t", 0, target)
            F = messages.FetchRequest
            request = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            F.FetchTopic(topic="t", partitions=[F.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[], rack_id="")

            def switch(new_log):
                client.send(1, 11, request)   # its read waits on the old log's lock
                time.sleep(0.3)
                partitions.get("t", 0).log = new_log

            logs.finish_move("t", 0, on_switch=switch)
            answer = client.receive(1, 11)[1].responses[0].partitions[0]
            assert answer.error_code == 0 and answer.records and answer.high_watermark == 2
            assert logs.dir_of("t", 0) == target
