"""Scenarios of the error paths producers, transactional producers and group consumers meet
(registered in scenarios.SCENARIOS): each builds its state and returns [(label, api_key, answer)]."""

from __future__ import annotations

from protocol import messages

from tests.differential.session import Session, _batch


def produce_errors(s: Session, p: str):
    """Idempotent sequences out of order and duplicated, unknown producers, acks, partitions."""
    out = []
    topic = f"{p}-pe"
    s.topic(topic)
    pid, epoch = s.init_producer(None)

    def send(values, seq, *, producer=pid, producer_epoch=epoch, acks=-1, partition=0, version=9):
        return s.produce(topic, partition, _batch(values, producer_id=producer, producer_epoch=producer_epoch,
                                                  base_sequence=seq), acks=acks, version=version)
    out.append(("first", 0, send([b"a", b"b"], 0)))
    out.append(("duplicate", 0, send([b"a", b"b"], 0)))
    out.append(("next", 0, send([b"c"], 2)))
    out.append(("gap", 0, send([b"d"], 5)))
    out.append(("older duplicate", 0, send([b"a", b"b"], 0)))
    out.append(("partial overlap", 0, send([b"b", b"c"], 1)))
    out.append(("unknown producer", 0, send([b"x"], 0, producer=pid + 1000)))
    out.append(("unknown producer, later sequence", 0, send([b"x"], 7, producer=pid + 1001)))
    out.append(("older epoch", 0, send([b"x"], 3, producer_epoch=epoch - 1 if epoch else 5)))
    out.append(("newer epoch, sequence 0", 0, send([b"y"], 0, producer_epoch=epoch + 1)))
    out.append(("newer epoch, sequence 5", 0, send([b"y"], 5, producer_epoch=epoch + 2)))
    out.append(("acks 2", 0, send([b"z"], 1, producer_epoch=epoch + 1, acks=2)))
    out.append(("unknown partition", 0, send([b"z"], 0, partition=4)))
    out.append(("transactional batch without a transaction", 0, s.produce(topic, 0, _batch(
        [b"t"], producer_id=pid, producer_epoch=epoch + 1, base_sequence=1, transactional=True))))
    out.append(("offsets after", 2, _earliest_and_latest(s, topic)))
    return out


def _earliest_and_latest(s, topic):
    L = messages.ListOffsetsRequest
    return s.request(2, 7, L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1,
                                                       current_leader_epoch=-1)])]))


def transaction_errors(s: Session, p: str):
    """EndTxn, AddOffsetsToTxn and TxnOffsetCommit out of turn; InitProducerId with a wrong epoch."""
    out = []
    topic = f"{p}-te"
    s.topic(topic)
    txn = f"{p}-tx"
    s.init_producer(txn)
    pid, epoch = s.init_producer(txn)       # epoch 1: epoch 0 is a zombie's
    E, A = messages.EndTxnRequest, messages.AddOffsetsToTxnRequest
    T = messages.TxnOffsetCommitRequest

    def end(commit, producer=pid, producer_epoch=epoch, txn_id=txn, version=3):
        return s.request(26, version, E(transactional_id=txn_id, producer_id=producer,
                                        producer_epoch=producer_epoch, committed=commit))

    def add_offsets(group, producer=pid, producer_epoch=epoch):
        return s.request(25, 3, A(transactional_id=txn, producer_id=producer, producer_epoch=producer_epoch,
                                  group_id=group))

    def txn_commit(group, producer=pid, producer_epoch=epoch, generation=-1, member=""):
        return s.request(28, 3, T(transactional_id=txn, group_id=group, producer_id=producer,
                                  producer_epoch=producer_epoch, generation_id=generation, member_id=member,
                                  group_instance_id=None, topics=[T.TxnOffsetCommitRequestTopic(
                                      name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                                          partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                          committed_metadata="")])]))
    out.append(("commit with nothing begun", 26, end(True)))
    out.append(("abort with nothing begun", 26, end(False)))
    out.append(("commit, wrong epoch", 26, end(True, producer_epoch=epoch + 3)))
    out.append(("commit, wrong producer", 26, end(True, producer=pid + 1000)))
    out.append(("commit, unknown transactional id", 26, end(True, txn_id=f"{p}-nosuch")))
    out.append(("txn offset commit before add offsets", 28, txn_commit(f"{p}-grp")))
    out.append(("add offsets, wrong epoch", 25, add_offsets(f"{p}-grp", producer_epoch=epoch + 3)))
    out.append(("add offsets", 25, s.settled(25, 3, A(transactional_id=txn, producer_id=pid,
                                                      producer_epoch=epoch, group_id=f"{p}-grp"))))
    out.append(("txn offset commit", 28, s.settled(28, 3, T(
        transactional_id=txn, group_id=f"{p}-grp", producer_id=pid, producer_epoch=epoch,
        generation_id=-1, member_id="", group_instance_id=None, topics=[T.TxnOffsetCommitRequestTopic(
            name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                committed_metadata="")])]))))
    out.append(("txn offset commit, zombie epoch", 28, txn_commit(f"{p}-grp", producer_epoch=epoch - 1)))
    out.append(("txn offset commit, unknown member", 28, txn_commit(f"{p}-grp", generation=3, member="who")))
    out.append(("commit", 26, s.settled(26, 3, E(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                                  committed=True))))
    s.settled(26, 3, E(transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True))
    out.append(("abort after commit", 26, end(False)))
    out.append(("commit again", 26, end(True)))
    out.append(("commit, zombie epoch", 26, end(True, producer_epoch=epoch - 1)))
    I = messages.InitProducerIdRequest
    out.append(("init with a wrong epoch", 22, s.request(22, 4, I(
        transactional_id=txn, transaction_timeout_ms=60_000, producer_id=pid, producer_epoch=epoch + 5))))
    out.append(("init with another producer id", 22, s.request(22, 4, I(
        transactional_id=txn, transaction_timeout_ms=60_000, producer_id=pid + 1000, producer_epoch=epoch))))
    out.append(("init with a timeout too long", 22, s.request(22, 4, I(
        transactional_id=f"{p}-long", transaction_timeout_ms=10**9, producer_id=-1, producer_epoch=-1))))
    out.append(("init idempotent with an epoch", 22, s.request(22, 4, I(
        transactional_id=None, transaction_timeout_ms=60_000, producer_id=pid, producer_epoch=epoch))))
    return out


def group_errors(s: Session, p: str):
    """Classic group calls a consumer makes with a stale generation or member, and group admin."""
    out = []
    topic = f"{p}-ge"
    s.topic(topic)
    group = f"{p}-g"
    member, generation = s.join(group, [topic])
    H, L = messages.HeartbeatRequest, messages.LeaveGroupRequest
    out.append(("heartbeat", 12, s.request(12, 4, H(group_id=group, generation_id=generation,
                                                    member_id=member, group_instance_id=None))))
    out.append(("heartbeat, old generation", 12, s.request(12, 4, H(
        group_id=group, generation_id=generation - 1, member_id=member, group_instance_id=None))))
    out.append(("heartbeat, unknown member", 12, s.request(12, 4, H(
        group_id=group, generation_id=generation, member_id="who", group_instance_id=None))))
    out.append(("heartbeat, unknown group", 12, s.request(12, 4, H(
        group_id=f"{p}-nogroup", generation_id=1, member_id="who", group_instance_id=None))))
    S = messages.SyncGroupRequest
    for label, fields in (("sync, old generation", dict(generation_id=generation - 1)),
                          ("sync, unknown member", dict(member_id="who")),
                          ("sync, another protocol", dict(protocol_name="roundrobin")),
                          ("sync, another protocol type", dict(protocol_type="connect")),
                          ("sync, unknown group", dict(group_id=f"{p}-nogroup"))):
        body = dict(group_id=group, generation_id=generation, member_id=member, group_instance_id=None,
                    protocol_type="consumer", protocol_name="range", assignments=[])
        body.update(fields)
        out.append((label, 14, s.request(14, 5, S(**body))))
    C = messages.OffsetCommitRequest

    def commit(generation_id, member_id, name=topic, version=8, group_id=group):
        return s.request(8, version, C(group_id=group_id, generation_id_or_member_epoch=generation_id,
                                       member_id=member_id, group_instance_id=None, topics=[
                                           C.OffsetCommitRequestTopic(name=name, partitions=[
                                               C.OffsetCommitRequestPartition(
                                                   partition_index=0, committed_offset=4,
                                                   committed_leader_epoch=-1, committed_metadata="m")])]))
    out.append(("commit, old generation", 8, commit(generation - 1, member)))
    out.append(("commit, unknown member", 8, commit(generation, "who")))
    out.append(("commit, unknown topic", 8, commit(generation, member, name=f"{p}-nosuch")))
    out.append(("commit, no member", 8, commit(-1, "")))
    out.append(("commit, big metadata", 8, s.request(8, 8, C(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member, group_instance_id=None,
        topics=[C.OffsetCommitRequestTopic(name=topic, partitions=[C.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=4, committed_leader_epoch=-1,
            committed_metadata="x" * 5000)])]))))
    J = messages.JoinGroupRequest
    out.append(("join with another protocol type", 11, s.request(11, 7, J(
        group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
        group_instance_id=None, protocol_type="connect", protocols=[
            J.JoinGroupRequestProtocol(name="range", metadata=b"")]))))
    out.append(("join with a session timeout too short", 11, s.request(11, 7, J(
        group_id=f"{p}-short", session_timeout_ms=10, rebalance_timeout_ms=30_000, member_id="",
        group_instance_id=None, protocol_type="consumer", protocols=[
            J.JoinGroupRequestProtocol(name="range", metadata=b"")]))))
    out.append(("join without protocols", 11, s.request(11, 7, J(
        group_id=f"{p}-none", session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
        group_instance_id=None, protocol_type="consumer", protocols=[]))))
    D, G = messages.DeleteGroupsRequest, messages.DescribeGroupsRequest
    out.append(("delete a group with a member", 42, s.request(42, 2, D(groups_names=[group, f"{p}-nogroup"]))))
    out.append(("describe", 15, s.request(15, 5, G(groups=[group, f"{p}-nogroup"],
                                                   include_authorized_operations=False))))
    out.append(("leave, unknown member", 13, s.request(13, 5, L(group_id=group, members=[
        L.MemberIdentity(member_id="who", group_instance_id=None, reason=None)]))))
    out.append(("leave", 13, s.request(13, 5, L(group_id=group, members=[
        L.MemberIdentity(member_id=member, group_instance_id=None, reason="done")]))))
    out.append(("leave again", 13, s.request(13, 5, L(group_id=group, members=[
        L.MemberIdentity(member_id=member, group_instance_id=None, reason=None)]))))
    out.append(("describe after", 15, s.request(15, 5, G(groups=[group], include_authorized_operations=False))))
    LG = messages.ListGroupsRequest

    def listed(states, types, version=5):
        answer = s.request(16, version, LG(states_filter=states, types_filter=types))
        # only this group: Kafka keeps the groups of the failed joins above a while (a decision)
        answer.groups = [g for g in answer.groups if g.group_id == group]
        return answer
    out.append(("list empty groups", 16, listed(["Empty"], [])))
    out.append(("list stable groups", 16, listed(["Stable"], [])))
    out.append(("list lower-case state", 16, listed(["empty"], [])))
    out.append(("list classic", 16, listed([], ["classic"])))
    out.append(("list consumer type", 16, listed([], ["consumer"])))
    out.append(("list unknown type", 16, listed([], ["nonsense"])))
    out.append(("delete the empty group", 42, s.request(42, 2, D(groups_names=[group, group]))))
    return out


def consumer_reads(s: Session, p: str):
    """What consumers and kafka-consumer-groups meet: offsets pending in a transaction (require_stable),
    Metadata auto-creation, internal and invalid topics."""
    out = []
    topic = f"{p}-cr"
    s.topic(topic)
    txn, group = f"{p}-crt", f"{p}-crg"
    pid, epoch = s.transaction(txn, topic, [b"x"], commit=None)
    A, T = messages.AddOffsetsToTxnRequest, messages.TxnOffsetCommitRequest
    s.settled(25, 3, A(transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=group))
    s.settled(28, 3, T(transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch,
                       generation_id=-1, member_id="", group_instance_id=None, topics=[
                           T.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                               T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                 committed_leader_epoch=-1)])]))
    F = messages.OffsetFetchRequest
    for version, stable in ((7, True), (7, False), (6, False), (1, False)):
        body = F(group_id=group, topics=[F.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
                 require_stable=stable)
        out.append((f"pending offsets v{version} stable={stable}", 9, s.settled(9, version, body)))
    out.append(("pending offsets v9, all topics", 9, s.settled(9, 9, F(require_stable=True, groups=[
        F.OffsetFetchRequestGroup(group_id=group, topics=None)]))))
    M = messages.MetadataRequest
    for version, auto in ((12, True), (4, True), (3, True), (12, False)):
        out.append((f"auto-create v{version} {auto}", 3, s.request(3, version, M(
            topics=[M.MetadataRequestTopic(name=f"{p}-auto{version}{auto}")], allow_auto_topic_creation=auto))))
    for name in ("bad name!", "__consumer_offsets", "__transaction_state", "a" * 260):
        out.append((f"metadata {name[:20]}", 3, s.request(3, 12, M(
            topics=[M.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True))))
    out.append(("produce to __consumer_offsets", 0, s.produce("__consumer_offsets", 0, _batch([b"x"]))))
    return out


def fetch_sessions(s: Session, p: str):
    """Incremental fetch sessions (KIP-227) as the Java client and librdkafka use them, and topic ids."""
    out = []
    topic = f"{p}-fs"
    topic_id = s.topic(topic, 2)
    s.append(topic, [b"a", b"b"])
    F = messages.FetchRequest

    def fetch(session, epoch, parts, forgotten=(), version=12, ids=False):
        return s.request(1, version, F(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
            session_id=session, session_epoch=epoch, rack_id="", topics=[F.FetchTopic(
                topic=name, topic_id=topic_id if ids else None, partitions=[F.FetchPartition(
                    partition=index, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                    last_fetched_epoch=-1, log_start_offset=-1)]) for name, index, offset in parts],
            forgotten_topics_data=[F.ForgottenTopic(topic=name, topic_id=topic_id if ids else None,
                                                    partitions=[index]) for name, index in forgotten]))
    first = fetch(0, 0, [(topic, 0, 0), (topic, 1, 0)])
    out.append(("new session", 1, first))
    session = first.session_id
    out.append(("nothing new", 1, fetch(session, 1, [])))
    s.append(topic, [b"c"], partition=1)
    out.append(("new data on one partition", 1, fetch(session, 2, [])))
    out.append(("advance and forget", 1, fetch(session, 3, [(topic, 1, 1)], forgotten=[(topic, 0)])))
    out.append(("epoch repeated", 1, fetch(session, 3, [])))
    out.append(("epoch skipped", 1, fetch(session, 9, [])))
    out.append(("unknown session", 1, fetch(session + 7, 1, [])))
    out.append(("full fetch naming a session", 1, fetch(session, 0, [(topic, 0, 0)])))
    out.append(("sessionless", 1, fetch(0, -1, [(topic, 0, 1)])))
    out.append(("close", 1, fetch(session, -1, [])))
    out.append(("by topic id v13", 1, fetch(0, -1, [("", 0, 0)], version=13, ids=True)))
    out.append(("new session by topic id", 1, fetch(0, 0, [("", 0, 0)], version=13, ids=True)))
    return out


def produce_shapes(s: Session, p: str):
    """Record batches a broker must refuse or take apart: timestamps out of range, bad CRC, sizes."""
    import time
    out = []
    topic = f"{p}-ps"
    s.topic(topic, configs={"message.timestamp.before.max.ms": "3600000", "max.message.bytes": "2000"})
    now = int(time.time() * 1000)
    from protocol.records import SimpleRecord, build_batch
    from tests.differential.scenarios import _delete_records
    s.append(topic, [b"seed", b"seed"])
    _delete_records(s, topic, 1)     # errors that report the log start offset show 1

    def send(records, label, **kwargs):
        out.append((label, 0, s.produce(topic, 0, records, **kwargs)))
    send(build_batch([SimpleRecord(value=b"old", key=None, timestamp=now - 7_200_000)]), "too old")
    send(build_batch([SimpleRecord(value=b"ok", key=None, timestamp=now),
                      SimpleRecord(value=b"old", key=None, timestamp=now - 7_200_000)]), "one of two too old")
    send(build_batch([SimpleRecord(value=b"x" * 3000, key=None, timestamp=now)]), "too large")
    corrupt = bytearray(build_batch([SimpleRecord(value=b"crc", key=None, timestamp=now)]))
    corrupt[-1] ^= 0xFF
    send(bytes(corrupt), "bad crc")
    send(b"", "empty records")
    send(build_batch([SimpleRecord(value=b"v3", key=None, timestamp=now)]), "acks 0 v3", acks=1, version=3)
    txn_id = f"{p}-pst"
    send(build_batch([SimpleRecord(value=b"plain", key=None, timestamp=now)]), "transactional id, plain batch",
         transactional_id=txn_id)
    P = messages.ProduceRequest
    batch = build_batch([SimpleRecord(value=b"twice", key=None, timestamp=now)])
    out.append(("a partition twice", 0, s.request(0, 9, P(transactional_id=None, acks=-1, timeout_ms=5000,
                                                          topic_data=[P.TopicProduceData(name=topic, partition_data=[
                                                              P.PartitionProduceData(index=0, records=batch),
                                                              P.PartitionProduceData(index=0, records=batch)])]))))
    out.append(("unknown topic", 0, s.request(0, 9, P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=f"{p}-nosuch", partition_data=[P.PartitionProduceData(index=0, records=batch)])]))))
    out.append(("end offsets", 2, _earliest_and_latest(s, topic)))
    guarded = f"{p}-psg"
    s.topic(guarded, configs={"min.insync.replicas": "2"})
    s.append(guarded, [b"a", b"b"], acks=1)
    _delete_records(s, guarded, 1)
    out.append(("not enough replicas", 0, s.produce(guarded, 0, build_batch(
        [SimpleRecord(value=b"x", key=None, timestamp=now)]))))
    return out


def old_versions(s: Session, p: str):
    """Old clients' versions: Fetch v0-v3 (message sets converted down to magic 0 and 1), Produce of
    magic 0/1 message sets, ListOffsets v0 with several offsets, Metadata v0."""
    from protocol.legacy_records import _message

    out = []
    topic = f"{p}-old"
    s.topic(topic)
    stamp = 1_700_000_000_000
    from protocol.records import SimpleRecord, build_batch
    s.produce(topic, 0, build_batch([SimpleRecord(value=b"a", key=b"k", timestamp=stamp),
                                     SimpleRecord(value=b"b", key=None, timestamp=stamp + 1)]))
    s.produce(topic, 0, build_batch([SimpleRecord(value=b"c" * 50, key=None, timestamp=stamp + 2)],
                                    compression_type=1))
    out.append(("produce magic 1", 0, s.produce(topic, 0, _message(0, 1, 0, stamp + 3, b"m1", b"v1"), version=2)))
    out.append(("produce magic 0", 0, s.produce(topic, 0, _message(0, 0, 0, -1, None, b"v0"), version=1)))
    F = messages.FetchRequest
    for version in (0, 1, 2, 3, 4):
        for offset in (0, 1, 2, 4):
            answer = s.request(1, version, F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                              isolation_level=0, topics=[F.FetchTopic(topic=topic, partitions=[
                                                  F.FetchPartition(partition=0, fetch_offset=offset,
                                                                   partition_max_bytes=1 << 20)])]))
            out.append((f"fetch v{version} from {offset}", 1, answer))
    L = messages.ListOffsetsRequest
    for ts in (-1, -2):
        out.append((f"list offsets v0 {ts}", 2, s.request(2, 0, L(replica_id=-1, topics=[L.ListOffsetsTopic(
            name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=ts, max_num_offsets=5)])]))))
    out.append(("list offsets v1 by time", 2, s.request(2, 1, L(replica_id=-1, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=stamp + 1)])]))))
    M = messages.MetadataRequest
    answer = s.request(3, 0, M(topics=[M.MetadataRequestTopic(name=topic)]))
    out.append(("metadata v0", 3, answer))
    return out


def transaction_lifecycle(s: Session, p: str):
    """AddPartitionsToTxn's answers, a producer re-initialised mid-transaction, and after-effects."""
    out = []
    topic = f"{p}-tl"
    s.topic(topic, 2)
    txn = f"{p}-tlx"
    pid, epoch = s.init_producer(txn)
    A = messages.AddPartitionsToTxnRequest

    def add(parts, producer_epoch=epoch, version=3):
        return s.request(24, version, A(v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                                        v3_and_below_producer_epoch=producer_epoch, v3_and_below_topics=[
                                            A.AddPartitionsToTxnTopic(name=n, partitions=ps) for n, ps in parts]))
    out.append(("add unknown partition", 24, add([(topic, [0, 7])])))
    out.append(("add unknown topic", 24, add([(f"{p}-nosuch", [0]), (topic, [0])])))
    out.append(("add", 24, s.settled(24, 3, A(v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                                              v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                                  A.AddPartitionsToTxnTopic(name=topic, partitions=[0])]))))
    out.append(("add again", 24, add([(topic, [0])])))
    out.append(("add, zombie epoch", 24, add([(topic, [1])], producer_epoch=epoch - 1 if epoch else 7)))
    out.append(("add v1, newer epoch", 24, add([(topic, [1])], producer_epoch=epoch + 1, version=1)))
    out.append(("add internal topic", 24, add([("__consumer_offsets", [0])])))
    I = messages.InitProducerIdRequest
    again = s.settled(22, 4, I(transactional_id=txn, transaction_timeout_ms=60_000, producer_id=-1,
                               producer_epoch=-1))
    out.append(("re-init mid-transaction", 22, again))
    D = messages.DescribeTransactionsRequest
    out.append(("state after", 65, s.request(65, 0, D(transactional_ids=[txn]))))
    out.append(("old epoch ends it", 26, s.request(26, 3, messages.EndTxnRequest(
        transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True))))
    return out


def abort_hanging(s: Session, p: str):
    """kafka-transactions find-hanging / abort: DescribeProducers, then WriteTxnMarkers to the leader."""
    out = []
    topic = f"{p}-ah"
    s.topic(topic)
    pid, epoch = s.transaction(f"{p}-ahx", topic, [b"hanging"], commit=None)
    s.append(topic, [b"after"])
    D = messages.DescribeProducersRequest
    described = s.request(61, 0, D(topics=[D.TopicRequest(name=topic, partition_indexes=[0])]))
    out.append(("describe producers", 61, described))
    state = next(x for x in described.topics[0].partitions[0].active_producers if x.producer_id == pid)
    W = messages.WriteTxnMarkersRequest

    def markers(committed, coordinator_epoch, producer_epoch=epoch, name=topic):
        return s.request(27, 1, W(markers=[W.WritableTxnMarker(
            producer_id=pid, producer_epoch=producer_epoch, transaction_result=committed,
            coordinator_epoch=coordinator_epoch, topics=[W.WritableTxnMarkerTopic(name=name, partition_indexes=[0])])]))
    out.append(("abort, older coordinator epoch", 27, markers(False, state.coordinator_epoch - 1)))
    out.append(("abort, unknown topic", 27, markers(False, state.coordinator_epoch, name=f"{p}-nosuch")))
    out.append(("abort", 27, markers(False, state.coordinator_epoch)))
    out.append(("abort again", 27, markers(False, state.coordinator_epoch)))
    out.append(("offsets after", 2, _earliest_and_latest(s, topic)))
    L = messages.ListOffsetsRequest
    out.append(("stable offset after", 2, s.request(2, 7, L(replica_id=-1, isolation_level=1, topics=[
        L.ListOffsetsTopic(name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))))
    out.append(("producers after", 61, s.request(61, 0, D(topics=[D.TopicRequest(name=topic, partition_indexes=[0])]))))
    out.append(("coordinator's view", 65, s.request(65, 0, messages.DescribeTransactionsRequest(
        transactional_ids=[f"{p}-ahx"]))))
    return out


def offsets_by_version(s: Session, p: str):
    """OffsetCommit v0-v8 and OffsetFetch v0-v9 of one group, as old and new clients send them."""
    out = []
    topic = f"{p}-ov"
    s.topic(topic, 2)
    group = f"{p}-og"
    s.settled(10, 3, messages.FindCoordinatorRequest(key=group, key_type=0))
    C, F = messages.OffsetCommitRequest, messages.OffsetFetchRequest
    for version in range(0, 9):
        body = C(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                 retention_time_ms=-1, topics=[C.OffsetCommitRequestTopic(name=topic, partitions=[
                     C.OffsetCommitRequestPartition(partition_index=version % 2, committed_offset=10 + version,
                                                    committed_leader_epoch=-1, commit_timestamp=-1,
                                                    committed_metadata=f"v{version}")])])
        out.append((f"commit v{version}", 8, s.settled(8, version, body)))
        for fetch_version in (0, 1, 3, 5, 7):
            out.append((f"fetch v{fetch_version} after commit v{version}", 9, s.settled(9, fetch_version, F(
                group_id=group, topics=[F.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])]))))
    out.append(("fetch v2 all topics", 9, s.settled(9, 2, F(group_id=group, topics=None))))
    out.append(("commit v2 retention", 8, s.settled(8, 2, C(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=1000,
        topics=[C.OffsetCommitRequestTopic(name=topic, partitions=[C.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=99, committed_metadata=None)])]))))
    out.append(("fetch after null metadata", 9, s.settled(9, 5, F(
        group_id=group, topics=[F.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))))
    return out


def find_coordinators(s: Session, p: str):
    """FindCoordinator, one key (v0-v3) and batched (v4+), of every key type, empty keys included."""
    out = []
    s.settled(10, 3, messages.FindCoordinatorRequest(key=f"{p}-g", key_type=0))
    s.settled(10, 3, messages.FindCoordinatorRequest(key=f"{p}-t", key_type=1))
    F = messages.FindCoordinatorRequest
    for version in (0, 1, 2, 3):
        for key_type in (0, 1):
            if version == 0 and key_type:
                continue
            for key in (f"{p}-g", ""):
                out.append((f"v{version} type {key_type} {key!r}", 10, s.request(10, version, F(
                    key=key, key_type=key_type))))
    out.append(("v3 unknown type", 10, s.request(10, 3, F(key=f"{p}-g", key_type=7))))
    for version in (4, 5):
        for key_type in (0, 1, 7):
            out.append((f"v{version} batch type {key_type}", 10, s.request(10, version, F(
                key_type=key_type, coordinator_keys=[f"{p}-g", "", f"{p}-t"]))))
    return out
