import errno
import os
import subprocess

import pytest

from storage.errors import InvalidBatchError, KafkaStorageError
from storage.log import Log
from storage.manager import LogManager

from .conftest import batch


def test_failed_write_takes_the_log_offline_and_leaves_disk_consistent(make_log, monkeypatch):
    log = make_log(name="io-0")
    log.append(batch(2))
    size_before = os.path.getsize(log.active_segment.log_path)
    real = os.pwritev

    def half_then_enospc(fd, buffers, offset):
        # a torn write: some bytes land, then the disk is full
        first = bytes(buffers[0])[:10]
        real(fd, [first], offset)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwritev", half_then_enospc)
    with pytest.raises(KafkaStorageError) as info:
        log.append(batch(3))
    assert info.value.error_code == 56
    monkeypatch.setattr(os, "pwritev", real)
    assert log.offline
    assert os.path.getsize(log.active_segment.log_path) == size_before
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)
    with pytest.raises(KafkaStorageError):
        log.append(batch(1))
    again = make_log(name="io-0", clean_shutdown=False)
    assert again.log_end_offset == 2
    assert again.append(batch(1)).first_offset == 2


def test_failed_fsync_takes_the_log_offline(make_log, monkeypatch):
    log = make_log()
    log.append(batch(1))

    def broken(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(KafkaStorageError):
        log.flush()
    assert log.offline


def test_manager_close_with_an_offline_log_leaves_no_clean_marker(tmp_path, monkeypatch):
    mgr = LogManager(str(tmp_path))
    log = mgr.get_or_create_log("t", 0)
    log.append(batch(1))
    log._go_offline(OSError("simulated"))
    mgr.close()
    assert not os.path.exists(tmp_path / ".kafka_cleanshutdown")


def test_open_files_stay_bounded(tmp_path):
    mgr = LogManager(str(tmp_path), {"segment.bytes": 2000}, max_open_files=8)
    fd_dir = "/proc/self/fd"
    before = len(os.listdir(fd_dir))
    for p in range(40):
        log = mgr.get_or_create_log("many", p)
        for _ in range(3):
            log.append(batch(1, value_size=900))
        log.read_batches(0)
    during = len(os.listdir(fd_dir))
    assert len(mgr.handles) <= 8
    # 8 segments with a log and two index descriptors each, plus a little slack
    assert during - before <= 8 * 3 + 4
    for p in range(40):
        assert [b.base_offset for b in mgr.get_log("many", p).read_batches(0)][0] == 0
    mgr.close()
    # and after a restart that opens 80 sealed segments
    after_close = len(os.listdir(fd_dir))
    again = LogManager(str(tmp_path), {"segment.bytes": 2000}, max_open_files=8)
    assert len(os.listdir(fd_dir)) - after_close <= 8 * 3 + 4
    for p in range(40):
        assert again.get_log("many", p).read_batches(1)[0].base_offset == 1
    assert len(os.listdir(fd_dir)) - after_close <= 8 * 3 + 4
    again.close()


def test_compacted_topics_refuse_records_without_keys(make_log):
    log = make_log({"cleanup.policy": "compact"})
    with pytest.raises(InvalidBatchError) as info:
        log.append(batch(1))
    assert info.value.error_code == 87
    log.append(batch(1, key=b"k"))


@pytest.fixture
def small_tmpfs(tmp_path):
    mountpoint = tmp_path / "small"
    mountpoint.mkdir()
    if os.geteuid() != 0:
        pytest.skip("disk-full test needs root to mount a 1 MiB tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mountpoint)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip()}")
    yield mountpoint
    subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)


def test_disk_full_on_a_small_tmpfs(small_tmpfs):
    directory = small_tmpfs / "full-0"
    filler = small_tmpfs / "filler"
    filler.write_bytes(bytes(64 * 1024))  # deleted below to make room for the restart
    log = Log(str(directory))
    acked = 0
    with pytest.raises(KafkaStorageError) as info:
        for _ in range(10_000):
            res = log.append(batch(1, value_size=4000))
            acked = res.last_offset + 1
    assert info.value.error_code == 56
    assert log.offline and acked > 100
    # Free some room, reopen: every acknowledged batch is there, nothing torn is served.
    log.close()
    filler.unlink()
    again = Log(str(directory), clean_shutdown=False)
    assert again.log_end_offset >= acked
    offset = 0
    while offset < again.log_end_offset:
        for b in again.read_batches(offset):
            b.ensure_valid()
            offset = b.last_offset + 1
    assert offset == again.log_end_offset


def test_a_log_dir_failing_at_start_up_goes_offline_alone(tmp_path, monkeypatch):
    good, bad = str(tmp_path / "good"), str(tmp_path / "bad")
    mgr = LogManager([good, bad])
    for p in range(4):
        mgr.get_or_create_log("t", p).append(batch(1))
    mgr.close()
    import storage.manager as manager_module
    real_log = manager_module.Log

    def failing(path, *args, **kwargs):
        if path.startswith(bad):
            raise OSError(5, "Input/output error")
        return real_log(path, *args, **kwargs)

    monkeypatch.setattr(manager_module, "Log", failing)
    again = LogManager([good, bad])
    assert list(again.offline_dirs) == [os.path.abspath(bad)]
    online = {k for k in again.logs()}
    assert online and all(k not in again.offline_partitions for k in online)
    assert len(online) + len(again.offline_partitions) == 4
    offline = next(iter(again.offline_partitions))
    with pytest.raises(KafkaStorageError):
        again.get_or_create_log(*offline)
    assert again.get_or_create_log("new", 0).directory.startswith(os.path.abspath(good))


def test_the_manager_reports_once_every_log_dir_is_offline(tmp_path):
    """The hook a cluster node halts on: called when the last online dir fails, not before."""
    mgr = LogManager([str(tmp_path / "a"), str(tmp_path / "b")])
    calls = []
    mgr.on_every_dir_offline = calls.append
    first, second = mgr.get_or_create_log("t", 0), mgr.get_or_create_log("t", 1)
    assert mgr._dir_of[("t", 0)] != mgr._dir_of[("t", 1)]
    first._go_offline(OSError(28, "No space left on device"))
    assert calls == [] and len(mgr.offline_dirs) == 1
    second._go_offline(OSError(5, "Input/output error"))
    assert len(calls) == 1 and set(calls[0]) == set(mgr.log_dirs)
    mgr.close()
