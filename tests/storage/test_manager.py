import os

from storage import checkpoints
from storage.config import LogConfig
from storage.manager import LogManager

from .conftest import batch


def test_create_reopen_and_checkpoints(tmp_path, clock):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    mgr = LogManager(dirs, {"segment.bytes": 100_000}, clock=clock)
    for p in range(4):
        log = mgr.get_or_create_log("orders", p)
        log.append(batch(p + 1))
        log.set_high_watermark(log.log_end_offset)
    assert sorted(os.listdir(dirs[0]) + os.listdir(dirs[1])).count("orders-0") == 1
    # spread over both dirs
    assert any(n.startswith("orders-") for n in os.listdir(dirs[0]))
    assert any(n.startswith("orders-") for n in os.listdir(dirs[1]))
    mgr.close()
    for d in dirs:
        assert os.path.exists(os.path.join(d, checkpoints.CLEAN_SHUTDOWN))
        assert checkpoints.read_offsets(os.path.join(d, checkpoints.RECOVERY_POINT))
    again = LogManager(dirs, clock=clock)
    assert all(again.had_clean_shutdown.values())
    assert {k: v.log_end_offset for k, v in again.logs().items()} == {("orders", p): p + 1 for p in range(4)}
    assert again.get_log("orders", 3).high_watermark == 4
    # the marker is consumed at start-up: a crash from now on is an unclean stop
    assert not any(os.path.exists(os.path.join(d, checkpoints.CLEAN_SHUTDOWN)) for d in dirs)
    again.close()


def test_unclean_restart_recovers(tmp_path, clock):
    mgr = LogManager(str(tmp_path), clock=clock)
    log = mgr.get_or_create_log("t", 0)
    for _ in range(10):
        log.append(batch(1))
    # no close(): as if killed
    again = LogManager(str(tmp_path), clock=clock)
    assert again.had_clean_shutdown[str(tmp_path)] is False
    assert again.get_log("t", 0).log_end_offset == 10


def test_topic_overrides_and_defaults(tmp_path, clock):
    mgr = LogManager(str(tmp_path), LogConfig(segment_bytes=5000), clock=clock)
    log = mgr.get_or_create_log("c", 0, {"cleanup.policy": "compact", "segment.bytes": "2000"})
    assert log.config.compact and log.config.segment_bytes == 2000
    mgr.set_topic_config("c", {"max.message.bytes": 10})
    assert log.config.max_message_bytes == 10 and log.config.segment_bytes == 5000
    assert mgr.get_or_create_log("d", 0).config.segment_bytes == 5000


def test_a_topics_partitions_share_one_config_until_it_changes(tmp_path, clock):
    mgr = LogManager(str(tmp_path), LogConfig(segment_bytes=5000), clock=clock)
    first, second = (mgr.get_or_create_log("s", p, {"segment.bytes": "2000"}) for p in range(2))
    assert first.config is second.config and first.config.segment_bytes == 2000
    third = mgr.get_or_create_log("s", 2, {"segment.bytes": "3000"})   # new overrides: a new config
    assert third.config.segment_bytes == 3000
    mgr.set_defaults({"retention.ms": 5})
    assert mgr.get_or_create_log("s", 3).config.retention_ms == 5
    assert mgr.get_or_create_log("s", 3).config.segment_bytes == 3000


def test_delete_log_renames_then_removes(tmp_path, clock):
    mgr = LogManager(str(tmp_path), {"file.delete.delay.ms": 1000}, clock=clock)
    log = mgr.get_or_create_log("gone", 0)
    log.append(batch(1))
    assert mgr.delete_log("gone", 0)
    assert mgr.get_log("gone", 0) is None
    left = [n for n in os.listdir(tmp_path) if n.startswith("gone-0")]
    assert len(left) == 1 and left[0].endswith("-delete")
    mgr.tick(clock.now + 500)
    assert os.path.exists(tmp_path / left[0])
    mgr.tick(clock.now + 1500)
    assert not os.path.exists(tmp_path / left[0])


def test_tick_applies_retention(tmp_path, clock):
    mgr = LogManager(str(tmp_path), {"segment.bytes": 1000, "retention.ms": 1000,
                                     "file.delete.delay.ms": 0}, clock=clock)
    log = mgr.get_or_create_log("r", 0)
    for _ in range(20):
        log.append(batch(1, value_size=100, ts=clock.now))
    log.set_high_watermark(log.log_end_offset)
    clock.now += 10_000
    mgr.tick()
    assert log.log_start_offset == 20
    assert not [n for n in os.listdir(log.directory) if n.endswith(".deleted")]


def test_topic_id_is_recorded_and_checked(tmp_path, clock):
    from storage.errors import StorageError
    mgr = LogManager(str(tmp_path), clock=clock)
    log = mgr.get_or_create_log("ids", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    assert (tmp_path / "ids-0" / "partition.metadata").read_text() == \
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"
    assert log.topic_id == "AAAAAAAAAAAAAAAAAAAAAQ"
    mgr.get_or_create_log("ids", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    try:
        mgr.get_or_create_log("ids", 0, topic_id="BBBBBBBBBBBBBBBBBBBBBQ")
    except StorageError as exc:
        assert exc.error_code == 103
    else:
        raise AssertionError("a different topic id must be refused")
