"""Scenarios of what Kafka's admin tools send (kafka-topics, kafka-configs, kafka-reassign-partitions,
kafka-leader-election, kafka-acls), registered in scenarios.SCENARIOS."""

from __future__ import annotations

import uuid

from protocol import messages

from tests.differential.session import Session


def create_topics_shapes(s: Session, p: str):
    """CreateTopics with assignments, bad names, bad configs, defaults and validate_only."""
    out = []
    node = s.node_id()
    C = messages.CreateTopicsRequest

    def create(name, partitions=1, factor=1, assignments=None, configs=None, validate=False, version=7):
        return s.request(19, version, C(timeout_ms=5000, validate_only=validate, topics=[C.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=factor,
            assignments=[C.CreatableReplicaAssignment(partition_index=i, broker_ids=ids)
                         for i, ids in enumerate(assignments or [])],
            configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])]))
    out.append(("assigned", 19, create(f"{p}-a", -1, -1, [[node], [node]])))
    out.append(("assigned with counts", 19, create(f"{p}-b", 2, 1, [[node], [node]])))
    out.append(("assigned unknown broker", 19, create(f"{p}-c", -1, -1, [[node + 1000]])))
    out.append(("assigned duplicate broker", 19, create(f"{p}-d", -1, -1, [[node, node]])))
    out.append(("assigned partition gap", 19, s.request(19, 7, C(timeout_ms=5000, validate_only=False, topics=[
        C.CreatableTopic(name=f"{p}-e", num_partitions=-1, replication_factor=-1, configs=[], assignments=[
            C.CreatableReplicaAssignment(partition_index=1, broker_ids=[node])])]))))
    out.append(("assigned empty", 19, create(f"{p}-f", -1, -1, [[]])))
    out.append(("name with a dot and underscore", 19, create(f"{p}.g_h")))
    out.append(("colliding name", 19, create(f"{p}_g.h")))
    out.append(("name too long", 19, create("x" * 250)))
    out.append(("name dot", 19, create(".")))
    out.append(("name empty", 19, create("")))
    out.append(("bad config", 19, create(f"{p}-i", configs={"cleanup.policy": "nonsense"})))
    out.append(("null config value", 19, create(f"{p}-j", configs={"retention.ms": None})))
    out.append(("min.insync above the factor", 19, create(f"{p}-k", configs={"min.insync.replicas": "2"})))
    out.append(("factor zero", 19, create(f"{p}-l", 1, 0)))
    out.append(("partitions zero", 19, create(f"{p}-m", 0, 1)))
    out.append(("validate only", 19, create(f"{p}-n", 3, 1, validate=True)))
    out.append(("validate only v4", 19, create(f"{p}-n", 3, 1, validate=True, version=4)))
    out.append(("internal name", 19, create("__consumer_offsets")))
    return out


def describe_topic_partitions_cursor(s: Session, p: str):
    """DescribeTopicPartitions (kafka-topics --describe in 3.9) with limits and cursors."""
    out = []
    s.topic(f"{p}-x", 3)
    s.topic(f"{p}-y", 2)
    D = messages.DescribeTopicPartitionsRequest

    def describe(names, limit, cursor=None):
        return s.request(75, 0, D(topics=[D.TopicRequest(name=n) for n in names], response_partition_limit=limit,
                                  cursor=None if cursor is None else D.Cursor(topic_name=cursor[0],
                                                                              partition_index=cursor[1])))
    names = [f"{p}-x", f"{p}-y", f"{p}-nosuch"]
    out.append(("all", 75, describe(names, 2000)))
    out.append(("limit 2", 75, describe(names, 2)))
    out.append(("limit 3", 75, describe(names, 3)))
    out.append(("cursor in x", 75, describe(names, 2, (f"{p}-x", 2))))
    out.append(("cursor at y", 75, describe(names, 2, (f"{p}-y", 0))))
    out.append(("cursor past x", 75, describe(names, 2, (f"{p}-x", 7))))
    out.append(("cursor unknown topic", 75, describe(names, 2, (f"{p}-nosuch", 0))))
    out.append(("cursor negative partition", 75, describe(names, 2, (f"{p}-x", -1))))
    out.append(("limit zero", 75, describe(names, 0)))
    out.append(("duplicate names", 75, describe([f"{p}-x", f"{p}-x"], 10)))
    return out


def client_quotas(s: Session, p: str):
    """kafka-configs --entity-type users/clients/ips: AlterClientQuotas and DescribeClientQuotas."""
    out = []
    A, D = messages.AlterClientQuotasRequest, messages.DescribeClientQuotasRequest
    user, client = f"{p}-user", f"{p}-client"

    def alter(entity, ops, validate=False):
        return s.request(49, 1, A(validate_only=validate, entries=[A.EntryData(
            entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            ops=[A.OpData(key=k, value=v, remove=r) for k, v, r in ops])]))

    def describe(components, strict=False):
        s.metadata_settles()
        answer = s.request(48, 1, D(strict=strict, components=[
            D.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components]))
        if answer.entries is not None:   # only this run's entities (each broker has other tests')
            answer.entries = [e for e in answer.entries
                              if all((x.entity_name or "").startswith(p) or x.entity_name is None
                                     for x in e.entity)]
        return answer
    out.append(("set user", 49, alter([("user", user)], [("producer_byte_rate", 1024.0, False)])))
    out.append(("set user and client", 49, alter([("user", user), ("client-id", client)],
                                                 [("consumer_byte_rate", 2048.0, False),
                                                  ("request_percentage", 50.0, False)])))
    out.append(("set client", 49, alter([("client-id", client)], [("producer_byte_rate", 10.0, False)])))
    out.append(("unknown key", 49, alter([("user", user)], [("no_such_rate", 1.0, False)])))
    out.append(("negative", 49, alter([("user", user)], [("producer_byte_rate", -5.0, False)])))
    out.append(("fraction on a byte rate", 49, alter([("user", user)], [("producer_byte_rate", 1.5, False)])))
    out.append(("ip quota", 49, alter([("ip", "10.1.2.3")], [("connection_creation_rate", 5.0, False)])))
    out.append(("bad ip", 49, alter([("ip", "not-an-ip")], [("connection_creation_rate", 5.0, False)])))
    out.append(("ip with user", 49, alter([("ip", "10.1.2.3"), ("user", user)],
                                          [("connection_creation_rate", 5.0, False)])))
    out.append(("unknown entity type", 49, alter([("group", "g")], [("producer_byte_rate", 5.0, False)])))
    out.append(("entity twice", 49, alter([("user", user), ("user", user)], [("producer_byte_rate", 5.0, False)])))
    out.append(("validate only", 49, alter([("user", f"{p}-other")], [("producer_byte_rate", 5.0, False)], True)))
    out.append(("remove absent", 49, alter([("user", f"{p}-never")], [("producer_byte_rate", 0.0, True)])))
    out.append(("describe the user exactly", 48, describe([("user", 0, user)])))
    out.append(("describe the user strictly", 48, describe([("user", 0, user)], strict=True)))
    out.append(("describe the user and its client", 48, describe([("user", 0, user), ("client-id", 0, client)])))
    out.append(("describe any user", 48, describe([("user", 2, None)])))
    out.append(("describe any client strictly", 48, describe([("client-id", 2, None)], strict=True)))
    out.append(("describe default user", 48, describe([("user", 1, None)])))
    out.append(("describe exact with null name", 48, describe([("user", 0, None)])))
    out.append(("describe twice the type", 48, describe([("user", 2, None), ("user", 0, user)])))
    out.append(("describe unknown type", 48, describe([("group", 2, None)])))
    out.append(("describe bad match type", 48, describe([("user", 7, None)])))
    out.append(("describe ip", 48, describe([("ip", 0, "10.1.2.3")])))
    out.append(("remove", 49, alter([("user", user)], [("producer_byte_rate", 0.0, True)])))
    out.append(("describe after remove", 48, describe([("user", 0, user)], strict=True)))
    return out


def reassignments_and_elections(s: Session, p: str):
    """kafka-reassign-partitions and kafka-leader-election on a single node."""
    out = []
    topic = f"{p}-r"
    s.topic(topic, 2)
    node = s.node_id()
    A, L = messages.AlterPartitionReassignmentsRequest, messages.ListPartitionReassignmentsRequest

    def reassign(parts, name=topic):
        return s.request(45, 0, A(timeout_ms=5000, topics=[A.ReassignableTopic(name=name, partitions=[
            A.ReassignablePartition(partition_index=i, replicas=r) for i, r in parts])]))
    out.append(("to the same replicas", 45, reassign([(0, [node])])))
    out.append(("cancel none", 45, reassign([(1, None)])))
    out.append(("unknown broker", 45, reassign([(0, [node + 1000])])))
    out.append(("duplicate replica", 45, reassign([(0, [node, node])])))
    out.append(("empty replicas", 45, reassign([(0, [])])))
    out.append(("unknown partition", 45, reassign([(7, [node])])))
    out.append(("unknown topic", 45, reassign([(0, [node])], name=f"{p}-nosuch")))
    out.append(("list all", 46, _only(s.request(46, 0, L(timeout_ms=5000, topics=None)), p)))
    out.append(("list some", 46, s.request(46, 0, L(timeout_ms=5000, topics=[
        L.ListPartitionReassignmentsTopics(name=topic, partition_indexes=[0, 1, 9]),
        L.ListPartitionReassignmentsTopics(name=f"{p}-nosuch", partition_indexes=[0])]))))
    E = messages.ElectLeadersRequest

    def elect(kind, parts, version=2):
        return s.request(43, version, E(election_type=kind, timeout_ms=5000, topic_partitions=[
            E.TopicPartitions(topic=t, partitions=ps) for t, ps in parts]))
    for kind in (0, 1):
        out.append((f"elect {kind}", 43, elect(kind, [(topic, [0, 1, 9]), (f"{p}-nosuch", [0])])))
    out.append(("elect v0", 43, elect(0, [(topic, [0])], version=0)))
    out.append(("elect bad type", 43, elect(5, [(topic, [0])])))
    O = messages.OffsetForLeaderEpochRequest
    s.append(topic, [b"a", b"b"])
    epoch = s.leader_epoch(topic)
    for label, current, asked in (("current epoch", epoch, epoch), ("no current", -1, epoch),
                                  ("future current", epoch + 5, epoch), ("older asked", epoch, epoch - 1),
                                  ("newer asked", -1, epoch + 3)):
        out.append((f"offset for epoch: {label}", 23, s.request(23, 4, O(replica_id=-1, topics=[
            O.OffsetForLeaderTopic(topic=topic, partitions=[O.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current, leader_epoch=asked)])]))))
    return out


def _only(answer, prefix):
    answer.topics = [t for t in answer.topics if t.name.startswith(prefix)]
    return answer


def acls_and_scram(s: Session, p: str):
    """kafka-acls and kafka-configs --entity-type users without an authorizer; SCRAM credentials."""
    out = []
    C, D = messages.CreateAclsRequest, messages.DescribeAclsRequest
    out.append(("create acl", 30, s.request(30, 3, C(creations=[C.AclCreation(
        resource_type=2, resource_name=f"{p}-t", resource_pattern_type=3, principal="User:alice", host="*",
        operation=3, permission_type=3)]))))
    out.append(("describe acls", 29, s.request(29, 3, D(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1))))
    U, S = messages.AlterUserScramCredentialsRequest, messages.DescribeUserScramCredentialsRequest
    user = f"{p}-u"
    salt = uuid.uuid4().bytes
    out.append(("upsert", 51, s.request(51, 0, U(deletions=[], upsertions=[U.ScramCredentialUpsertion(
        name=user, mechanism=1, iterations=4096, salt=salt, salted_password=b"x" * 32)]))))
    out.append(("upsert too few iterations", 51, s.request(51, 0, U(deletions=[], upsertions=[
        U.ScramCredentialUpsertion(name=f"{user}2", mechanism=1, iterations=10, salt=salt,
                                   salted_password=b"x" * 32)]))))
    out.append(("upsert unknown mechanism", 51, s.request(51, 0, U(deletions=[], upsertions=[
        U.ScramCredentialUpsertion(name=f"{user}3", mechanism=9, iterations=4096, salt=salt,
                                   salted_password=b"x" * 32)]))))
    out.append(("upsert and delete one user", 51, s.request(51, 0, U(
        deletions=[U.ScramCredentialDeletion(name=user, mechanism=1)],
        upsertions=[U.ScramCredentialUpsertion(name=user, mechanism=2, iterations=4096, salt=salt,
                                               salted_password=b"x" * 64)]))))
    out.append(("delete absent", 51, s.request(51, 0, U(upsertions=[], deletions=[
        U.ScramCredentialDeletion(name=f"{p}-nobody", mechanism=1)]))))
    out.append(("empty name", 51, s.request(51, 0, U(upsertions=[], deletions=[
        U.ScramCredentialDeletion(name="", mechanism=1)]))))
    out.append(("describe", 50, s.request(50, 0, S(users=[S.UserName(name=user), S.UserName(name=f"{p}-nobody"),
                                                         S.UserName(name=user)]))))
    return out


def configs_views(s: Session, p: str):
    """kafka-configs --describe (synonyms, documentation, named keys) and legacy AlterConfigs."""
    out = []
    topic = f"{p}-cv"
    s.topic(topic, configs={"retention.ms": "12345", "cleanup.policy": "compact,delete"})
    node = str(s.node_id())
    C, A = messages.DescribeConfigsRequest, messages.AlterConfigsRequest

    def describe(resources, synonyms=True, docs=False, version=4):
        s.metadata_settles()
        return s.request(32, version, C(include_synonyms=synonyms, include_documentation=docs, resources=[
            C.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=keys)
            for t, n, keys in resources]))
    out.append(("topic named keys", 32, describe([(2, topic, ["retention.ms", "cleanup.policy", "segment.ms",
                                                               "no.such.key"])])))
    out.append(("topic named keys v1", 32, describe([(2, topic, ["retention.ms", "cleanup.policy"])], version=1)))
    out.append(("topic named keys v0", 32, describe([(2, topic, ["retention.ms"])], synonyms=False, version=0)))
    out.append(("topic documentation", 32, describe([(2, topic, ["retention.ms", "min.insync.replicas"])],
                                                    docs=True)))
    out.append(("broker named keys", 32, describe([(4, node, ["log.retention.hours", "num.io.threads",
                                                               "log.cleanup.policy", "no.such.key"])])))
    out.append(("broker default resource", 32, describe([(4, "", ["log.retention.ms"])])))
    out.append(("unknown broker", 32, describe([(4, "77", ["log.retention.ms"])])))
    out.append(("bad broker name", 32, describe([(4, "abc", None)])))
    out.append(("unknown topic", 32, describe([(2, f"{p}-nosuch", None)])))
    out.append(("bad topic name", 32, describe([(2, "bad name!", None)])))
    out.append(("unknown resource type", 32, describe([(99, "x", None)])))
    out.append(("broker logger", 32, describe([(8, node, ["kafka.server.ReplicaManager"])])))
    out.append(("topic twice", 32, describe([(2, topic, ["retention.ms"]), (2, topic, ["segment.ms"])])))

    def alter(resources, validate=False):
        return s.request(33, 2, A(validate_only=validate, resources=[A.AlterConfigsResource(
            resource_type=t, resource_name=n, configs=[A.AlterableConfig(name=k, value=v) for k, v in configs])
            for t, n, configs in resources]))
    out.append(("legacy alter topic", 33, alter([(2, topic, [("segment.ms", "100000")])])))
    out.append(("legacy alter then", 32, describe([(2, topic, ["segment.ms", "retention.ms"])], synonyms=False)))
    out.append(("legacy alter null value", 33, alter([(2, topic, [("segment.ms", None)])])))
    out.append(("legacy alter bad value", 33, alter([(2, topic, [("segment.ms", "soon")])])))
    out.append(("legacy alter unknown key", 33, alter([(2, topic, [("no.such", "1")])])))
    out.append(("legacy alter duplicate key", 33, alter([(2, topic, [("segment.ms", "1"), ("segment.ms", "2")])])))
    out.append(("legacy alter broker read-only", 33, alter([(4, node, [("num.io.threads", "3")])], validate=True)))
    I = messages.IncrementalAlterConfigsRequest
    for name, value in (("num.io.threads", "3"), ("num.io.threads", "17"), ("num.io.threads", "16"),
                        ("num.network.threads", "7"), ("background.threads", "25"), ("num.replica.fetchers", "3")):
        out.append((f"thread pool {name}={value}", 44, s.request(44, 1, I(validate_only=True, resources=[
            I.AlterConfigsResource(resource_type=4, resource_name=node, configs=[
                I.AlterableConfig(name=name, config_operation=0, value=value)])]))))
    out.append(("legacy alter broker default dynamic", 33, alter([(4, "", [("log.cleaner.threads", "2")])],
                                                                 validate=True)))
    return out


def cluster_misc(s: Session, p: str):
    """DescribeCluster endpoint types, SASL and delegation tokens on a PLAINTEXT listener, log dirs."""
    out = []
    s.topic(f"{p}-cm")
    D = messages.DescribeClusterRequest
    for endpoint in (1, 2, 0):
        out.append((f"describe cluster endpoint {endpoint}", 60, s.request(60, 1, D(
            include_cluster_authorized_operations=False, endpoint_type=endpoint))))
    out.append(("sasl handshake on plaintext", 17, s.request(17, 1, messages.SaslHandshakeRequest(mechanism="PLAIN"))))
    T = messages.CreateDelegationTokenRequest
    out.append(("token on plaintext", 38, s.request(38, 3, T(owner_principal_type=None, owner_principal_name=None,
                                                             renewers=[], max_lifetime_ms=-1))))
    L = messages.DescribeLogDirsRequest
    answer = s.request(35, 4, L(topics=[L.DescribableLogDirTopic(topic=f"{p}-cm", partitions=[0, 5]),
                                        L.DescribableLogDirTopic(topic=f"{p}-nosuch", partitions=[0])]))
    for result in answer.results:
        result.log_dir = result.total_bytes = result.usable_bytes = None   # each broker's own disk
    out.append(("log dirs of some partitions", 35, answer))
    return out


def client_metrics_configs(s: Session, p: str):
    """kafka-client-metrics: subscriptions as CLIENT_METRICS config resources (KIP-714)."""
    out = []
    I, C = messages.IncrementalAlterConfigsRequest, messages.DescribeConfigsRequest
    name = f"{p}-sub"

    def alter(configs, resource=name, validate=False):
        return s.request(44, 1, I(validate_only=validate, resources=[I.AlterConfigsResource(
            resource_type=16, resource_name=resource, configs=[
                I.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in configs])]))

    def describe(resource=name, keys=None):
        return s.request(32, 4, C(include_synonyms=False, include_documentation=False, resources=[
            C.DescribeConfigsResource(resource_type=16, resource_name=resource, configuration_keys=keys)]))
    out.append(("create", 44, alter([("metrics", 0, "org.apache.kafka.producer."), ("interval.ms", 0, "60000"),
                                     ("match", 0, "client_id=app.*,client_software_name=apache-kafka-java")])))
    out.append(("describe", 32, describe()))
    out.append(("interval too short", 44, alter([("interval.ms", 0, "10")])))
    out.append(("interval not a number", 44, alter([("interval.ms", 0, "soon")])))
    out.append(("bad match key", 44, alter([("match", 0, "colour=red")])))
    out.append(("bad match regex", 44, alter([("match", 0, "client_id=[")])))
    out.append(("unknown key", 44, alter([("nonsense", 0, "1")])))
    out.append(("all metrics", 44, alter([("metrics", 0, "*")])))
    out.append(("delete interval", 44, alter([("interval.ms", 1, None)])))
    out.append(("describe after", 32, describe()))
    out.append(("describe unknown", 32, describe(f"{p}-nosuch")))
    out.append(("describe empty name", 32, describe("")))
    out.append(("delete all", 44, alter([("metrics", 1, None), ("match", 1, None)])))
    out.append(("describe deleted", 32, describe()))
    return out


def broker_list_configs(s: Session, p: str):
    """APPEND / SUBTRACT on a broker's list configs (kafka-configs --entity-type brokers), put back after."""
    out = []
    node = str(s.node_id())
    I, C = messages.IncrementalAlterConfigsRequest, messages.DescribeConfigsRequest

    def alter(name, op, value):
        return s.request(44, 1, I(validate_only=False, resources=[I.AlterConfigsResource(
            resource_type=4, resource_name=node, configs=[I.AlterableConfig(name=name, config_operation=op,
                                                                            value=value)])]))

    def describe(name):
        s.metadata_settles()
        answer = s.request(32, 4, C(include_synonyms=False, include_documentation=False, resources=[
            C.DescribeConfigsResource(resource_type=4, resource_name=node, configuration_keys=[name])]))
        return answer
    try:
        for name, op, value in (("ssl.cipher.suites", 2, "TLS_AES_128_GCM_SHA256"),
                                ("ssl.cipher.suites", 2, "TLS_AES_256_GCM_SHA384"),
                                ("ssl.cipher.suites", 3, "TLS_AES_128_GCM_SHA256"),
                                ("ssl.cipher.suites", 3, "TLS_AES_256_GCM_SHA384"),
                                ("log.cleanup.policy", 2, "compact"),
                                ("log.cleanup.policy", 3, "delete")):
            out.append((f"{name} {'append' if op == 2 else 'subtract'} {value}", 44, alter(name, op, value)))
            out.append((f"{name} then", 32, describe(name)))
    finally:
        alter("ssl.cipher.suites", 1, None)
        alter("log.cleanup.policy", 1, None)
    return out
