"""A follower's incremental fetch session (KIP-227): after the full fetch that opens it, a Fetch
carries only the partitions whose position changed and forgets those no longer fetched; a session
error or a lost connection starts over with a full fetch naming the old session."""

from protocol import ErrorCode

from broker.replication.fetch_session import FollowerSession
from broker.replication.fetcher import ReplicaFetcher
from tests.replication.test_fetcher import fake_broker, follower


def _keys(request):
    return {(t.topic_id, p.partition): p.fetch_offset for t in request.topics for p in t.partitions}


def _forgotten(request):
    return {(t.topic_id, index) for t in request.forgotten_topics_data for index in t.partitions}


def test_only_changed_partitions_go_out_within_a_session():
    fetcher = ReplicaFetcher(fake_broker(), None, (1, 0))
    a, b, c = follower("a", 0, end=10), follower("b", 1, end=20), follower("c", 2, end=30)
    for p in (a, b, c):
        fetcher.add(p, 6)
    request, states = fetcher._request(list(fetcher.states.values()))
    assert (request.session_id, request.session_epoch) == (0, 0)      # full: opens a session
    assert _keys(request) == {("id-a", 0): 10, ("id-b", 1): 20, ("id-c", 2): 30}
    fetcher.session.answered(ErrorCode.NONE, 777)

    a.log.log_end_offset = 15                                          # a got records
    request, states = fetcher._request(list(fetcher.states.values()))
    assert (request.session_id, request.session_epoch) == (777, 1)
    assert _keys(request) == {("id-a", 0): 15} and not _forgotten(request)
    assert set(states) == {("id-a", 0), ("id-b", 1), ("id-c", 2)}     # answers may name any of them
    fetcher.session.answered(ErrorCode.NONE, 777)

    # nothing changed: an empty incremental fetch (the leader long-polls the whole session)
    request, _ = fetcher._request(list(fetcher.states.values()))
    assert (request.session_epoch, _keys(request), _forgotten(request)) == (2, {}, set())
    fetcher.session.answered(ErrorCode.NONE, 777)

    # b backs off (not ready): forgotten; once ready again it is sent again
    request, _ = fetcher._request([fetcher.states[a], fetcher.states[c]])
    assert _keys(request) == {} and _forgotten(request) == {("id-b", 1)}
    fetcher.session.answered(ErrorCode.NONE, 777)
    request, _ = fetcher._request(list(fetcher.states.values()))
    assert _keys(request) == {("id-b", 1): 20} and request.session_epoch == 4
    fetcher.session.answered(ErrorCode.NONE, 777)

    # a new leader epoch is a change too
    fetcher.add(c, 7)
    request, _ = fetcher._request(list(fetcher.states.values()))
    assert [p.current_leader_epoch for t in request.topics for p in t.partitions] == [7]


def test_a_session_error_or_lost_connection_starts_over_with_a_full_fetch():
    session = FollowerSession()
    wanted = {("t", 0): (1, 10, 1, 0, 100), ("t", 1): (1, 20, 1, 0, 100)}
    assert session.plan(wanted) == ([("t", 0), ("t", 1)], [])
    session.answered(ErrorCode.NONE, 55)
    assert session.plan(wanted) == ([], [])
    session.answered(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert session.epoch == 0 and session.plan(wanted) == ([("t", 0), ("t", 1)], [])
    session.answered(ErrorCode.NONE, 56)
    assert (session.session_id, session.epoch) == (56, 1)
    session.plan(wanted)
    session.answered(ErrorCode.NONE, 56)
    session.reset()                                   # the connection went mid-request
    assert (session.session_id, session.epoch) == (56, 0)   # names the old one: the leader drops it
    assert session.plan(wanted) == ([("t", 0), ("t", 1)], [])
    session.answered(ErrorCode.NONE, 0)               # no session kept by the leader: full fetches
    assert (session.session_id, session.epoch) == (0, 0)
    assert session.plan(wanted) == ([("t", 0), ("t", 1)], [])
