"""Scenarios of edges the others leave out (registered in scenarios.SCENARIOS): ListOffsets by time
around deleted and out-of-order records, OffsetForLeaderEpoch, malformed record batches, topic names
at the length limit and colliding, CreatePartitions' odd requests. Each builds its state and returns
[(label, api_key, answer)]."""

from __future__ import annotations

import struct
import time
import uuid

from crc32c import crc32c

from protocol import messages
from protocol.records import SimpleRecord, build_batch

from tests.differential.session import Session

ZERO_ID = uuid.UUID(int=0)


def _by_time(s, topic, timestamps, version=9):
    L = messages.ListOffsetsRequest
    return s.request(2, version, L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=t, current_leader_epoch=-1)
                                for t in timestamps])]))


def _stamped(values_at) -> bytes:
    return build_batch([SimpleRecord(value=v, key=k, timestamp=t) for k, v, t in values_at])


def list_offsets_by_time(s: Session, p: str):
    """Timestamps before, between, on and after records whose times go backwards, a batch whose
    largest time is in its middle; then again once DeleteRecords trimmed the oldest (and the largest)."""
    from tests.differential.scenarios import _delete_records
    out = []
    base = int(time.time() * 1000) - 60_000
    for kind, configs in (("plain", None), ("compact", {"cleanup.policy": "compact"})):
        topic = f"{p}-lt{kind}"
        s.topic(topic, configs=configs)
        for batch in ([(b"k1", b"a", base), (b"k2", b"b", base + 1)],       # offsets 0-1
                      [(b"k1", b"c", base + 30), (b"k3", b"d", base + 10)],  # 2-3: largest time first
                      [(b"k2", b"e", base + 5)],                             # 4: older than the ones before
                      [(b"k4", b"f", base + 20), (b"k4", b"g", base + 40), (b"k1", b"h", base + 25)]):  # 5-7
            assert s.produce(topic, 0, _stamped(batch)).error_code == 0
        probes = [base - 1, base, base + 1, base + 2, base + 5, base + 10, base + 11, base + 25, base + 30,
                  base + 31, base + 40, base + 41, -3]
        out.append((f"{kind} by time", 2, _by_time(s, topic, probes)))
        out.append((f"{kind} by time v1", 2, _by_time(s, topic, [base + 5, base + 41], version=1)))
        out.append((f"{kind} max timestamp v7", 2, _by_time(s, topic, [-3], version=7)))
        for cut in (3, 7):           # 7: past the record with the largest time
            out.append((f"{kind} delete to {cut}", 21, _delete_records(s, topic, cut)))
            out.append((f"{kind} by time after delete to {cut}", 2, _by_time(s, topic, probes)))
    return out


def _epochs(s, topic, queries, version=4, replica_id=-1):
    """OffsetForLeaderEpoch of [(partition, current_leader_epoch, leader_epoch)]."""
    O = messages.OffsetForLeaderEpochRequest
    return s.request(23, version, O(replica_id=replica_id, topics=[O.OffsetForLeaderTopic(
        topic=topic, partitions=[O.OffsetForLeaderPartition(partition=i, current_leader_epoch=current,
                                                            leader_epoch=epoch)
                                 for i, current, epoch in queries])]))


def offset_for_leader_epoch(s: Session, p: str):
    """Epochs asked of an empty, a written and a trimmed partition: the current one, older, newer,
    negative; the caller's current epoch stale or ahead; unknown partitions and topics; old versions."""
    from tests.differential.scenarios import _delete_records
    out = []
    topic = f"{p}-oe"
    s.topic(topic, 2)
    s.append(topic, [b"a", b"b", b"c"])
    epoch = s.leader_epoch(topic)
    for label, queries in (("current epoch", [(0, -1, epoch), (1, -1, epoch)]),
                           ("newer epoch", [(0, -1, epoch + 1)]),
                           ("older epoch", [(0, -1, epoch - 1)]),
                           ("negative epoch", [(0, -1, -5), (1, -1, -5), (1, -1, epoch - 1)]),
                           ("current matches", [(0, epoch, epoch)]),
                           ("current ahead", [(0, epoch + 1, epoch)]),
                           ("current behind", [(0, epoch - 1, epoch)]),
                           ("unknown partition", [(0, -1, epoch), (5, -1, epoch)])):
        out.append((label, 23, _epochs(s, topic, queries)))
    out.append(("unknown topic", 23, _epochs(s, f"{p}-nosuch", [(0, -1, 0)])))
    for version in (0, 1, 2, 3):
        out.append((f"v{version}", 23, _epochs(s, topic, [(0, epoch if version >= 2 else -1, epoch)],
                                                version=version)))
    out.append(("as a debugging replica", 23, _epochs(s, topic, [(0, -1, epoch)], replica_id=-2)))
    out.append(("as a follower", 23, _epochs(s, topic, [(0, -1, epoch)], replica_id=s.node_id())))
    _delete_records(s, topic, 3)
    out.append(("all records deleted", 23, _epochs(s, topic, [(0, -1, epoch), (0, -1, epoch - 1)])))
    return out


def _edited(batch: bytes, position: int, fmt: str, value, *, crc: bool = True) -> bytes:
    """`batch` with the field at `position` rewritten, its CRC recomputed (unless told not to)."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, position, value)
    if crc:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def produce_malformed(s: Session, p: str):
    """Batches a broker must refuse (or take as they are): a wrong magic, counts and lengths that
    disagree with the records, an unknown codec, a client's control batch, keyless records on a
    compacted topic, timestamps from the future, offsets and timestamp types a client may not choose."""
    out = []
    topic, compact = f"{p}-pm", f"{p}-pmc"
    s.topic(topic, configs={"message.timestamp.after.max.ms": "3600000"})
    s.topic(compact, configs={"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    one = build_batch([SimpleRecord(value=b"one", key=b"k", timestamp=now)])
    two = build_batch([SimpleRecord(value=b"a", key=b"k", timestamp=now),
                       SimpleRecord(value=b"b", key=b"k", timestamp=now + 1)])

    def send(label, records, name=topic):
        out.append((label, 0, s.produce(name, 0, records)))
    send("plain", one)
    send("magic 3", _edited(one, 16, ">b", 3))
    send("magic 1 header on a v2 body", _edited(one, 16, ">b", 1, crc=False))
    send("count says two", _edited(one, 57, ">i", 2))
    send("count says zero", _edited(one, 57, ">i", 0))
    send("count says two of three", _edited(build_batch([SimpleRecord(value=b"x", key=b"k", timestamp=now)] * 3),
                                            57, ">i", 2))
    send("last offset delta too large", _edited(one, 23, ">i", 4))
    send("last offset delta too small", _edited(two, 23, ">i", 0))
    send("batch length too long", _edited(one, 8, ">i", len(one) - 12 + 10, crc=False) + b"\0" * 10)
    send("batch length too short", _edited(one, 8, ">i", len(one) - 12 - 3, crc=False)[:-3])
    send("truncated", one[:-4])
    send("unknown codec", _edited(one, 21, ">h", 7))
    send("gzip with garbage", _edited(one, 21, ">h", 1))
    send("control batch", _edited(one, 21, ">h", 0x20))
    send("transactional without a producer", _edited(one, 21, ">h", 0x10))
    send("log append time chosen by the client", _edited(one, 21, ">h", 0x08))
    send("base offset 100", _edited(one, 0, ">q", 100, crc=False))
    send("leader epoch 7", _edited(one, 12, ">i", 7, crc=False))
    send("two batches", one + two)
    send("offset deltas with a gap", build_batch([SimpleRecord(value=b"x", key=b"k", timestamp=now, offset_delta=0),
                                                  SimpleRecord(value=b"y", key=b"k", timestamp=now, offset_delta=2)]))
    send("from the future", build_batch([SimpleRecord(value=b"f", key=b"k", timestamp=now + 7_200_000)]))
    send("max timestamp wrong", _edited(two, 35, ">q", now + 500))
    send("keyed, compacted", one, compact)
    send("keyless, compacted", build_batch([SimpleRecord(value=b"v", key=None, timestamp=now)]), compact)
    send("one keyless of two, compacted", build_batch([SimpleRecord(value=b"v", key=b"k", timestamp=now),
                                                       SimpleRecord(value=b"w", key=None, timestamp=now)]), compact)
    send("tombstone, compacted", build_batch([SimpleRecord(value=None, key=b"k", timestamp=now)]), compact)
    for name in (topic, compact):
        out.append((f"end offsets {name[len(p):]}", 2, _by_time(s, name, [-2, -1, -3])))
    return out


def _create(s, names, partitions=1, version=7, validate=False):
    C = messages.CreateTopicsRequest
    return s.request(19, version, C(timeout_ms=5000, validate_only=validate, topics=[C.CreatableTopic(
        name=n, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]) for n in names]))


def topic_names(s: Session, p: str):
    """Names at the length limit (249) and past it, '.' and '_' twins (which collide in metric
    names) made one after the other, together, by Metadata auto-creation, and after a deletion."""
    out = []
    longest = f"{p}.".ljust(249, "x")
    twin = longest.replace(".", "_")
    out.append(("249 characters", 19, _create(s, [longest])))
    out.append(("250 characters", 19, _create(s, [longest + "x"])))
    out.append(("its twin", 19, _create(s, [twin])))
    M = messages.MetadataRequest

    def metadata(names, auto, version=12):
        return s.request(3, version, M(topics=[M.MetadataRequestTopic(name=n) for n in names],
                                       allow_auto_topic_creation=auto))
    s.metadata_settles()
    out.append(("metadata 249", 3, metadata([longest], False)))
    out.append(("metadata its twin, auto-created", 3, metadata([twin], True)))
    out.append(("metadata 250, auto-created", 3, metadata([longest + "y"], True)))
    out.append(("twins together", 19, _create(s, [f"{p}.tw", f"{p}_tw"])))
    out.append(("one name twice", 19, _create(s, [f"{p}-same", f"{p}-same"])))
    out.append(("twins validate only", 19, _create(s, [f"{p}.vo", f"{p}_vo"], validate=True)))
    for name in ("..", "...", f"{p}..", f"{p}-é", f"{p} space", "_", "-"):
        out.append((f"name {name[len(p):] if name.startswith(p) else name}", 19, _create(s, [name], validate=True)))
    D = messages.DeleteTopicsRequest
    out.append(("delete the dotted one", 20, s.request(20, 6, D(timeout_ms=5000, topics=[
        D.DeleteTopicState(name=longest, topic_id=ZERO_ID)]))))
    s.metadata_settles()
    out.append(("its twin after the deletion", 19, _create(s, [twin])))
    return out


def create_partitions_edges(s: Session, p: str):
    """A topic named twice, counts below one, an unknown or invalid name beside a good one, the
    same growth validated then made."""
    out = []
    topic, other = f"{p}-cpe", f"{p}-cpe2"
    s.topic(topic)
    s.topic(other)
    C = messages.CreatePartitionsRequest

    def grow(*counts, validate=False, version=3):
        return s.request(37, version, C(timeout_ms=5000, validate_only=validate, topics=[
            C.CreatePartitionsTopic(name=name, count=count, assignments=None) for name, count in counts]))
    out.append(("named twice", 37, grow((topic, 2), (topic, 3))))
    out.append(("named twice beside another", 37, grow((topic, 2), (other, 2), (topic, 2))))
    out.append(("count zero", 37, grow((topic, 0))))
    out.append(("count negative", 37, grow((topic, -1))))
    out.append(("unknown beside a good one", 37, grow((f"{p}-nosuch", 2), (other, 3), validate=True)))
    out.append(("invalid name", 37, grow(("bad name!", 2))))
    out.append(("validate only", 37, grow((topic, 4), validate=True)))
    out.append(("v0", 37, grow((topic, 4), version=0)))
    out.append(("grow", 37, grow((topic, 4))))
    s.metadata_settles()
    out.append(("metadata after", 3, s.metadata([topic, other])))
    return out


def transactions_interleaved(s: Session, p: str):
    """Two transactions interleaved on one partition with plain records between, one aborted and
    one committed, then a third left open: what read_committed fetches (aborted_transactions, the
    last stable offset) from each offset, ListOffsets, DescribeProducers and the coordinators say."""
    from tests.differential.scenarios import _fetch
    from tests.differential.session import _batch
    out = []
    topic = f"{p}-ti"
    s.topic(topic)
    s.append(topic, [b"p0"])
    A = messages.AddPartitionsToTxnRequest
    producers = {}
    for name in ("a", "b", "c"):
        txn = f"{p}-ti{name}"
        pid, epoch = s.init_producer(txn)
        added = s.settled(24, 3, A(v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                                   v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                       A.AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        producers[name] = [txn, pid, epoch, 0]

    def send(name, values):
        txn, pid, epoch, sequence = producers[name]
        answer = s.produce(topic, 0, _batch(values, producer_id=pid, producer_epoch=epoch,
                                            base_sequence=sequence, transactional=True), transactional_id=txn)
        assert answer.error_code == 0, answer
        producers[name][3] += len(values)
    send("a", [b"a1", b"a2"])
    send("b", [b"b1"])
    s.append(topic, [b"p1"])
    send("a", [b"a3"])
    send("b", [b"b2", b"b3"])
    for name, commit in (("a", False), ("b", True)):
        txn, pid, epoch, _ = producers[name]
        s.end_transaction(txn, pid, epoch, commit)
    s.wait_stable(topic)
    s.append(topic, [b"p2"])
    send("c", [b"c1"])                       # left open: the last stable offset stops there
    s.append(topic, [b"p3"])
    end = s.list_offset(topic, 0, -1).offset
    for offset in range(0, end + 1):
        out.append((f"committed from {offset}", 1, _fetch(s, topic, offset, isolation_level=1)))
    out.append(("committed, one batch at a time", 1, _fetch(s, topic, 1, isolation_level=1, max_bytes=80)))
    out.append(("uncommitted from 0", 1, _fetch(s, topic, 0)))
    out.append(("end offsets", 2, _by_time(s, topic, [-1, -2, -3])))
    L = messages.ListOffsetsRequest
    out.append(("stable end", 2, s.request(2, 9, L(replica_id=-1, isolation_level=1, topics=[
        L.ListOffsetsTopic(name=topic, partitions=[L.ListOffsetsPartition(
            partition_index=0, timestamp=t, current_leader_epoch=-1) for t in (-1, -3)])]))))
    D = messages.DescribeProducersRequest
    out.append(("producers", 61, s.request(61, 0, D(topics=[D.TopicRequest(name=topic, partition_indexes=[0])]))))
    T = messages.DescribeTransactionsRequest
    out.append(("transactions", 65, s.request(65, 0, T(transactional_ids=[v[0] for v in producers.values()]))))
    LT = messages.ListTransactionsRequest
    listed = s.request(66, 1, LT(state_filters=["Ongoing", "CompleteAbort"], producer_id_filters=[
        producers["a"][1], producers["c"][1]], duration_filter=-1))
    listed.transaction_states = sorted(listed.transaction_states, key=lambda t: t.transactional_id)
    out.append(("list by state and producer", 66, listed))
    return out


def transactional_produce_errors(s: Session, p: str):
    """A transactional producer's batches out of turn: to a partition not added, at an old epoch, a
    duplicate, without the transactional id, a plain batch under its producer id, after its
    transaction ended; apart (each its own producer and topic, so one answer cannot change the
    next): a first batch whose sequence skips one that failed verification, a batch at a future epoch."""
    from tests.differential.session import _batch
    out = []
    A = messages.AddPartitionsToTxnRequest

    def producer(name, partitions=1):
        topic, txn = f"{p}-{name}", f"{p}-{name}x"
        s.topic(topic, partitions)
        s.init_producer(txn)
        pid, epoch = s.init_producer(txn)          # epoch 1: epoch 0 is a zombie's

        def send(label, values, seq, *, partition=0, producer_epoch=epoch, txn_id=txn, transactional=True):
            out.append((label, 0, s.produce(topic, partition, _batch(
                values, producer_id=pid, producer_epoch=producer_epoch, base_sequence=seq,
                transactional=transactional), transactional_id=txn_id)))

        def add():
            out.append(("add", 24, s.settled(24, 3, A(
                v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[0])]))))
        return topic, txn, pid, epoch, send, add
    topic, txn, pid, epoch, send, add = producer("tpe", 2)
    send("before adding the partition", [b"x"], 0)
    add()
    send("first", [b"a", b"b"], 0)
    send("duplicate", [b"a", b"b"], 0)
    send("zombie epoch", [b"z"], 2, producer_epoch=epoch - 1)
    send("partition not added", [b"n"], 0, partition=1)
    send("without the transactional id", [b"w"], 2, txn_id=None)
    send("plain batch, same producer", [b"p"], 2, transactional=False)
    send("next", [b"c"], 2)
    s.end_transaction(txn, pid, epoch, commit=True)
    s.wait_stable(topic)
    send("after the commit, not added again", [b"d"], 3)
    out.append(("offsets after", 2, _by_time(s, topic, [-1, -2])))
    D = messages.DescribeProducersRequest
    out.append(("producers", 61, s.request(61, 0, D(topics=[D.TopicRequest(name=topic, partition_indexes=[0, 1])]))))
    _, _, _, _, send, add = producer("tpg")
    send("gap: verification fails at sequence 0", [b"x"], 0)
    add()
    send("gap: sequence 3 first", [b"g"], 3)
    _, _, _, epoch, send, add = producer("tpf")
    add()
    send("future: first", [b"a"], 0)
    send("future: epoch", [b"f"], 0, producer_epoch=epoch + 1)
    return out
