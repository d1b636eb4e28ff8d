"""Request shapes real clients and Kafka's tools send, asked of Kafka and of Odradek after building the
same state on each (session.py): both must answer alike, field by field (compare.py's allow-list).

    python -m tests.differential.scenarios KAFKA_HOST:PORT ODRADEK_HOST:PORT [scenario ...]

(consumer_group_protocol, not run by default, needs a Kafka with the KIP-848 protocol switched on.)

Each scenario builds its own topics and groups under a name prefix fresh for the run (the same on both
brokers) and returns [(label, api_key, answer)]; answers are compared label by label.
"""

from __future__ import annotations

import sys
import time
import uuid

from protocol import messages

from tests.differential.compare import ALLOWED, differences, record_differences
from tests.differential.scenarios_admin import (acls_and_scram, broker_list_configs, client_metrics_configs,
                                                client_quotas,
                                                cluster_misc, configs_views,
                                                create_topics_shapes,
                                                describe_topic_partitions_cursor, reassignments_and_elections)
from tests.differential.scenarios_clients import (abort_hanging, consumer_reads, fetch_sessions, find_coordinators,
                                                  group_errors,
                                                  offsets_by_version, old_versions,
                                                  produce_errors, produce_shapes, transaction_errors,
                                                  transaction_lifecycle)
from tests.differential.scenarios_edges import (create_partitions_edges, list_offsets_by_time,
                                                offset_for_leader_epoch, produce_malformed, topic_names,
                                                transactional_produce_errors, transactions_interleaved)
from tests.differential.scenarios_kip848 import consumer_group_protocol
from tests.differential.session import Session

# Fields of these answers that are per-broker clocks: {api_key: field names}.
CLOCKS = {
    61: {"last_timestamp"},                                        # DescribeProducers
    65: {"transaction_start_time_ms"},                             # DescribeTransactions
}
ZERO_ID = uuid.UUID(int=0)
# Both brokers hold the same data here, so the log start offsets they report must agree too.
SCENARIO_ALLOWED = {name: why for name, why in ALLOWED.items() if name != "log_start_offset"}


def _list_offsets(s, topic, timestamp, *, partition=0, isolation_level=0, version=9, epoch=-1):
    L = messages.ListOffsetsRequest
    return s.request(2, version, L(replica_id=-1, isolation_level=isolation_level, topics=[
        L.ListOffsetsTopic(name=topic, partitions=[L.ListOffsetsPartition(
            partition_index=partition, timestamp=timestamp, current_leader_epoch=epoch)])]))


def _fetch(s, topic, offset, *, isolation_level=0, max_bytes=1 << 20, epoch=-1, version=16,
           topic_id=None, partition=0):
    F = messages.FetchRequest
    return s.request(1, version, F(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=isolation_level,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
            F.FetchTopic(topic=topic, topic_id=topic_id or ZERO_ID, partitions=[F.FetchPartition(
                partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes,
                current_leader_epoch=epoch, last_fetched_epoch=-1, log_start_offset=-1)])]))


def _delete_records(s, topic, offset, partition=0):
    D = messages.DeleteRecordsRequest
    return s.request(21, 2, D(timeout_ms=5000, topics=[D.DeleteRecordsTopic(
        name=topic, partitions=[D.DeleteRecordsPartition(partition_index=partition, offset=offset)])]))


SPECIAL_TIMESTAMPS = (-1, -2, -3, -4, -5)


def list_offsets_special(s: Session, p: str):
    """Every special timestamp on an empty, a plain, a compacted, a trimmed and a transactional
    partition, read_uncommitted and read_committed."""
    out = []
    s.topic(f"{p}-empty")
    s.topic(f"{p}-plain")
    s.append(f"{p}-plain", [b"a", b"b", b"c"])
    s.append(f"{p}-plain", [b"d", b"e"])
    s.topic(f"{p}-compact", configs={"cleanup.policy": "compact"})
    s.append(f"{p}-compact", [(b"k1", b"1"), (b"k2", b"2"), (b"k1", b"3")])
    s.topic(f"{p}-trimmed")
    s.append(f"{p}-trimmed", [b"a", b"b", b"c", b"d"])
    _delete_records(s, f"{p}-trimmed", 2)
    s.topic(f"{p}-txn")
    s.append(f"{p}-txn", [b"plain"])
    s.transaction(f"{p}-t1", f"{p}-txn", [b"x", b"y"], commit=False)
    s.transaction(f"{p}-t2", f"{p}-txn", [b"z"], commit=True)
    s.wait_stable(f"{p}-txn")
    s.transaction(f"{p}-t3", f"{p}-txn", [b"open"], commit=None)
    for kind in ("empty", "plain", "compact", "trimmed", "txn"):
        for ts in SPECIAL_TIMESTAMPS:
            for isolation in (0, 1):
                out.append((f"{kind} ts={ts} iso={isolation}", 2,
                            _list_offsets(s, f"{p}-{kind}", ts, isolation_level=isolation)))
    for version in (0, 1, 4, 6, 7, 8):
        for ts in SPECIAL_TIMESTAMPS:
            out.append((f"plain ts={ts} v{version}", 2, _list_offsets(s, f"{p}-plain", ts, version=version)))
    out.append(("plain by time 0", 2, _list_offsets(s, f"{p}-plain", 0)))
    out.append(("plain by time future", 2, _list_offsets(s, f"{p}-plain", int(time.time() * 1000) + 10**9)))
    out.append(("plain ts=-6", 2, _list_offsets(s, f"{p}-plain", -6)))
    out.append(("plain ts=-6 v0", 2, _list_offsets(s, f"{p}-plain", -6, version=0)))
    out.append(("plain ts=-100 v5", 2, _list_offsets(s, f"{p}-plain", -100, version=5)))
    out.append(("plain unknown partition", 2, _list_offsets(s, f"{p}-plain", -1, partition=3)))
    epoch = s.leader_epoch(f"{p}-plain")
    out.append(("plain newer epoch", 2, _list_offsets(s, f"{p}-plain", -1, epoch=epoch + 5)))
    return out


def fetch_edges(s: Session, p: str):
    """read_committed across aborted transactions and segment rolls; a partition limit smaller than
    the first batch; offsets past the end and before the start; a wrong leader epoch."""
    out = []
    topic = f"{p}-f"
    s.topic(topic, configs={"segment.bytes": "1048576"})
    s.append(topic, [b"one", b"two"])
    s.transaction(f"{p}-fa", topic, [b"aborted1", b"aborted2"], commit=False)
    s.transaction(f"{p}-fc", topic, [b"kept"], commit=True)
    s.append(topic, [b"three" * 50])
    s.transaction(f"{p}-fa", topic, [b"aborted3"], commit=False)
    s.wait_stable(topic)
    s.transaction(f"{p}-fo", topic, [b"open"], commit=None)
    for iso in (0, 1):
        for offset in (0, 2, 3, 5):
            out.append((f"iso={iso} from {offset}", 1, _fetch(s, topic, offset, isolation_level=iso)))
    out.append(("tiny max_bytes", 1, _fetch(s, topic, 0, max_bytes=5)))
    out.append(("tiny max_bytes committed", 1, _fetch(s, topic, 2, max_bytes=5, isolation_level=1)))
    hw = s.list_offset(topic, 0, -1).offset
    out.append(("at the end", 1, _fetch(s, topic, hw)))
    out.append(("past the end", 1, _fetch(s, topic, hw + 5)))
    out.append(("negative offset", 1, _fetch(s, topic, -1)))
    epoch = s.leader_epoch(topic)
    out.append(("newer leader epoch", 1, _fetch(s, topic, 0, epoch=epoch + 5)))
    out.append(("unknown partition", 1, _fetch(s, topic, 0, partition=7)))
    out.append(("unknown topic id v13", 1, _fetch(s, "", 0, version=13, topic_id=uuid.uuid4())))
    two = f"{p}-f2"
    s.topic(two, 2)
    s.append(two, [b"x" * 300], partition=0)
    s.append(two, [b"y" * 300], partition=1)
    F = messages.FetchRequest
    for limit in (10, 400, 1 << 20):
        out.append((f"two partitions, response limit {limit}", 1, s.request(1, 16, F(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=limit, isolation_level=0, session_id=0,
            session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[F.FetchTopic(
                topic=two, topic_id=s.metadata([two]).topics[0].topic_id, partitions=[F.FetchPartition(
                    partition=i, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                    last_fetched_epoch=-1, log_start_offset=-1) for i in (0, 1)])]))))
    trimmed = f"{p}-ft"
    s.topic(trimmed)
    s.append(trimmed, [b"a", b"b", b"c", b"d"])
    _delete_records(s, trimmed, 3)
    out.append(("before the start", 1, _fetch(s, trimmed, 1)))
    out.append(("at the start", 1, _fetch(s, trimmed, 3)))
    return out


def fetch_across_segments(s: Session, p: str):
    """read_committed over aborted transactions whose batches lie in several 1 MiB segments."""
    out = []
    topic = f"{p}-seg"
    s.topic(topic, configs={"segment.bytes": "1048576"})
    big = b"x" * 400_000
    s.append(topic, [big])
    s.transaction(f"{p}-sa", topic, [big, big], commit=False)       # crosses into the second segment
    s.append(topic, [big])
    s.transaction(f"{p}-sc", topic, [big], commit=True)
    s.transaction(f"{p}-sa", topic, [big, big], commit=False)       # into the third
    s.append(topic, [b"last"])
    s.wait_stable(topic)
    end = s.list_offset(topic, 0, -1).offset
    for iso in (0, 1):
        for offset in range(0, end + 1):
            out.append((f"iso={iso} from {offset}", 1, _fetch(s, topic, offset, isolation_level=iso,
                                                              max_bytes=900_000)))
    out.append(("committed, small limit", 1, _fetch(s, topic, 1, isolation_level=1, max_bytes=1000)))
    return out


def delete_records_edges(s: Session, p: str):
    out = []
    topic = f"{p}-dr"
    s.topic(topic, 2)
    s.append(topic, [b"a", b"b", b"c", b"d", b"e"])
    for label, offset in (("zero", 0), ("middle", 2), ("backwards", 1), ("high watermark", 5),
                          ("past the end", 9), ("minus one", -1), ("minus two", -2)):
        out.append((label, 21, _delete_records(s, topic, offset)))
    out.append(("empty partition -1", 21, _delete_records(s, topic, -1, partition=1)))
    out.append(("unknown partition", 21, _delete_records(s, topic, 0, partition=5)))
    out.append(("unknown topic", 21, _delete_records(s, f"{p}-nosuch", 0)))
    txn = f"{p}-drt"
    s.topic(txn)
    s.transaction(f"{p}-drt", txn, [b"x", b"y"], commit=None)
    out.append(("into an open transaction", 21, _delete_records(s, txn, 1)))
    out.append(("after it", 21, s.request(2, 9, _lo_body(txn))))
    return out


def _lo_body(topic):
    L = messages.ListOffsetsRequest
    return L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-2,
                                                       current_leader_epoch=-1)])])


def offset_delete_active(s: Session, p: str):
    out = []
    topic, other = f"{p}-od", f"{p}-od2"
    s.topic(topic)
    s.topic(other)
    group = f"{p}-g"
    member, generation = s.join(group, [topic])
    s.commit(group, {(topic, 0): 1, (other, 0): 2}, member, generation)
    O = messages.OffsetDeleteRequest

    def delete(group_id, names):
        return s.request(47, 0, O(group_id=group_id, topics=[
            O.OffsetDeleteRequestTopic(name=n, partitions=[O.OffsetDeleteRequestPartition(partition_index=0)])
            for n in names]))
    out.append(("subscribed topic", 47, delete(group, [topic])))
    out.append(("other topic", 47, delete(group, [other])))
    out.append(("unknown topic", 47, delete(group, [f"{p}-nosuch"])))
    out.append(("unknown group", 47, delete(f"{p}-nogroup", [topic])))
    out.append(("offsets after", 9, _offset_fetch(s, [(group, None)])))
    return out


def _offset_fetch(s, groups, version=9, require_stable=False):
    F = messages.OffsetFetchRequest
    return s.settled(9, version, F(require_stable=require_stable, groups=[
        F.OffsetFetchRequestGroup(group_id=g, member_id=None, member_epoch=-1, topics=None if topics is None else [
            F.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics])
        for g, topics in groups]))


def offset_fetch_groups(s: Session, p: str):
    out = []
    topic = f"{p}-of"
    s.topic(topic, 2)
    s.commit(f"{p}-ga", {(topic, 0): 3, (topic, 1): 4})
    s.commit(f"{p}-gb", {(topic, 1): 7})
    both = [(f"{p}-ga", None), (f"{p}-gb", [(topic, [0, 1])]), (f"{p}-unknown", None),
            (f"{p}-unknown2", [(topic, [0])]), (f"{p}-ga", [(f"{p}-nosuch", [0])])]
    for version in (8, 9):
        out.append((f"several groups v{version}", 9, _offset_fetch(s, both, version)))
    out.append(("require stable", 9, _offset_fetch(s, both, 9, require_stable=True)))
    txn = f"{p}-oft"
    pid, epoch = s.transaction(txn, topic, [b"x"], commit=None)
    out.append(("require stable, none pending", 9, _offset_fetch(s, [(f"{p}-ga", None)], 9, True)))
    G, L, D = messages.DescribeGroupsRequest, messages.ListGroupsRequest, messages.DeleteGroupsRequest
    for version in (0, 3, 5):
        out.append((f"describe offsets-only groups v{version}", 15, s.request(15, version, G(
            groups=[f"{p}-ga", f"{p}-unknown"], include_authorized_operations=False))))
    listed = s.request(16, 5, L(states_filter=[], types_filter=[]))
    listed.groups = [g for g in listed.groups if g.group_id in (f"{p}-ga", f"{p}-gb")]
    out.append(("list offsets-only groups", 16, listed))
    out.append(("delete an offsets-only group", 42, s.request(42, 2, D(groups_names=[f"{p}-gb"]))))
    out.append(("its offsets after", 9, _offset_fetch(s, [(f"{p}-gb", None)])))
    return out


def transactions_admin(s: Session, p: str):
    out = []
    topic = f"{p}-ta"
    s.topic(topic, 2)
    s.transaction(f"{p}-done", topic, [b"x"], commit=True)
    s.transaction(f"{p}-gone", topic, [b"y"], commit=False)
    pid, _ = s.transaction(f"{p}-open", topic, [b"z", b"w"], commit=None, partition=1)
    s.append(topic, [b"plain"], partition=0, producer_id=-1)
    D = messages.DescribeProducersRequest
    out.append(("describe producers", 61, s.request(61, 0, D(topics=[
        D.TopicRequest(name=topic, partition_indexes=[0, 1, 9]),
        D.TopicRequest(name=f"{p}-nosuch", partition_indexes=[0])]))))
    T = messages.DescribeTransactionsRequest
    out.append(("describe transactions", 65, s.request(65, 0, T(transactional_ids=[
        f"{p}-done", f"{p}-gone", f"{p}-open", f"{p}-unknown"]))))
    L = messages.ListTransactionsRequest
    mine = f"{p}-"

    def listed(state_filters, pids, duration=-1, version=1):
        answer = s.request(66, version, L(state_filters=state_filters, producer_id_filters=pids,
                                          duration_filter=duration))
        answer.transaction_states = [t for t in answer.transaction_states
                                     if t.transactional_id.startswith(mine)]
        return answer
    out.append(("list all", 66, listed([], [])))
    out.append(("list ongoing", 66, listed(["Ongoing"], [])))
    out.append(("list committed and aborted", 66, listed(["CompleteCommit", "CompleteAbort"], [])))
    out.append(("list unknown state", 66, listed(["Nonsense"], [])))
    out.append(("list by producer id", 66, listed([], [pid])))
    out.append(("list by unknown producer id", 66, listed([], [123456789])))
    out.append(("list duration 0", 66, listed([], [], 0)))
    out.append(("list duration long", 66, listed([], [], 3_600_000)))
    out.append(("list v0", 66, listed(["Ongoing"], [], version=0)))
    out.append(("list lower-case state", 66, listed(["ongoing"], [])))
    out.append(("list negative producer id", 66, listed([], [-1])))
    out.append(("list negative duration", 66, listed([], [], -5)))
    s.init_producer(f"{p}-fresh")
    out.append(("describe a fresh one", 65, s.request(65, 0, T(transactional_ids=[f"{p}-fresh"]))))
    out.append(("list empty", 66, listed(["Empty"], [])))
    return out


def incremental_alter_configs(s: Session, p: str):
    out = []
    topic = f"{p}-ic"
    s.topic(topic)
    I = messages.IncrementalAlterConfigsRequest

    def alter(name, op, value, validate=False, resource=(2, topic)):
        return s.request(44, 1, I(validate_only=validate, resources=[I.AlterConfigsResource(
            resource_type=resource[0], resource_name=resource[1], configs=[
                I.AlterableConfig(name=name, config_operation=op, value=value)])]))
    C = messages.DescribeConfigsRequest

    def describe(names):
        s.metadata_settles()
        return s.request(32, 4, C(include_synonyms=False, include_documentation=False, resources=[
            C.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=names)]))
    steps = [("append compact", "cleanup.policy", 2, "compact"),
             ("append again", "cleanup.policy", 2, "compact"),
             ("subtract delete", "cleanup.policy", 3, "delete"),
             ("subtract absent", "cleanup.policy", 3, "delete"),
             ("subtract last", "cleanup.policy", 3, "compact"),
             ("append invalid", "cleanup.policy", 2, "nonsense"),
             ("append to a non-list", "retention.ms", 2, "5"),
             ("subtract from a non-list", "retention.ms", 3, "5"),
             ("invalid number", "retention.ms", 0, "abc"),
             ("below the minimum", "min.insync.replicas", 0, "0"),
             ("unknown name", "no.such.config", 0, "1"),
             ("delete unknown name", "no.such.config", 1, None),
             ("set null", "retention.ms", 0, None),
             ("unknown operation", "retention.ms", 7, "5"),
             ("append list of two", "leader.replication.throttled.replicas", 2, "0:1,1:1"),
             ("subtract one of two", "leader.replication.throttled.replicas", 3, "1:1"),
             ("append star", "follower.replication.throttled.replicas", 2, "*")]
    for label, name, op, value in steps:
        out.append((label, 44, alter(name, op, value)))
        out.append((f"{label}: then", 32, describe([name])))
    out.append(("unknown topic", 44, alter("retention.ms", 0, "5", resource=(2, f"{p}-nosuch"))))
    out.append(("append to an unknown name", 44, alter("no.such.config", 2, "x")))
    broker = (4, str(s.node_id()))   # only the answers: Kafka's brokers apply their configs later
    out.append(("broker: append to a non-list", 44, alter("log.retention.ms", 2, "5", resource=broker)))
    out.append(("broker: append to listeners", 44, alter("listeners", 2, "X://:1", resource=broker)))
    out.append(("client metrics: append", 44, alter("metrics", 2, "x", resource=(16, f"{p}-cm"))))
    out.append(("validate only", 44, alter("retention.ms", 0, "5", validate=True)))
    return out


def create_partitions_assigned(s: Session, p: str):
    out = []
    topic = f"{p}-cp"
    s.topic(topic)
    node = s.node_id()
    C = messages.CreatePartitionsRequest

    def grow(count, assignments, validate=False, name=topic):
        return s.request(37, 3, C(timeout_ms=5000, validate_only=validate, topics=[C.CreatePartitionsTopic(
            name=name, count=count, assignments=None if assignments is None else [
                C.CreatePartitionsAssignment(broker_ids=ids) for ids in assignments])]))
    out.append(("too few assignments", 37, grow(3, [[node]])))
    out.append(("too many assignments", 37, grow(2, [[node], [node]])))
    out.append(("unknown broker", 37, grow(2, [[node + 1000]])))
    out.append(("duplicate broker", 37, grow(2, [[node, node]])))
    out.append(("empty assignment", 37, grow(2, [[]])))
    out.append(("replication factor differs", 37, grow(2, [[node, node + 1000]])))
    out.append(("validate only", 37, grow(3, [[node], [node]], validate=True)))
    out.append(("assigned", 37, grow(3, [[node], [node]])))
    out.append(("same count", 37, grow(3, None)))
    out.append(("fewer", 37, grow(2, None)))
    out.append(("unknown topic", 37, grow(2, None, name=f"{p}-nosuch")))
    out.append(("metadata after", 3, s.metadata([topic])))
    return out


def topic_ids(s: Session, p: str):
    """Metadata and DeleteTopics by topic id, known and unknown."""
    out = []
    topic = f"{p}-id"
    topic_id = s.topic(topic)
    M = messages.MetadataRequest
    unknown = uuid.uuid4()
    for version in (10, 12):
        for label, topics in (("known id", [M.MetadataRequestTopic(topic_id=topic_id, name=None)]),
                              ("unknown id", [M.MetadataRequestTopic(topic_id=unknown, name=None)]),
                              ("id and name", [M.MetadataRequestTopic(topic_id=topic_id, name=topic)]),
                              ("zero id, no name", [M.MetadataRequestTopic(topic_id=ZERO_ID, name=None)])):
            out.append((f"metadata {label} v{version}", 3, s.request(3, version, M(
                topics=topics, allow_auto_topic_creation=False))))
    D = messages.DeleteTopicsRequest

    def delete(states, version=6):
        return s.request(20, version, D(timeout_ms=5000, topics=states))
    out.append(("delete unknown id", 20, delete([D.DeleteTopicState(name=None, topic_id=unknown)])))
    out.append(("delete id and name", 20, delete([D.DeleteTopicState(name=topic, topic_id=topic_id)])))
    out.append(("delete zero id no name", 20, delete([D.DeleteTopicState(name=None, topic_id=ZERO_ID)])))
    dup = f"{p}-dup"
    dup_id = s.topic(dup)
    out.append(("delete a name twice", 20, delete([D.DeleteTopicState(name=dup, topic_id=ZERO_ID)] * 2)))
    out.append(("delete an id twice", 20, delete([D.DeleteTopicState(name=None, topic_id=dup_id)] * 2)))
    out.append(("delete a name twice v5", 20, s.request(20, 5, D(timeout_ms=5000, topic_names=[dup, dup]))))
    out.append(("delete known id", 20, delete([D.DeleteTopicState(name=None, topic_id=topic_id)])))
    out.append(("delete it again", 20, delete([D.DeleteTopicState(name=None, topic_id=topic_id)])))
    out.append(("metadata after", 3, s.request(3, 12, M(
        topics=[M.MetadataRequestTopic(topic_id=topic_id, name=None)], allow_auto_topic_creation=False))))
    return out


SCENARIOS = {f.__name__: f for f in (list_offsets_special, fetch_edges, fetch_across_segments,
                                     delete_records_edges,
                                     offset_delete_active, offset_fetch_groups, transactions_admin,
                                     incremental_alter_configs, create_partitions_assigned, topic_ids,
                                     produce_errors, transaction_errors, group_errors,
                                     create_topics_shapes, describe_topic_partitions_cursor, client_quotas,
                                     reassignments_and_elections, acls_and_scram, consumer_reads,
                                     fetch_sessions, configs_views, cluster_misc, produce_shapes,
                                     old_versions, transaction_lifecycle, abort_hanging,
                                     client_metrics_configs, offsets_by_version, broker_list_configs,
                                     find_coordinators, list_offsets_by_time, offset_for_leader_epoch,
                                     produce_malformed, topic_names, create_partitions_edges,
                                     transactions_interleaved, transactional_produce_errors)}


# Only against a Kafka 3.9 started with group.coordinator.rebalance.protocols=classic,consumer, by name.
CONSUMER_PROTOCOL_SCENARIOS = {"consumer_group_protocol": consumer_group_protocol}


def run(address, scenario, prefix: str) -> list:
    with Session(*address, timeout=30) as session:
        return {**SCENARIOS, **CONSUMER_PROTOCOL_SCENARIOS}[scenario](session, prefix)


def compare(kafka: list, odradek: list, scenario: str) -> list[str]:
    found = []
    for (label, key, a), (_, _, b) in zip(kafka, odradek):
        name = f"{scenario} [{label}]"
        for field in CLOCKS.get(key, ()):
            _blank(a, field), _blank(b, field)
        found += [f"{name} {d}" for d in differences(a, b, allowed=SCENARIO_ALLOWED)]
        if key == 1:
            for t, (ta, tb) in enumerate(zip(a.responses, b.responses)):
                for i, (pa, pb) in enumerate(zip(ta.partitions, tb.partitions)):
                    found += [f"{name} {d}" for d in
                              record_differences(pa.records, pb.records, f".responses[{t}].partitions[{i}].records")]
    return found


def _blank(body, field: str) -> None:
    """Clear `field` wherever it occurs in body (a per-broker clock)."""
    if isinstance(body, list):
        for item in body:
            _blank(item, field)
    elif hasattr(body, "__slots__") and not isinstance(body, (str, bytes)):
        for name in body.__slots__:
            if name == field:
                setattr(body, name, None)
            else:
                _blank(getattr(body, name, None), field)


def _address(text: str):
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv) -> int:
    kafka, odradek, *names = argv
    prefix = f"dx{uuid.uuid4().hex[:8]}"
    found = []
    for scenario in names or SCENARIOS:
        found += compare(run(_address(kafka), scenario, prefix), run(_address(odradek), scenario, prefix),
                         scenario)
    for line in found:
        print(line)
    print(f"{len(found)} differences")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
