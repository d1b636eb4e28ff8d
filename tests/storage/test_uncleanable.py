"""A log the cleaner cannot compact is marked uncleanable (Kafka's KIP-346) and skipped;
housekeeping and compaction carry on for every other log."""

import logging
import os
import random
import struct

import crc32c

from protocol.records import CRC_START, Compression, SimpleRecord, build_batch
from storage.manager import LogManager
from storage.validation import AppendOrigin

from .conftest import NOW
from .test_cleaner import COMPACT, all_records, fill

POISONED = ("poisoned", 0)


def undecodable_gzip_batch() -> bytes:
    """A gzip batch with a valid header and CRC whose body does not decompress."""
    data = bytearray(build_batch([SimpleRecord(value=b"x" * 100, key=b"k", timestamp=NOW)] * 3,
                                 compression_type=Compression.GZIP))
    data[61:] = random.Random(1).randbytes(len(data) - 61)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[CRC_START:])))
    return bytes(data)


def poisoned_manager(tmp_path, clock) -> LogManager:
    mgr = LogManager(str(tmp_path), {"file.delete.delay.ms": 0}, clock=clock)
    # Client appends refuse such a batch, but replication takes batches as they come (Kafka's
    # followers do not decompress); switching the log to compact hands it to the cleaner.
    poisoned = mgr.get_or_create_log(*POISONED, {"segment.bytes": 1200})
    poisoned.append(undecodable_gzip_batch(), origin=AppendOrigin.REPLICATION)
    fill(poisoned)
    mgr.set_topic_config("poisoned", COMPACT)
    return mgr


def test_an_uncleanable_log_is_skipped_and_the_tick_carries_on(tmp_path, clock, caplog):
    mgr = poisoned_manager(tmp_path, clock)
    healthy = mgr.get_or_create_log("healthy", 0, COMPACT)
    fill(healthy)
    mgr.get_or_create_log("doomed", 0)
    assert mgr.delete_log("doomed", 0)
    with caplog.at_level(logging.ERROR, logger="storage"):
        for _ in range(3):
            mgr.tick()
    assert mgr.uncleanable_partitions == {POISONED}
    assert len(all_records(healthy)) == 5                       # compacted all the same
    assert not [n for n in os.listdir(tmp_path) if n.endswith("-delete")]  # delayed delete ran
    assert len([r for r in caplog.records if "uncleanable" in r.getMessage()]) == 1
    poisoned = mgr.get_log(*POISONED)                           # untouched, nothing lost
    assert (poisoned.log_start_offset, poisoned.log_end_offset) == (0, 33)
    assert poisoned.read_batches(0)[0].last_offset == 2
    mgr.checkpoint()
    mgr.close()


def test_clean_one_moves_past_an_uncleanable_log(tmp_path, clock):
    mgr = poisoned_manager(tmp_path, clock)
    healthy = mgr.get_or_create_log("healthy", 0, COMPACT)
    fill(healthy)
    outcomes = [mgr.clean_one(), mgr.clean_one(), mgr.clean_one()]
    assert mgr.uncleanable_partitions == {POISONED}
    assert any(stats is not None for stats in outcomes)
    assert len(all_records(healthy)) == 5
    assert not [n for n in os.listdir(tmp_path / "poisoned-0") if ".cleaned" in n or ".swap" in n]
    mgr.close()


def test_a_config_change_or_restart_gives_the_log_another_chance(tmp_path, clock):
    mgr = poisoned_manager(tmp_path, clock)
    mgr.tick()
    assert POISONED in mgr.uncleanable_partitions
    mgr.set_topic_config("poisoned", dict(COMPACT, **{"delete.retention.ms": 2000}))
    assert POISONED not in mgr.uncleanable_partitions
    mgr.tick()
    assert POISONED in mgr.uncleanable_partitions                # still undecodable
    mgr.close()
    again = LogManager(str(tmp_path), {"file.delete.delay.ms": 0}, clock=clock)
    assert again.uncleanable_partitions == set()
    again.close()


def test_deleting_an_uncleanable_log_forgets_it(tmp_path, clock):
    mgr = poisoned_manager(tmp_path, clock)
    mgr.tick()
    assert mgr.delete_log(*POISONED)
    assert mgr.uncleanable_partitions == set()
    mgr.close()


def test_a_pass_failing_mid_segment_leaves_no_cleaned_files(tmp_path, clock):
    mgr = poisoned_manager(tmp_path, clock)
    poisoned = mgr.get_log(*POISONED)
    # The bad batch sits in the already-clean section: the offset map builds, and the
    # failure comes while its segment is being rewritten.
    poisoned.cleaner_checkpoint = poisoned.segments[1].base_offset
    fill(poisoned)
    before = sorted(os.listdir(tmp_path / "poisoned-0"))
    assert mgr.clean_one() is None
    assert mgr.uncleanable_partitions == {POISONED}
    assert sorted(os.listdir(tmp_path / "poisoned-0")) == before
    assert (poisoned.log_start_offset, poisoned.log_end_offset) == (0, 63)
    mgr.close()
