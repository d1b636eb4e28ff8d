"""``ClusterController``: what a broker's handlers call ``ctx.controller``, in a multi-node cluster.

Reads come from this node's replica of the metadata log (``local``: a voter or an observer
``Controller``): ``image``, ``add_listener``, ``cluster_id``. Mutations go to the active controller:
to ``local`` when this node is it, else as the matching Kafka request over the controller listener
(``ControllerClient``, retried on NOT_CONTROLLER). A forwarded mutation returns, like a local one, only
once this node's image holds its result: it asks the leader for its high watermark and waits until the
local replica has applied that far.
"""

from __future__ import annotations

import uuid
from typing import Sequence

import trio

from protocol import ErrorCode, messages as m

from broker.controller.controller import (
    ConfigResult, CreatePartitionsResult, CreatePartitionsSpec, CreateTopicResult, CreateTopicSpec,
    DeleteTopicResult, HeartbeatResult, ProducerIdBlock,
)
from broker.controller.configs import config_pairs
from broker.controller.errors import ApiError
from broker.controller.wire import METADATA_TOPIC

from . import security_wire, token_wire
from .client import ControllerClient

DYNAMIC_TOPIC_CONFIG = 1
CATCH_UP_TIMEOUT_S = 10.0
FORWARD_TIMEOUT_MS = 30_000


class ClusterController:
    def __init__(self, local, client: ControllerClient,
                 lifecycle_client: ControllerClient | None = None):
        self.local = local
        self.client = client
        # Registration and heartbeats on a connection of their own: a slow admin request must not
        # hold up the heartbeat that keeps this broker unfenced.
        self.lifecycle_client = lifecycle_client or client

    # -- reads: this node's replica ----------------------------------------------------------------
    @property
    def image(self):
        return self.local.image

    @property
    def cluster_id(self) -> str:
        return self.local.cluster_id

    @property
    def node_id(self) -> int:
        return self.local.node_id

    @property
    def is_active(self) -> bool:
        return self.local.is_active

    @property
    def leader_id(self) -> int:
        return self.local.leader_id

    def metadata_status(self) -> tuple[bool, str]:
        """(current, why not): a readiness check. A broker that lost the quorum says so."""
        if self.local.in_touch():
            return True, ""
        if self.local.leader_id < 0:
            return False, "no active controller known: the metadata quorum is unreachable"
        return False, (f"not hearing from the active controller {self.local.leader_id}: "
                       "metadata may be stale")

    def add_listener(self, listener) -> None:
        self.local.add_listener(listener)

    def remove_listener(self, listener) -> None:
        self.local.remove_listener(listener)

    def describe_quorum(self) -> dict:
        return self.local.describe_quorum()

    async def resign(self) -> None:
        await self.local.resign()

    async def forward(self, api_key: int, version: int, body):
        """Send a request as it came to the active controller; its answer, as it came back."""
        return await self.client.call(api_key, version, body)

    # -- helpers -----------------------------------------------------------------------------------
    async def _local_or_none(self, method: str, *args, **kwargs):
        """Run on the local controller when it is active; None when the call must be forwarded."""
        if not self.local.is_active:
            return None
        try:
            return await getattr(self.local, method)(*args, **kwargs)
        except ApiError as exc:
            if exc.code != ErrorCode.NOT_CONTROLLER:
                raise
            return None

    async def _catch_up(self) -> None:
        """Wait until this node's image holds everything the leader had committed when asked."""
        body = m.DescribeQuorumRequest(topics=[m.DescribeQuorumRequest.TopicData(
            topic_name=METADATA_TOPIC, partitions=[m.DescribeQuorumRequest.PartitionData(
                partition_index=0)])])
        response = await self.client.call(55, 1, body)
        high_watermark = response.topics[0].partitions[0].high_watermark if response.topics else -1
        if high_watermark > 0:
            with trio.move_on_after(CATCH_UP_TIMEOUT_S):
                await self.local.wait_applied(high_watermark)

    # -- topics ------------------------------------------------------------------------------------
    async def create_topics(self, specs: Sequence[CreateTopicSpec],
                            validate_only: bool = False) -> list[CreateTopicResult]:
        done = await self._local_or_none("create_topics", specs, validate_only=validate_only)
        if done is not None:
            return done
        R = m.CreateTopicsRequest
        body = R(timeout_ms=FORWARD_TIMEOUT_MS, validate_only=validate_only, topics=[
            R.CreatableTopic(
                name=s.name, num_partitions=s.num_partitions, replication_factor=s.replication_factor,
                assignments=[R.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
                             for p, b in s.assignments.items()],
                configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in s.configs.items()])
            for s in specs])
        response = await self.client.call(19, 7, body)
        results = []
        for t in response.topics:
            result = CreateTopicResult(name=t.name, error_code=t.error_code,
                                       error_message=t.error_message or None)
            if t.error_code == 0:
                result.topic_id, result.num_partitions = t.topic_id, t.num_partitions
                result.replication_factor = t.replication_factor
                result.configs = {c.name: c.value for c in t.configs or ()
                                  if c.config_source == DYNAMIC_TOPIC_CONFIG}
            results.append(result)
        if not validate_only:
            await self._catch_up()
        return results

    async def delete_topics(self, names: Sequence[str] = (),
                            topic_ids: Sequence[uuid.UUID] = ()) -> list[DeleteTopicResult]:
        done = await self._local_or_none("delete_topics", names=names, topic_ids=topic_ids)
        if done is not None:
            return done
        R = m.DeleteTopicsRequest
        body = R(timeout_ms=FORWARD_TIMEOUT_MS,
                 topics=[R.DeleteTopicState(name=n) for n in names]
                 + [R.DeleteTopicState(name=None, topic_id=t) for t in topic_ids])
        response = await self.client.call(20, 6, body)
        results = [DeleteTopicResult(name=r.name, topic_id=r.topic_id, error_code=r.error_code,
                                     error_message=r.error_message) for r in response.responses]
        await self._catch_up()
        return results

    async def create_partitions(self, specs: Sequence[CreatePartitionsSpec],
                                validate_only: bool = False) -> list[CreatePartitionsResult]:
        done = await self._local_or_none("create_partitions", specs, validate_only=validate_only)
        if done is not None:
            return done
        R = m.CreatePartitionsRequest
        body = R(timeout_ms=FORWARD_TIMEOUT_MS, validate_only=validate_only, topics=[
            R.CreatePartitionsTopic(
                name=s.name, count=s.count,
                assignments=None if s.assignments is None else
                [R.CreatePartitionsAssignment(broker_ids=list(a)) for a in s.assignments])
            for s in specs])
        response = await self.client.call(37, 3, body)
        results = [CreatePartitionsResult(name=r.name, error_code=r.error_code,
                                          error_message=r.error_message) for r in response.results]
        if not validate_only:
            await self._catch_up()
        return results

    # -- ACLs and SCRAM credentials ----------------------------------------------------------------
    async def create_acls(self, bindings) -> list:
        done = await self._local_or_none("create_acls", bindings)
        if done is not None:
            return done
        response = await self.client.call(30, security_wire.ACL_VERSION,
                                          security_wire.create_acls_request(bindings))
        await self._catch_up()
        return security_wire.create_acls_results(response)

    async def delete_acls(self, filters) -> list:
        done = await self._local_or_none("delete_acls", filters)
        if done is not None:
            return done
        response = await self.client.call(31, security_wire.ACL_VERSION,
                                          security_wire.delete_acls_request(filters))
        await self._catch_up()
        return security_wire.delete_acls_results(response)

    async def alter_user_scram_credentials(self, deletions, upsertions) -> dict:
        done = await self._local_or_none("alter_user_scram_credentials", deletions, upsertions)
        if done is not None:
            return done
        response = await self.client.call(51, security_wire.SCRAM_VERSION,
                                          security_wire.alter_scram_request(deletions, upsertions))
        await self._catch_up()
        return security_wire.alter_scram_results(response)

    # -- delegation tokens: forwarded in an Envelope naming the requester ------------------------------
    async def create_delegation_token(self, owner, requester, renewers, max_lifetime_ms: int):
        done = await self._local_or_none("create_delegation_token", owner, requester, renewers,
                                         max_lifetime_ms)
        if done is not None:
            return done
        response = await self._forward_as(requester, token_wire.CREATE, token_wire.create_request(
            owner, renewers, max_lifetime_ms))
        return token_wire.created_token(response, owner, requester, renewers)

    async def renew_delegation_token(self, principal, hmac: bytes, renew_period_ms: int):
        done = await self._local_or_none("renew_delegation_token", principal, hmac, renew_period_ms)
        if done is not None:
            return done
        response = await self._forward_as(principal, token_wire.RENEW, m.RenewDelegationTokenRequest(
            hmac=hmac, renew_period_ms=renew_period_ms))
        return response.error_code, response.expiry_timestamp_ms

    async def expire_delegation_token(self, principal, hmac: bytes, expiry_period_ms: int):
        done = await self._local_or_none("expire_delegation_token", principal, hmac,
                                         expiry_period_ms)
        if done is not None:
            return done
        response = await self._forward_as(principal, token_wire.EXPIRE,
                                          m.ExpireDelegationTokenRequest(
                                              hmac=hmac, expiry_time_period_ms=expiry_period_ms))
        return response.error_code, response.expiry_timestamp_ms

    async def _forward_as(self, principal, api_key: int, body):
        envelope = token_wire.envelope(api_key, body, principal, "")
        response = await self.client.call(token_wire.ENVELOPE, token_wire.ENVELOPE_VERSION, envelope)
        inner = token_wire.open_envelope_response(api_key, response)
        if inner.error_code == 0:
            await self._catch_up()
        return inner

    # -- finalized features ------------------------------------------------------------------------
    async def update_features(self, updates, validate_only: bool = False) -> dict:
        done = await self._local_or_none("update_features", updates, validate_only=validate_only)
        if done is not None:
            return done
        R = m.UpdateFeaturesRequest
        response = await self.client.call(57, 1, R(
            timeout_ms=FORWARD_TIMEOUT_MS, validate_only=validate_only, feature_updates=[
                R.FeatureUpdateKey(feature=u.name, max_version_level=u.level,
                                   upgrade_type=u.upgrade_type) for u in updates]))
        if response.error_code:
            raise ApiError(response.error_code, response.error_message)
        if not validate_only:
            await self._catch_up()
        return {r.feature: (r.error_code, r.error_message) for r in response.results}

    # -- configs -----------------------------------------------------------------------------------
    async def alter_configs(self, resources, validate_only: bool = False) -> list[ConfigResult]:
        done = await self._local_or_none("alter_configs", resources, validate_only=validate_only)
        if done is not None:
            return done
        R = m.AlterConfigsRequest
        body = R(validate_only=validate_only, resources=[
            R.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
                R.AlterableConfig(name=k, value=v) for k, v in config_pairs(configs)])
            for t, n, configs in resources])
        return await self._configs_answer(await self.client.call(33, 2, body), validate_only)

    async def incremental_alter_configs(self, resources,
                                        validate_only: bool = False) -> list[ConfigResult]:
        done = await self._local_or_none("incremental_alter_configs", resources,
                                         validate_only=validate_only)
        if done is not None:
            return done
        R = m.IncrementalAlterConfigsRequest
        body = R(validate_only=validate_only, resources=[
            R.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
                R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes])
            for t, n, changes in resources])
        return await self._configs_answer(await self.client.call(44, 1, body), validate_only)

    async def _configs_answer(self, response, validate_only: bool) -> list[ConfigResult]:
        results = [ConfigResult(r.resource_type, r.resource_name, r.error_code, r.error_message)
                   for r in response.responses]
        if not validate_only:
            await self._catch_up()
        return results

    # -- leadership ----------------------------------------------------------------------------------
    async def elect_leaders(self, election_type: int, topic_partitions):
        done = await self._local_or_none("elect_leaders", election_type, topic_partitions)
        if done is not None:
            return done
        R = m.ElectLeadersRequest
        body = R(election_type=election_type, timeout_ms=FORWARD_TIMEOUT_MS,
                 topic_partitions=None if topic_partitions is None else [
                     R.TopicPartitions(topic=t, partitions=list(p)) for t, p in topic_partitions])
        response = await self.client.call(43, 2, body)
        if response.error_code:
            raise ApiError(response.error_code, "Leader election failed.")
        results = [(r.topic, [(p.partition_id, p.error_code, p.error_message)
                              for p in r.partition_result])
                   for r in response.replica_election_results]
        await self._catch_up()
        return results

    async def alter_partition_reassignments(self, topics):
        """AlterPartitionReassignments to the active controller (see ReassignmentOps)."""
        done = await self._local_or_none("alter_partition_reassignments", topics)
        if done is not None:
            return done
        R = m.AlterPartitionReassignmentsRequest
        response = await self.client.call(45, 0, R(timeout_ms=FORWARD_TIMEOUT_MS, topics=[
            R.ReassignableTopic(name=name, partitions=[
                R.ReassignablePartition(partition_index=p, replicas=None if t is None else list(t))
                for p, t in partitions]) for name, partitions in topics]))
        if response.error_code:
            raise ApiError(response.error_code, response.error_message)
        await self._catch_up()
        return [(t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
                for t in response.responses]

    async def list_partition_reassignments(self, topics=None):
        done = await self._local_or_none("list_partition_reassignments", topics)
        if done is not None:
            return done
        R = m.ListPartitionReassignmentsRequest
        response = await self.client.call(46, 0, R(timeout_ms=FORWARD_TIMEOUT_MS, topics=None if topics is None else [
            R.ListPartitionReassignmentsTopics(name=name, partition_indexes=list(p)) for name, p in topics]))
        if response.error_code:
            raise ApiError(response.error_code, response.error_message)
        return [(t.name, [(p.partition_index, list(p.replicas), list(p.adding_replicas),
                           list(p.removing_replicas)) for p in t.partitions]) for t in response.topics]

    async def alter_partition(self, broker_id: int, broker_epoch: int, proposals, version: int = 3):
        """AlterPartition (a partition leader's ISR change) to the active controller; one
        IsrResult per proposal, in order."""
        from broker.controller.alter_partition import IsrResult

        done = await self._local_or_none("alter_partition", broker_id, broker_epoch, proposals,
                                         version)
        if done is not None:
            return done
        R = m.AlterPartitionRequest
        topics: dict = {}
        for p in proposals:
            key = p.topic_id if version >= 2 else p.topic_name
            topics.setdefault(key, []).append(R.PartitionData(
                partition_index=p.partition, leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch, leader_recovery_state=p.leader_recovery_state,
                new_isr=[b for b, _ in p.new_isr],
                new_isr_with_epochs=[R.BrokerState(broker_id=b, broker_epoch=e)
                                     for b, e in p.new_isr]))
        body = R(broker_id=broker_id, broker_epoch=broker_epoch, topics=[
            R.TopicData(topic_id=key, partitions=parts) if version >= 2
            else R.TopicData(topic_name=key, partitions=parts) for key, parts in topics.items()])
        response = await self.client.call(56, version, body)
        if response.error_code:
            raise ApiError(response.error_code, "AlterPartition refused.")
        by_key = {}
        for topic in response.topics:
            key = topic.topic_id if version >= 2 else topic.topic_name
            for p in topic.partitions:
                by_key[(key, p.partition_index)] = IsrResult(
                    partition=p.partition_index, error_code=p.error_code, leader=p.leader_id,
                    leader_epoch=p.leader_epoch, isr=list(p.isr),
                    partition_epoch=p.partition_epoch,
                    leader_recovery_state=p.leader_recovery_state,
                    topic_id=topic.topic_id if version >= 2 else None,
                    topic_name=topic.topic_name if version < 2 else None)
        await self._catch_up()
        return [by_key[(p.topic_id if version >= 2 else p.topic_name, p.partition)]
                for p in proposals]

    # -- producer ids and broker lifecycle ---------------------------------------------------------
    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1) -> ProducerIdBlock:
        done = await self._local_or_none("allocate_producer_ids", broker_id, broker_epoch)
        if done is not None:
            return done
        response = await self.client.call(67, 0, m.AllocateProducerIdsRequest(
            broker_id=broker_id, broker_epoch=broker_epoch))
        if response.error_code:
            raise ApiError(response.error_code, "Could not allocate producer ids.")
        return ProducerIdBlock(response.producer_id_start, response.producer_id_len)

    async def register_broker(self, broker_id: int, incarnation_id: uuid.UUID, endpoints,
                              rack: str | None = None, features=()) -> int:
        R = m.BrokerRegistrationRequest
        body = R(broker_id=broker_id, cluster_id=self.cluster_id, incarnation_id=incarnation_id,
                 listeners=[R.Listener(name=n, host=h, port=p, security_protocol=s)
                            for n, h, p, s in endpoints],
                 features=[R.Feature(name=name, min_supported_version=low,
                                      max_supported_version=high) for name, low, high in features],
                 rack=rack)
        response = await self.lifecycle_client.call(62, 3, body, timeout_s=5.0)
        if response.error_code:
            raise ApiError(response.error_code, f"Broker registration refused: "
                           f"{ErrorCode(response.error_code).name}")
        return response.broker_epoch

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_fence: bool = False, want_shutdown: bool = False) -> HeartbeatResult:
        response = await self.lifecycle_client.call(63, 1, m.BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=broker_epoch, current_metadata_offset=metadata_offset,
            want_fence=want_fence, want_shut_down=want_shutdown), timeout_s=5.0)
        if response.error_code:
            raise ApiError(response.error_code, f"Broker heartbeat refused: "
                           f"{ErrorCode(response.error_code).name}")
        return HeartbeatResult(is_caught_up=response.is_caught_up, is_fenced=response.is_fenced,
                               should_shut_down=response.should_shut_down)

    async def register_controller(self, controller_id: int, incarnation_id: uuid.UUID,
                                  endpoints) -> None:
        done = await self._local_or_none("register_controller", controller_id, incarnation_id,
                                         endpoints)
        if done is not None or self.local.is_active:
            return
        R = m.ControllerRegistrationRequest
        response = await self.client.call(70, 0, R(
            controller_id=controller_id, incarnation_id=incarnation_id, zk_migration_ready=False,
            listeners=[R.Listener(name=n, host=h, port=p, security_protocol=s)
                       for n, h, p, s in endpoints], features=[]))
        if response.error_code:
            raise ApiError(response.error_code, response.error_message)

    async def unregister_broker(self, broker_id: int) -> None:
        response = await self.client.call(64, 0, m.UnregisterBrokerRequest(broker_id=broker_id))
        if response.error_code:
            raise ApiError(response.error_code, response.error_message)
        await self._catch_up()
