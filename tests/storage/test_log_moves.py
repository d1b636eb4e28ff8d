"""Moving a partition's log between the log dirs of one LogManager (storage.log_moves)."""

import os

import pytest

from storage.errors import ErrorCode, StorageError
from storage.log_moves import MOVE_COMPLETE
from storage.manager import LogManager

from .conftest import batch


def content(log):
    return b"".join(piece.read() for piece in log.read(log.log_start_offset, 1 << 30))


def names(directory):
    return sorted(os.listdir(directory))


@pytest.fixture
def dirs(tmp_path):
    return [str(tmp_path / "a"), str(tmp_path / "b")]


def manager(dirs, clock):
    return LogManager(dirs, {"segment.bytes": 2000, "file.delete.delay.ms": 0}, clock=clock)


def started(dirs, clock, batches=30, epoch=1):
    mgr = manager(dirs, clock)
    log = mgr.get_or_create_log("t", 0)
    assert mgr.dir_of("t", 0) == dirs[0]
    for _ in range(batches):
        log.append(batch(3, value_size=40), leader_epoch=epoch)
    log.set_high_watermark(log.log_end_offset)
    assert mgr.start_move("t", 0, dirs[1])
    return mgr, log


def test_a_move_copies_every_batch_while_appends_go_on_then_replaces_the_log(dirs, clock):
    mgr, log = started(dirs, clock)
    future = mgr.future_logs()[("t", 0)]
    assert os.path.basename(future.log.directory).startswith("t-0.")
    assert future.log.directory.endswith("-future") and future.offset_lag(log) == 90
    for _ in range(40):
        mgr.copy_to_future("t", 0, 500)
        log.append(batch(2), leader_epoch=1)      # producers keep writing during the copy
    log.append(batch(2), leader_epoch=2)
    expected = content(log)
    switched = []
    new = mgr.finish_move("t", 0, on_switch=switched.append)
    assert switched == [new] and mgr.get_log("t", 0) is new and mgr.dir_of("t", 0) == dirs[1]
    assert content(new) == expected and new.log_end_offset == log.log_end_offset
    assert new.high_watermark == log.high_watermark and new.latest_epoch == 2
    assert mgr.future_logs() == {}
    assert names(dirs[1]).count("t-0") == 1 and MOVE_COMPLETE not in names(new.directory)
    assert not any(n.startswith("t-0") and not n.endswith("-delete") for n in names(dirs[0]))
    with pytest.raises(StorageError):
        log.append(batch(1))                        # the old log takes nothing any more
    new.append(batch(1), leader_epoch=2)
    mgr.tick()                                      # the old dir goes after file.delete.delay.ms
    assert not any(n.startswith("t-0") for n in names(dirs[0]))
    expected = content(new)
    mgr.close()
    again = manager(dirs, clock)
    assert again.dir_of("t", 0) == dirs[1] and content(again.get_log("t", 0)) == expected
    again.close()


def test_the_copy_follows_a_truncation_of_the_current_log(dirs, clock):
    mgr, log = started(dirs, clock, batches=10)
    while mgr.copy_to_future("t", 0):
        pass
    log.truncate_to(12)                              # a follower cutting a diverging suffix
    for _ in range(6):
        log.append(batch(3), leader_epoch=2)         # the new leader's records, same offsets
    log.set_high_watermark(log.log_end_offset)
    log.delete_records(20)                           # and DeleteRecords moving its log start
    while mgr.copy_to_future("t", 0):
        pass
    future = mgr.future_logs()[("t", 0)].log
    assert content(future) == content(log)
    assert future.recovery_point == future.log_end_offset    # fsynced as it caught up, not in the swap
    expected, epoch_one = content(log), log.end_offset_for_epoch(1)
    new = mgr.finish_move("t", 0)
    assert content(new) == expected and new.end_offset_for_epoch(1) == epoch_one
    assert new.log_start_offset == 20
    mgr.close()


@pytest.mark.parametrize("clean", [True, False], ids=["stopped", "killed"])
def test_a_restart_mid_move_resumes_it(dirs, clock, clean):
    mgr, log = started(dirs, clock)
    mgr.copy_to_future("t", 0, 600)
    expected = content(log)
    if clean:
        mgr.close()
    del mgr, log
    again = manager(dirs, clock)
    assert all(again.had_clean_shutdown.values()) == clean
    current = again.get_log("t", 0)
    assert again.dir_of("t", 0) == dirs[0] and content(current) == expected
    future = again.future_logs()[("t", 0)]
    assert 0 < future.log.log_end_offset < current.log_end_offset
    while again.copy_to_future("t", 0):
        pass
    assert content(again.finish_move("t", 0)) == expected
    again.close()


def test_a_crash_after_the_copy_was_marked_complete_finishes_the_move(dirs, clock):
    mgr, log = started(dirs, clock)
    while mgr.copy_to_future("t", 0):
        pass
    future = mgr.future_logs()[("t", 0)].log
    future.flush()
    open(os.path.join(future.directory, MOVE_COMPLETE), "w").close()
    expected = content(log)
    del mgr, log, future                             # killed before the renames
    again = manager(dirs, clock)
    assert again.dir_of("t", 0) == dirs[1] and content(again.get_log("t", 0)) == expected
    assert again.future_logs() == {} and names(dirs[1]).count("t-0") == 1
    assert not any(n.startswith("t-0") and not n.endswith("-delete") for n in names(dirs[0]))
    again.close()


def test_the_same_partition_in_two_dirs_keeps_the_marked_copy(dirs, clock):
    mgr, log = started(dirs, clock)
    while mgr.copy_to_future("t", 0):
        pass
    future = mgr.future_logs()[("t", 0)].log
    expected = content(log)
    log.append(batch(1))                             # only in the old copy: must not win
    future.flush()
    open(os.path.join(future.directory, MOVE_COMPLETE), "w").close()
    future.close()
    os.replace(future.directory, os.path.join(dirs[1], "t-0"))   # killed between the renames
    again = manager(dirs, clock)
    assert again.dir_of("t", 0) == dirs[1] and content(again.get_log("t", 0)) == expected
    assert MOVE_COMPLETE not in names(os.path.join(dirs[1], "t-0"))
    again.close()


def test_errors_and_moves_that_are_not_needed(dirs, clock):
    mgr, log = started(dirs, clock, batches=2)
    with pytest.raises(StorageError) as err:
        mgr.start_move("t", 0, "/no/such/dir")
    assert err.value.error_code == ErrorCode.LOG_DIR_NOT_FOUND
    with pytest.raises(StorageError) as err:
        mgr.start_move("t", 9, dirs[1])
    assert err.value.error_code == ErrorCode.REPLICA_NOT_AVAILABLE
    assert mgr.start_move("t", 0, dirs[1])           # the same move again: still under way
    future_dir = mgr.future_logs()[("t", 0)].log.directory
    assert not mgr.start_move("t", 0, dirs[0])       # back where it is: the move is dropped
    assert mgr.future_logs() == {} and not os.path.exists(future_dir)
    mgr.offline_dirs[dirs[1]] = "OSError: test"
    with pytest.raises(StorageError) as err:
        mgr.start_move("t", 0, dirs[1])
    assert err.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    del mgr.offline_dirs[dirs[1]]
    assert mgr.start_move("t", 0, dirs[1])
    mgr.delete_log("t", 0)                           # deleting the partition drops its copy too
    assert mgr.future_logs() == {} and mgr.copy_to_future("t", 0) == -1
    mgr.tick()
    assert not any(n.startswith("t-0") for d in dirs for n in names(d))
    mgr.close()


def test_a_log_created_later_goes_to_the_dir_asked_for_it(dirs, clock):
    mgr = manager(dirs, clock)
    mgr.get_or_create_log("t", 0)                    # dirs[0] now holds more
    mgr.prefer_dir("t", 1, dirs[0])
    mgr.prefer_dir("t", 0, dirs[1])                  # (a log that exists: moved, not preferred)
    assert mgr.dir_of("t", 0) == dirs[0]
    assert mgr.get_or_create_log("t", 1) and mgr.dir_of("t", 1) == dirs[0]
    assert mgr.get_or_create_log("t", 2) and mgr.dir_of("t", 2) == dirs[1]   # least loaded again
    mgr.close()


def test_a_swap_that_fails_leaves_the_current_log_in_place(dirs, clock, monkeypatch):
    mgr, log = started(dirs, clock)
    while mgr.copy_to_future("t", 0):
        pass

    def broken_open(*args, **kwargs):
        raise OSError("reopening failed")

    monkeypatch.setattr(mgr, "_open", broken_open)
    with pytest.raises(OSError):
        mgr.finish_move("t", 0)
    monkeypatch.undo()
    assert mgr.get_log("t", 0) is log and mgr.future_logs() == {}
    assert not [n for n in names(dirs[1]) if n.startswith("t-0") and not n.endswith("-delete")]
    log.append(batch(1), leader_epoch=1)             # still the partition's log
    expected = content(log)
    del mgr, log
    again = manager(dirs, clock)                     # and after a restart too
    assert again.dir_of("t", 0) == dirs[0] and content(again.get_log("t", 0)) == expected
    assert again.future_logs() == {}
    again.close()


def test_the_moved_log_keeps_producers_and_aborted_transactions(dirs, clock):
    from protocol import records as r
    from storage.log import AppendOrigin

    mgr, log = started(dirs, clock, batches=2)
    log.append(batch(2, producer_id=5, producer_epoch=0, base_sequence=0, transactional=True),
               leader_epoch=1)
    log.append(r.build_control_batch(r.ControlType.ABORT, 5, 0, 0, timestamp=clock.now),
               leader_epoch=1, origin=AppendOrigin.COORDINATOR)
    idempotent = batch(1, producer_id=6, producer_epoch=0, base_sequence=0)
    first = log.append(idempotent, leader_epoch=1)
    log.set_high_watermark(log.log_end_offset)
    aborted = log.aborted_transactions(0, log.log_end_offset)
    assert aborted
    while mgr.copy_to_future("t", 0):
        pass
    new = mgr.finish_move("t", 0)
    assert new.aborted_transactions(0, new.log_end_offset) == aborted
    assert new.last_stable_offset == new.log_end_offset
    again = new.append(idempotent, leader_epoch=1)            # a producer's retry: a duplicate
    assert again.duplicate and again.first_offset == first.first_offset
    mgr.close()
