"""Odradek's controller: the metadata log (a Raft quorum, KRaft style) and the image built from it.

Opening (trio; the context manager runs the controller's background tasks until it exits)::

    from broker.controller import Controller, ControllerSettings, CreateTopicSpec

    async with Controller.open(log_dir, node_id=1, cluster_id=None,
                               settings=ControllerSettings(num_partitions=1,
                                                           default_replication_factor=1,
                                                           delete_topic_enable=True,
                                                           broker_session_timeout_ms=9000),
                               config_validator=validate) as controller:
        ...

The metadata log lives in `<log_dir>/__cluster_metadata-0/` (entries, `quorum-state`, snapshots), every
entry fsynced before it counts; a restart replays the latest snapshot plus the log after it, so topics,
configs and producer-id blocks survive. The log runs on the sans-IO Raft core (`raft`), by default as a
quorum of one (`voters=None`); a snapshot of the image is taken every `snapshot_every` entries.
`controller.is_active` / `controller.describe_quorum()` show the quorum (leader, epoch, high watermark,
each replica's progress).
`cluster_id=None` reads `cluster.id` from `<log_dir>/meta.properties`, creating that file if missing.
`config_validator(resource_type, resource_name, configs)` is the broker's hook: it gets the complete
resulting dynamic config map of a topic (resource_type 2) or broker (4, name "" = cluster default) and
raises ValueError(message) → INVALID_CONFIG, or `ApiError(code, message)` for another code.

Reading (always the latest committed state; never mutate it)::

    image = controller.image          # MetadataImage
    image.cluster_id, image.offset    # offset of the last applied record batch (-1: none yet);
                                      #   epoch-marker control entries do not move it
    image.brokers[id]                 # BrokerImage: broker_id, epoch, incarnation_id, endpoints
                                      #   (Endpoint: name, host, port, security_protocol), rack, fenced
    image.topics[name] / image.topics_by_id[uuid]   # TopicImage: name, topic_id, partitions{int: ...}
    image.partition(topic, p)         # PartitionImage: partition_id, replicas, isr, leader,
                                      #   leader_epoch, partition_epoch (tuples of broker ids)
    image.topic_configs[name]         # {key: value}: dynamic (non-default) configs only
    image.broker_configs[""|"<id>"]   # cluster-wide default ("") and per-broker dynamic configs
    image.next_producer_id
    image.acls[uuid]                  # broker.security.acls.AclBinding, by ACL id
    image.delegation_tokens[token_id] # broker.security.delegation_tokens.TokenInfo

    controller.add_listener(fn)       # fn(ImageChange) runs synchronously after every committed batch
                                      #   and before the mutation that caused it returns; ImageChange has
                                      #   .old .new .created_topics .deleted_topics .changed_partitions
                                      #   .changed_topic_configs

Mutating (each returns only once its records are durable and committed; batch calls answer one result
per item, in request order, and commit the valid items as one atomic batch; whole-request failures such
as NOT_CONTROLLER raise `ApiError` with `.code` / `.message`. Like Kafka, one create_topics /
create_partitions call (validate_only too) that would write more than MAX_RECORDS_PER_USER_OP = 10,000
records raises `ApiError(POLICY_VIOLATION, "Unable to perform excessively large batch operation.")`
before any placement work)::

    await controller.create_topics([CreateTopicSpec(name, num_partitions=-1, replication_factor=-1,
                                                    assignments={}, configs={})], validate_only=False)
        -> [CreateTopicResult(name, error_code, error_message, topic_id, num_partitions,
                              replication_factor, configs)]
    await controller.delete_topics(names=[...], topic_ids=[...])
        -> [DeleteTopicResult(name, topic_id, error_code, error_message)]   # names first, then ids
    await controller.create_partitions([CreatePartitionsSpec(name, count, assignments=None)],
                                       validate_only=False) -> [CreatePartitionsResult(...)]
    await controller.alter_configs([(resource_type, name, {key: value})], validate_only=False)
    await controller.incremental_alter_configs([(resource_type, name, [(key, op, value)])],
                                               validate_only=False)   # op: SET 0 DELETE 1 APPEND 2 SUBTRACT 3
        -> [ConfigResult(resource_type, resource_name, error_code, error_message)]
    await controller.create_acls([AclBinding]) -> [acls.AclCreateResult(error_code, error_message)]
    await controller.delete_acls([AclBindingFilter]) -> [acls.AclDeleteResult(error_code, error_message,
                                                                              deleted=[AclBinding])]
    await controller.create_delegation_token(owner, requester, renewers, max_lifetime_ms)
        -> delegation_tokens.CreatedToken(error_code, token, hmac)
    await controller.renew_delegation_token(principal, hmac, period_ms)    -> (error code, expiry ms)
    await controller.expire_delegation_token(principal, hmac, period_ms)   -> (error code, expiry ms)
    await controller.allocate_producer_ids(broker_id, broker_epoch=-1) -> ProducerIdBlock(first_producer_id, size=1000)
    await controller.register_broker(broker_id, incarnation_id, [(listener, host, port, protocol_id)],
                                     rack=None) -> broker_epoch        # registered fenced
    await controller.heartbeat(broker_id, broker_epoch, metadata_offset, want_fence=False,
                               want_shutdown=False) -> HeartbeatResult(is_caught_up, is_fenced, should_shut_down)
        # want_shutdown: controlled shutdown (leaderships and ISR memberships move away at once);
        #   should_shut_down comes once it leads nothing and every other active broker has seen that
    await controller.unregister_broker(broker_id)
    await controller.elect_leaders(election_type, [(topic, [partition, ...])] | None)   # 0 PREFERRED, 1 UNCLEAN
        -> [(topic, [(partition, error_code, error_message)])]                          # as Kafka answers
    await controller.alter_partition(broker_id, broker_epoch, [alter_partition.IsrProposal(...)],
                                     version=3) -> [alter_partition.IsrResult(...)]     # KIP-497
    await controller.balance_leaders_once()   # what auto.leader.rebalance.enable runs every interval

Replicas are striped over registered brokers as Kafka's placer does (`placement`: rack-aware, random
start, fenced brokers only as followers), so a broker must register and heartbeat once (which unfences
it) before topics can be created; a broker that stops heartbeating for `broker.session.timeout.ms` is
fenced and its partitions move their leadership to other in-sync replicas (`election`: or to no leader,
-1, unless unclean.leader.election.enable allows an out-of-sync live replica).

Error codes follow Kafka: INVALID_TOPIC_EXCEPTION (bad or colliding name), TOPIC_ALREADY_EXISTS,
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG,
INVALID_REQUEST (duplicates in one request, manual assignment with counts), UNKNOWN_TOPIC_OR_PARTITION,
UNKNOWN_TOPIC_ID, TOPIC_DELETION_DISABLED, STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED,
DUPLICATE_BROKER_REGISTRATION, NOT_CONTROLLER.

Modules: `image` (MetadataImage, applying records), `records` (metadata record types and framing),
`controller` (the API above, split by job into `topic_ops`, `broker_ops`, `leadership_ops`; request
types in `specs`), pure decisions: `placement` (replica placement), `election` (leaders and ISRs:
fencing, unfencing, shutdown, ElectLeaders, rebalance), `brokers` (registration, heartbeat states,
sessions), `alter_partition` (AlterPartition checks), `topics` (names), `configs` (config changes),
`simulate_cluster` + `simcluster_nodes` (the whole control plane simulated:
`python -m broker.controller.simulate_cluster`), `disklog`
(durable log, quorum state, snapshots), `quorum` (trio driver running the Raft core on the disk log),
`raft` (the sans-IO Raft core), `simulate` (deterministic simulator: `python -m broker.controller.simulate`),
`wire` (core messages <-> KRaft wire messages; `describe_quorum_response(view, request)`), `admin`
(controller-side handlers: `admin.HANDLERS[api_key](controller, body) -> response body` for
DescribeQuorum 55, AllocateProducerIds 67, BrokerRegistration 62, BrokerHeartbeat 63, UnregisterBroker
64, AlterPartition 56 (`admin.alter_partition(controller, body, version)`) — a broker
handler for DescribeQuorum can call `admin.describe_quorum(controller, body)`), `transport` (TCP
between voters), `node` (a standalone voter process:
`python -m broker.controller.node --node-id 1 --voters 1@h:p,2@h:p,3@h:p --log-dir DIR`).

Multi-voter quorum: `Controller.open(log_dir, node_id=1, voters={1: (host, port), ...},
transport=TcpTransport(1, voters, cluster_id), raft_config=RaftConfig(...))`; mutations on a non-leader
raise ApiError(NOT_CONTROLLER); `await controller.resign()` before a clean shutdown hands leadership over.
"""

from .controller import (
    ConfigResult, Controller, ControllerSettings, CreatePartitionsResult, CreatePartitionsSpec,
    CreateTopicResult, CreateTopicSpec, DeleteTopicResult, HeartbeatResult, ProducerIdBlock,
)
from .configs import APPEND, DELETE, SET, SUBTRACT
from .errors import ApiError, ErrorCode
from .image import (
    BROKER_RESOURCE, TOPIC_RESOURCE, BrokerImage, Endpoint, ImageChange, MetadataImage, PartitionImage,
    TopicImage,
)

__all__ = [
    "APPEND", "ApiError", "BROKER_RESOURCE", "BrokerImage", "ConfigResult", "Controller",
    "ControllerSettings", "CreatePartitionsResult", "CreatePartitionsSpec", "CreateTopicResult",
    "CreateTopicSpec", "DELETE", "DeleteTopicResult", "Endpoint", "ErrorCode", "HeartbeatResult",
    "ImageChange", "MetadataImage", "PartitionImage", "ProducerIdBlock", "SET", "SUBTRACT",
    "TOPIC_RESOURCE", "TopicImage",
]
