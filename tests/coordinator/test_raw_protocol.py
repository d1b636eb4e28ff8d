"""The group and transaction APIs over the wire, version by version, with a raw client."""

import time

import pytest

from broker.testing import running_broker
from protocol import ErrorCode as E
from protocol import messages as m
from protocol.consumer_protocol import Subscription, encode_subscription
from tests.broker.raw_client import RawClient


@pytest.fixture
def client(tmp_path):
    with running_broker(tmp_path / "data") as broker:
        with RawClient("127.0.0.1", broker.port) as raw:
            raw.create_topic("t", 2)
            yield raw


def find_group_coordinator(client, group="g", key_type=0):
    """Find the group's (or transactional id's) coordinator, as every client does first: only
    FindCoordinator creates `__consumer_offsets` (`__transaction_state`); each group (transaction)
    request answers NOT_COORDINATOR until then."""
    deadline = time.monotonic() + 15
    while find(client, group, key_type).error_code != E.NONE:
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.fixture
def coordinated(client):
    find_group_coordinator(client)


@pytest.fixture
def txn_coordinated(client):
    find_group_coordinator(client, "tx", key_type=1)


SUB = encode_subscription(Subscription(topics=["t"]), 0)


def find(client, key, key_type=0, version=3):
    return client.request(10, version, m.FindCoordinatorRequest(key=key, key_type=key_type))


def join(client, member_id="", version=5, group="g", instance=None):
    J = m.JoinGroupRequest
    return client.request(11, version, J(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                         member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                                         protocols=[J.JoinGroupRequestProtocol(name="range", metadata=SUB)]))


def commit(client, group, member, generation, offsets, version=8):
    C = m.OffsetCommitRequest
    topics = {}
    for topic, partition, offset, metadata in offsets:
        topics.setdefault(topic, []).append(C.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=2,
            committed_metadata=metadata))
    return client.request(8, version, C(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                                        topics=[C.OffsetCommitRequestTopic(name=t, partitions=ps)
                                                for t, ps in topics.items()]))


def test_api_versions_advertise_what_java_4_needs(client):
    versions = {k.api_key: (k.min_version, k.max_version)
                for k in client.request(18, 3, m.ApiVersionsRequest(client_software_name="t",
                                                                     client_software_version="1")).api_keys}
    assert versions[8] == (0, 9) and versions[9] == (0, 9) and versions[10] == (0, 6)   # as Kafka 3.9
    assert versions[11] == (0, 9) and versions[42] == (0, 2) and versions[22] == (0, 5)
    assert versions[26] == (0, 4)  # EndTxn v5 belongs to transaction version 2, not advertised


def test_find_coordinator_versions(client):
    r = find(client, "g", version=0)
    assert r.error_code == 0 and r.port == client.sock.getpeername()[1] and r.node_id == 1
    r = find(client, "txn", key_type=1)
    assert r.error_code == 0 and r.host == "127.0.0.1"
    r = find(client, "", key_type=1)      # an empty transactional id has a coordinator too (Kafka 3.9)
    assert (r.error_code, r.node_id) == (0, 1)
    assert find(client, "x", key_type=7).error_code == E.INVALID_REQUEST
    r = client.request(10, 4, m.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]))
    assert [(c.key, c.error_code, c.node_id) for c in r.coordinators] == [("a", 0, 1), ("b", 0, 1)]


@pytest.mark.usefixtures("coordinated")
def test_join_sync_heartbeat_commit_fetch_leave(client):
    first = join(client)
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
    r = join(client, first.member_id)
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == first.member_id
    assert [(x.member_id, bytes(x.metadata)) for x in r.members] == [(first.member_id, SUB)]
    S = m.SyncGroupRequest
    s = client.request(14, 5, S(group_id="g", generation_id=1, member_id=r.member_id, protocol_type="consumer",
                                protocol_name="range", assignments=[]))
    assert s.error_code == 0 and bytes(s.assignment) == b"" and s.protocol_name == "range"
    hb = client.request(12, 4, m.HeartbeatRequest(group_id="g", generation_id=1, member_id=r.member_id))
    assert hb.error_code == 0
    hb = client.request(12, 4, m.HeartbeatRequest(group_id="g", generation_id=7, member_id=r.member_id))
    assert hb.error_code == E.ILLEGAL_GENERATION
    c = commit(client, "g", r.member_id, 1, [("t", 0, 5, "meta"), ("t", 1, 6, ""), ("nope", 0, 1, "")])
    assert {(t.name, p.partition_index): p.error_code for t in c.topics for p in t.partitions} == {
        ("t", 0): 0, ("t", 1): 0, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    F = m.OffsetFetchRequest
    f = client.request(9, 1, F(group_id="g", topics=[F.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]))
    assert [(p.committed_offset, p.metadata) for p in f.topics[0].partitions] == [(5, "meta"), (6, "")]
    f = client.request(9, 7, F(group_id="g", topics=None))  # null topics: everything the group has
    assert [(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch)
            for t in f.topics for p in t.partitions] == [("t", 0, 5, 2), ("t", 1, 6, 2)]
    L = m.LeaveGroupRequest
    leave = client.request(13, 3, L(group_id="g", members=[L.MemberIdentity(member_id=r.member_id),
                                                          L.MemberIdentity(member_id="ghost")]))
    assert [(x.member_id, x.error_code) for x in leave.members] == [(r.member_id, 0), ("ghost", E.UNKNOWN_MEMBER_ID)]
    assert client.request(13, 0, L(group_id="g", member_id="ghost")).error_code == E.UNKNOWN_MEMBER_ID


@pytest.mark.usefixtures("coordinated")
def test_offset_commit_v1_and_the_refused_v0(client):
    """sarama 1.x commits with OffsetCommit v1 whatever Kafka version it is set to. v0 (and OffsetFetch
    v0) read and wrote ZooKeeper's offsets: Kafka 3.9 answers UNSUPPORTED_VERSION per partition."""
    C = m.OffsetCommitRequest
    F = m.OffsetFetchRequest

    def commit_at(version, offset):
        body = C(group_id="old", generation_id_or_member_epoch=-1, member_id="", topics=[
            C.OffsetCommitRequestTopic(name="t", partitions=[C.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_metadata=f"v{version}",
                commit_timestamp=-1)])])
        return [(p.partition_index, p.error_code)
                for t in client.request(8, version, body).topics for p in t.partitions]

    def fetch_at(version):
        r = client.request(9, version, F(group_id="old", topics=[
            F.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]))
        return sorted((p.partition_index, p.committed_offset, p.metadata, p.error_code)
                      for t in r.topics for p in t.partitions)

    assert commit_at(0, 3) == [(0, E.UNSUPPORTED_VERSION)]
    assert fetch_at(1) == [(0, -1, "", 0), (1, -1, "", 0)]
    assert commit_at(1, 4) == [(0, 0)]
    assert fetch_at(1) == [(0, 4, "v1", 0), (1, -1, "", 0)]
    assert fetch_at(0) == [(0, -1, "", E.UNSUPPORTED_VERSION), (1, -1, "", E.UNSUPPORTED_VERSION)]
    # a v1 commit is checked against the group's generation as any later version's
    member = join(client, join(client, group="old").member_id, group="old")
    body = C(group_id="old", generation_id_or_member_epoch=member.generation_id + 5,
             member_id=member.member_id, topics=[C.OffsetCommitRequestTopic(name="t", partitions=[
                 C.OffsetCommitRequestPartition(partition_index=1, committed_offset=9)])])
    assert client.request(8, 1, body).topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION


@pytest.mark.usefixtures("coordinated")
def test_offset_fetch_v8_many_groups(client):
    commit(client, "a", "", -1, [("t", 0, 1, "x")], version=2)
    commit(client, "b", "", -1, [("t", 1, 2, "y")], version=9)
    F = m.OffsetFetchRequest
    r = client.request(9, 8, F(groups=[
        F.OffsetFetchRequestGroup(group_id="a", topics=None),
        F.OffsetFetchRequestGroup(group_id="b", topics=[F.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])]),
        F.OffsetFetchRequestGroup(group_id="missing", topics=None)]))
    got = {g.group_id: [(t.name, p.partition_index, p.committed_offset, p.metadata)
                        for t in g.topics for p in t.partitions] for g in r.groups}
    assert got == {"a": [("t", 0, 1, "x")], "b": [("t", 0, -1, ""), ("t", 1, 2, "y")], "missing": []}


@pytest.mark.usefixtures("coordinated")
def test_list_describe_delete_groups_and_offset_delete(client):
    commit(client, "simple", "", -1, [("t", 0, 1, "")])
    join(client, join(client, group="live").member_id, group="live")
    lg = client.request(16, 4, m.ListGroupsRequest(states_filter=["Empty"]))
    assert [(g.group_id, g.group_state) for g in lg.groups] == [("simple", "Empty")]
    lg = client.request(16, 5, m.ListGroupsRequest(types_filter=["classic"]))
    assert sorted(g.group_id for g in lg.groups) == ["live", "simple"]
    assert all(g.group_type == "classic" for g in lg.groups)
    d = client.request(15, 5, m.DescribeGroupsRequest(groups=["live", "unknown"], include_authorized_operations=True))
    live, unknown = d.groups
    assert live.group_state == "CompletingRebalance" and len(live.members) == 1 and live.authorized_operations > 0
    assert unknown.error_code == 0 and unknown.group_state == "Dead"
    O = m.OffsetDeleteRequest
    od = client.request(47, 0, O(group_id="simple", topics=[O.OffsetDeleteRequestTopic(
        name="t", partitions=[O.OffsetDeleteRequestPartition(partition_index=0)])]))
    assert od.error_code == 0 and od.topics[0].partitions[0].error_code == 0
    dg = client.request(42, 2, m.DeleteGroupsRequest(groups_names=["simple", "live", "zzz", "zzz"]))
    assert [(x.group_id, x.error_code) for x in dg.results] == [   # a group named twice: one answer
        ("simple", 0), ("live", E.NON_EMPTY_GROUP), ("zzz", E.GROUP_ID_NOT_FOUND)]


def test_init_producer_id_v0_for_idempotent_producers(client):
    a = client.request(22, 0, m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0))
    b = client.request(22, 4, m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0,
                                                     producer_id=a.producer_id, producer_epoch=0))
    assert a.error_code == b.error_code == 0 and a.producer_epoch == 0 and b.producer_id != a.producer_id


@pytest.mark.usefixtures("txn_coordinated")
def test_transaction_apis(client):
    client.create_topic("other", 1)
    init = client.request(22, 4, m.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000))
    assert init.error_code == 0 and init.producer_epoch == 0
    pid, epoch = init.producer_id, init.producer_epoch
    A = m.AddPartitionsToTxnRequest
    bad = client.request(24, 3, A(v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid,
                                  v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                      A.AddPartitionsToTxnTopic(name="t", partitions=[0]),
                                      A.AddPartitionsToTxnTopic(name="nope", partitions=[0])]))
    assert {(t.name, p.partition_index): p.partition_error_code for t in bad.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {("t", 0): E.OPERATION_NOT_ATTEMPTED,
                                                 ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    internal = client.request(24, 3, A(v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid,
                                       v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                           A.AddPartitionsToTxnTopic(name="__consumer_offsets", partitions=[0]),
                                           A.AddPartitionsToTxnTopic(name="t", partitions=[0])]))
    assert {(t.name, p.partition_index): p.partition_error_code for t in internal.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED,
                                                 ("t", 0): E.OPERATION_NOT_ATTEMPTED}   # as Kafka 3.9
    ok = client.request(24, 3, A(v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid,
                                 v3_and_below_producer_epoch=epoch,
                                 v3_and_below_topics=[A.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])]))
    assert all(p.partition_error_code == 0 for t in ok.results_by_topic_v3_and_below for p in t.results_by_partition)
    fenced = client.request(24, 1, A(v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid,
                                     v3_and_below_producer_epoch=epoch + 3,
                                     v3_and_below_topics=[A.AddPartitionsToTxnTopic(name="t", partitions=[0])]))
    assert fenced.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == \
        E.INVALID_PRODUCER_EPOCH  # v1 predates PRODUCER_FENCED
    verify = client.request(24, 4, A(transactions=[A.AddPartitionsToTxnTransaction(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[A.AddPartitionsToTxnTopic(name="t", partitions=[1])])]))
    assert verify.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == 0
    for version, missing_error in ((4, E.TRANSACTION_ABORTABLE), (5, E.TRANSACTION_ABORTABLE)):   # as Kafka 3.9
        verify = client.request(24, version, A(transactions=[A.AddPartitionsToTxnTransaction(
            transactional_id="tx", producer_id=pid, producer_epoch=epoch, verify_only=True,
            topics=[A.AddPartitionsToTxnTopic(name="other", partitions=[0])])]))
        assert verify.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == \
            missing_error
    lt = client.request(66, 1, m.ListTransactionsRequest(state_filters=["Ongoing"], duration_filter=-1))
    assert [(s.transactional_id, s.producer_id, s.transaction_state) for s in lt.transaction_states] == [
        ("tx", pid, "Ongoing")]
    lt = client.request(66, 1, m.ListTransactionsRequest(state_filters=["ongoing"], duration_filter=-1))
    assert (lt.unknown_state_filters, lt.transaction_states) == (["ongoing"], [])   # names exact, as Kafka
    dt = client.request(65, 0, m.DescribeTransactionsRequest(transactional_ids=["tx", "nope", ""]))
    tx, nope, empty = dt.transaction_states
    assert empty.error_code == E.INVALID_REQUEST
    assert tx.transaction_state == "Ongoing" and [(t.topic, t.partitions) for t in tx.topics] == [("t", [0, 1])]
    assert nope.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    end = client.request(26, 3, m.EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                                committed=False))
    assert end.error_code == 0
    # the markers go out after EndTxn is answered (as Kafka): PrepareAbort until they are in
    deadline = time.monotonic() + 15
    while True:
        dt = client.request(65, 0, m.DescribeTransactionsRequest(transactional_ids=["tx"]))
        if dt.transaction_states[0].transaction_state != "PrepareAbort" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert dt.transaction_states[0].transaction_state == "CompleteAbort"
    again = client.request(26, 3, m.EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                                  committed=True))
    assert again.error_code == E.INVALID_TXN_STATE


def _txn_offset_commit(client, pid, epoch, offset):
    T = m.TxnOffsetCommitRequest
    answer = client.request(28, 3, T(transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=epoch,
                                     generation_id=-1, member_id="", group_instance_id=None,
                                     topics=[T.TxnOffsetCommitRequestTopic(name="t", partitions=[
                                         T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                           committed_leader_epoch=-1,
                                                                           committed_metadata="")])]))
    return answer.topics[0].partitions[0].error_code


def _offsets_topic_error(client):
    M = m.MetadataRequest
    answer = client.request(3, 12, M(topics=[M.MetadataRequestTopic(name="__consumer_offsets")],
                                     allow_auto_topic_creation=False))
    return answer.topics[0].error_code


@pytest.mark.usefixtures("txn_coordinated")
def test_add_offsets_to_txn_before_the_offsets_topic_exists(client):
    """As Kafka 3.9 answers: AddOffsetsToTxn only computes the group's `__consumer_offsets` partition
    (it creates nothing, so it answers without the controller); TxnOffsetCommit is NOT_COORDINATOR
    until the client's FindCoordinator has created the topic; the commit completes either way."""
    init = client.request(22, 4, m.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000))
    pid, epoch = init.producer_id, init.producer_epoch
    add = m.AddOffsetsToTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g")
    assert client.request(25, 3, add).error_code == E.NONE
    assert _offsets_topic_error(client) == E.UNKNOWN_TOPIC_OR_PARTITION
    dt = client.request(65, 0, m.DescribeTransactionsRequest(transactional_ids=["tx"])).transaction_states[0]
    assert [(t.topic, len(t.partitions)) for t in dt.topics] == [("__consumer_offsets", 1)]   # the group's
    assert _txn_offset_commit(client, pid, epoch, 5) == E.NOT_COORDINATOR
    assert _offsets_topic_error(client) == E.UNKNOWN_TOPIC_OR_PARTITION
    deadline = time.monotonic() + 15
    while find(client, "g").error_code != E.NONE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _txn_offset_commit(client, pid, epoch, 5) == E.NONE
    end = m.EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=True)
    assert client.request(26, 3, end).error_code == E.NONE
    O = m.OffsetFetchRequest
    fetch = O(group_id="g", topics=[O.OffsetFetchRequestTopic(name="t", partition_indexes=[0])], require_stable=True)
    while (offset := client.request(9, 7, fetch).topics[0].partitions[0].committed_offset) != 5 \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert offset == 5


@pytest.mark.usefixtures("txn_coordinated")
def test_txn_offset_commit_needs_add_offsets_first_and_the_current_epoch(client):
    """As Kafka 3.9 (checked side by side): offsets of a group whose offsets partition is not in the
    transaction yet are INVALID_TXN_STATE; a zombie's epoch is INVALID_PRODUCER_EPOCH."""
    I, T = m.InitProducerIdRequest, m.TxnOffsetCommitRequest
    client.request(22, 4, I(transactional_id="tx-off", transaction_timeout_ms=60_000))
    init = client.request(22, 4, I(transactional_id="tx-off", transaction_timeout_ms=60_000))
    pid, epoch = init.producer_id, init.producer_epoch
    assert epoch == 1
    deadline = time.monotonic() + 15   # the group's coordinator first, as a client finds it
    while find(client, "g-off").error_code != E.NONE and time.monotonic() < deadline:
        time.sleep(0.05)

    def txn_commit(producer_epoch):
        answer = client.request(28, 3, T(transactional_id="tx-off", group_id="g-off", producer_id=pid,
                                         producer_epoch=producer_epoch, generation_id=-1, member_id="",
                                         group_instance_id=None, topics=[T.TxnOffsetCommitRequestTopic(
                                             name="t", partitions=[T.TxnOffsetCommitRequestPartition(
                                                 partition_index=0, committed_offset=3)])]))
        return answer.topics[0].partitions[0].error_code
    assert txn_commit(epoch) == E.INVALID_TXN_STATE
    assert client.request(25, 3, m.AddOffsetsToTxnRequest(transactional_id="tx-off", producer_id=pid,
                                                           producer_epoch=epoch, group_id="g-off")).error_code == 0
    assert txn_commit(epoch - 1) == E.INVALID_PRODUCER_EPOCH
    assert txn_commit(epoch) == E.NONE


def test_describe_producers(client):
    from protocol.records import SimpleRecord, build_batch
    init = client.request(22, 0, m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0))
    batch = build_batch([SimpleRecord(value=b"v", timestamp=1_700_000_000_000)], producer_id=init.producer_id,
                        producer_epoch=0, base_sequence=0)
    assert client.produce("t", 0, batch).error_code == 0
    D = m.DescribeProducersRequest
    r = client.request(61, 0, D(topics=[D.TopicRequest(name="t", partition_indexes=[0, 1, 9])]))
    p0, p1, p9 = r.topics[0].partitions
    assert [(s.producer_id, s.producer_epoch, s.last_sequence, s.current_txn_start_offset)
            for s in p0.active_producers] == [(init.producer_id, 0, 0, -1)]
    assert p1.active_producers == [] and p9.error_code == E.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.usefixtures("coordinated")
def test_deleting_a_topic_deletes_its_committed_offsets(client):
    commit(client, "d", "", -1, [("t", 0, 4, "")])
    client.create_topic("keep", 1)
    commit(client, "d", "", -1, [("keep", 0, 2, "")])
    deleted = client.request(20, 4, m.DeleteTopicsRequest(topic_names=["t"], timeout_ms=5000))
    assert deleted.responses[0].error_code == 0
    F = m.OffsetFetchRequest
    f = client.request(9, 7, F(group_id="d", topics=None))
    assert [(t.name, p.committed_offset) for t in f.topics for p in t.partitions] == [("keep", 2)]


def test_default_bodies_get_answers_not_closed_connections(client):
    """Every version of every group/transaction API, with all fields at their defaults (empty ids,
    zero timeouts, no members): Kafka answers with error codes, so must we."""
    from broker.handlers.groups import HANDLERS as GROUPS
    from broker.handlers.transactions import HANDLERS as TRANSACTIONS

    for api_key, (low, high, _) in sorted({**GROUPS, **TRANSACTIONS}.items()):
        request = m.REQUESTS[api_key]
        for version in range(low, high + 1):
            body = request()
            if api_key == 22:
                body.transactional_id = None
            client.request(api_key, version, body)  # raises if the broker closed the connection


def _offsets_batches(client):
    """(producer id, base sequence, control) of every batch in __consumer_offsets (one partition
    in a test broker)."""
    from protocol.records import iter_batches
    answer = client.fetch("__consumer_offsets", 0, 0)
    records = bytes(answer.responses[0].partitions[0].records or b"")
    return [(b.producer_id, b.base_sequence, b.is_control) for b in iter_batches(records, allow_partial=True)]


@pytest.mark.usefixtures("coordinated", "txn_coordinated")
def test_offset_commit_batches_start_at_sequence_zero_as_kafkas(client):
    # Kafka 3.9 (DumpLogSegments): an offset commit's batch, plain or transactional, has base
    # sequence 0; the group's metadata and tombstones carry none (-1). A producer's second
    # transactional commit to the group, at sequence 0 again, is written too (not taken for a retry).
    first = join(client, group="g-seq")
    r = join(client, first.member_id, group="g-seq")
    S = m.SyncGroupRequest
    assert client.request(14, 5, S(group_id="g-seq", generation_id=1, member_id=r.member_id,
                                   protocol_type="consumer", protocol_name="range",
                                   assignments=[])).error_code == 0
    assert commit(client, "g-seq", r.member_id, 1, [("t", 0, 5, "")]).topics[0].partitions[0].error_code == 0
    L = m.LeaveGroupRequest
    client.request(13, 3, L(group_id="g-seq", members=[L.MemberIdentity(member_id=r.member_id)]))
    init = client.request(22, 4, m.InitProducerIdRequest(transactional_id="tx-seq", transaction_timeout_ms=60_000))
    pid, epoch = init.producer_id, init.producer_epoch
    assert client.request(25, 3, m.AddOffsetsToTxnRequest(transactional_id="tx-seq", producer_id=pid,
                                                           producer_epoch=epoch, group_id="g-seq")).error_code == 0
    T = m.TxnOffsetCommitRequest
    for offset in (7, 9):
        answer = client.request(28, 3, T(transactional_id="tx-seq", group_id="g-seq", producer_id=pid,
                                         producer_epoch=epoch, generation_id=-1, member_id="",
                                         group_instance_id=None, topics=[T.TxnOffsetCommitRequestTopic(
                                             name="t", partitions=[T.TxnOffsetCommitRequestPartition(
                                                 partition_index=0, committed_offset=offset,
                                                 committed_leader_epoch=-1, committed_metadata="")])]))
        assert answer.topics[0].partitions[0].error_code == 0
    assert client.request(26, 3, m.EndTxnRequest(transactional_id="tx-seq", producer_id=pid,
                                                 producer_epoch=epoch, committed=True)).error_code == 0
    deadline = time.monotonic() + 15
    while len(batches := _offsets_batches(client)) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert batches == [(-1, -1, False),       # the group after SyncGroup
                       (-1, 0, False),        # OffsetCommit
                       (-1, -1, False),       # the group, empty, after LeaveGroup
                       (pid, 0, False), (pid, 0, False),   # both TxnOffsetCommits
                       (pid, -1, True)]       # the commit marker
    F = m.OffsetFetchRequest
    fetched = client.request(9, 7, F(group_id="g-seq", topics=None, require_stable=True))
    assert [(t.name, p.committed_offset) for t in fetched.topics for p in t.partitions] == [("t", 9)]
