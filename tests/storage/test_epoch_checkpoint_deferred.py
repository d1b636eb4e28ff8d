"""A leader epoch assigned without writing its checkpoint (a broker taking over many partitions
writes them off its event loop, together) is in memory at once and on disk before any record."""

import os

from broker.replication.epoch_checkpoints import write_all
from storage import checkpoints
from storage.epochs import LEADER_EPOCH_CHECKPOINT

from .conftest import batch


def _on_disk(log):
    return checkpoints.read_leader_epochs(os.path.join(log.directory, LEADER_EPOCH_CHECKPOINT))


def test_deferred_epoch_is_answered_at_once_and_written_later(make_log):
    log = make_log()
    log.assign_epoch_start(3, write=False)
    assert log.end_offset_for_epoch(3) == (3, 0)     # OffsetForLeaderEpoch knows it already
    assert _on_disk(log) == []
    assert log.write_epochs() is True
    assert _on_disk(log) == [(3, 0)]
    assert log.write_epochs() is False                # nothing left to write


def test_flush_writes_the_pending_epoch_before_records_become_durable(make_log):
    log = make_log()
    log.assign_epoch_start(5, write=False)
    log.append(batch(3), leader_epoch=5)
    assert _on_disk(log) == []
    log.flush()
    assert _on_disk(log) == [(5, 0)] and log.recovery_point == 3


def test_write_all_writes_every_pending_log_and_survives_a_reopen(make_log):
    logs = [make_log(name=f"t-{i}") for i in range(3)]
    for i, log in enumerate(logs):
        log.assign_epoch_start(i + 1, write=False)
        log.append(batch(2), leader_epoch=i + 1)
    write_all(logs)
    assert [_on_disk(log) for log in logs] == [[(1, 0)], [(2, 0)], [(3, 0)]]
    for log in logs:
        log.close()
    reopened = make_log(name="t-2")
    assert reopened.latest_epoch == 3
