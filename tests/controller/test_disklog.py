"""The durable metadata log: torn tails, truncation, snapshots, quorum state."""

import os

import pytest

from broker.controller.disklog import DIR_NAME, DiskLog, Entry, QuorumState, Snapshot


def _entries(start, n, epoch=1):
    return [Entry(o, epoch, f"e{o}".encode()) for o in range(start, start + n)]


def test_append_reopen_and_torn_tail(tmp_path):
    log = DiskLog(str(tmp_path))
    log.append(_entries(0, 5))
    log.append([Entry(5, 2, b"", control=True)])
    log.close()
    path = os.path.join(tmp_path, DIR_NAME, f"{0:020d}.log")
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x30garbage")          # a torn write after the last good frame
    log = DiskLog(str(tmp_path))
    assert log.entries == _entries(0, 5) + [Entry(5, 2, b"", True)]
    log.append(_entries(6, 1, 2))
    log.close()
    assert [e.offset for e in DiskLog(str(tmp_path)).entries] == list(range(7))


def test_corrupt_middle_cuts_from_there(tmp_path):
    log = DiskLog(str(tmp_path))
    log.append(_entries(0, 4))
    pos = log._positions[2]
    log.close()
    path = os.path.join(tmp_path, DIR_NAME, f"{0:020d}.log")
    with open(path, "r+b") as f:
        f.seek(pos + 20)
        f.write(b"X")
    assert [e.offset for e in DiskLog(str(tmp_path)).entries] == [0, 1]


def test_append_must_continue_the_log(tmp_path):
    log = DiskLog(str(tmp_path))
    log.append(_entries(0, 2))
    with pytest.raises(ValueError):
        log.append(_entries(5, 1))
    assert log.end_offset == 2


def test_truncate(tmp_path):
    log = DiskLog(str(tmp_path))
    log.append(_entries(0, 5))
    log.truncate_from(3)
    log.append(_entries(3, 1, epoch=2))
    log.close()
    log = DiskLog(str(tmp_path))
    assert [(e.offset, e.epoch) for e in log.entries] == [(0, 1), (1, 1), (2, 1), (3, 2)]


def test_snapshot_compacts_and_survives(tmp_path):
    log = DiskLog(str(tmp_path))
    log.append(_entries(0, 6))
    log.save_snapshot(Snapshot(4, 1, b"state@4"))
    assert log.start_offset == 4 and [e.offset for e in log.entries] == [4, 5]
    log.append(_entries(6, 1))
    log.close()
    log = DiskLog(str(tmp_path))
    assert log.snapshot == Snapshot(4, 1, b"state@4")
    assert log.start_offset == 4 and [e.offset for e in log.entries] == [4, 5, 6]
    assert log.entry_at(3, 1) and not log.entry_at(3, 2) and log.entry_at(5, 1)
    # a snapshot beyond the log end (installed from a leader) resets the log
    log.save_snapshot(Snapshot(20, 3, b"state@20"))
    assert log.start_offset == 20 and log.end_offset == 20
    log.close()
    log = DiskLog(str(tmp_path))
    assert log.end_offset == 20 and log.snapshot.end_offset == 20


def test_quorum_state(tmp_path):
    log = DiskLog(str(tmp_path))
    assert log.quorum_state == QuorumState()
    log.save_quorum_state(QuorumState(7, 2, -1), voters=[1, 2, 3])
    log.close()
    assert DiskLog(str(tmp_path)).quorum_state == QuorumState(7, 2, -1)


@pytest.mark.parametrize("failing", ["append", "save_quorum_state"])
def test_a_failed_metadata_write_halts_the_node(tmp_path, monkeypatch, failing):
    """The Raft core counts a persistence effect as done once issued (a vote, an acknowledged
    append): a disk that refuses it must stop the node, never let it run on a broken promise."""
    import errno

    from broker.controller import quorum as quorum_module
    from broker.controller.raft.messages import AppendEntries, PersistState

    halted = []
    monkeypatch.setattr(quorum_module, "halt", halted.append)
    node = quorum_module.RaftQuorum(str(tmp_path), node_id=1)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(node.log, failing, full)
    effect = AppendEntries(tuple(_entries(0, 1))) if failing == "append" else \
        PersistState(QuorumState(epoch=3, voted_id=2, leader_id=-1))
    node._persist([effect])
    assert halted == [1]
