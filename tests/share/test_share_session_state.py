"""Share sessions' epochs and the share coordinator's state store (records round-tripped)."""

import uuid

from protocol import ErrorCode
from protocol.internal_topics import decode_share_state_record
from broker.share.partition import StateBatch
from broker.share.session import ShareSessionCache
from broker.share.state_store import ShareStateStore, coordinator_key

E = ErrorCode
T = uuid.UUID(int=7)


def test_session_epochs():
    cache = ShareSessionCache(max_sessions=1)
    assert cache.step("g", "m", 1) is E.SHARE_SESSION_NOT_FOUND
    step = cache.step("g", "m", 0, added=[(T, 0), (T, 1)])
    assert step.opened and step.session.partitions == [(T, 0), (T, 1)]
    assert cache.step("g", "m", 2) is E.INVALID_SHARE_SESSION_EPOCH
    assert cache.step("g", "m", 1, forgotten=[(T, 0)]).session.partitions == [(T, 1)]
    assert cache.step("g", "m", 2, added=[(T, 1), (T, 2)]).session.partitions == [(T, 1), (T, 2)]
    assert cache.step("g", "other", 0) is E.SHARE_SESSION_LIMIT_REACHED
    reopened = cache.step("g", "m", 0)
    assert reopened.replaced is not None and reopened.replaced.partitions == [(T, 1), (T, 2)]
    closing = cache.step("g", "m", -1)
    assert closing.closing and cache.step("g", "m", 1) is E.SHARE_SESSION_NOT_FOUND


class Log:
    def __init__(self):
        self.records = []

    def append(self, coordinator_key, key, value):
        from protocol.internal_topics import encode_share_state_record
        self.records.append((coordinator_key, encode_share_state_record(key, value)))


def test_state_store_fences_and_replays():
    log = Log()
    store = ShareStateStore(log)
    key = ("g", T, 3)
    assert store.initialize(key, 0, 10) is E.NONE
    batches = [StateBatch(10, 11, 2, 1), StateBatch(12, 12, 0, 3)]
    assert store.write(key, 1, 5, 10, batches) is E.NONE
    assert store.write(key, 0, 5, 10, []) is E.FENCED_STATE_EPOCH
    assert store.write(key, 1, 4, 10, []) is E.FENCED_LEADER_EPOCH
    assert {k for k, _ in log.records} == {coordinator_key(key)} and coordinator_key(key).startswith("g:")
    fresh = ShareStateStore(Log())
    for _, (k, v) in log.records:
        fresh.replay(*decode_share_state_record(k, v))
    state = fresh.read(key)
    assert (state.state_epoch, state.leader_epoch, state.start_offset, state.batches) == (1, 5, 10, batches)
    assert store.delete(key) is E.NONE and store.read(key) is None
    k, v = log.records[-1][1]
    fresh.replay(*decode_share_state_record(k, v))
    assert fresh.read(key) is None
