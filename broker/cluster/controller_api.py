"""The requests a controller answers on its controller listener besides the KRaft RPCs.

Brokers send them here: BrokerRegistration (62), BrokerHeartbeat (63), UnregisterBroker (64),
AllocateProducerIds (67), AlterPartition (56), DescribeQuorum (55), ControllerRegistration (70) from
the other controllers, ApiVersions (18) and DescribeCluster (60, controllers: KIP-919) for admin
clients bootstrapped with controllers, and the admin mutations they
forward (CreateTopics 19, DeleteTopics 20, CreatePartitions 37, AlterConfigs 33,
IncrementalAlterConfigs 44, ElectLeaders 43, CreateAcls 30, DeleteAcls 31,
AlterUserScramCredentials 51, UpdateFeatures 57). A controller that is not active answers
NOT_CONTROLLER, which makes the sender retry on the new one.
``ControllerApi(controller, config).handle(header, body)`` is the transport's ``admin_handler``.
"""

from __future__ import annotations

import logging


import protocol
from protocol import ErrorCode, messages as m

from broker.controller import admin
from broker.controller.acls import AclCreateResult, AclDeleteResult
from broker.controller.errors import ApiError
from broker.handlers.api_versions import handle_api_versions
from broker.handlers.cluster import CONTROLLERS_ENDPOINT_TYPE, handle_elect_leaders, refused_endpoint_type
from broker.handlers.features import handle_update_features
from broker.handlers.reassignments import (
    handle_alter_partition_reassignments, handle_list_partition_reassignments,
)
from broker.handlers.topics import (
    handle_create_partitions, handle_create_topics, handle_delete_topics,
)

from . import security_wire, token_wire

log = logging.getLogger("odradek.cluster")


# The KRaft RPCs on this listener (transport.py answers them) with the versions it speaks.
RAFT_VERSIONS = {52: (0, 2), 53: (0, 1), 54: (0, 1), 1: (15, 17), 59: (0, 1)}
SASL_APIS = (17, 36)   # SaslHandshake, SaslAuthenticate


class _HandlerContext:
    """Just enough of a broker request context for the broker's handlers to run on a controller."""

    # No broker, so no authorizer: the broker that took the request authorized it before forwarding.
    broker = None

    def __init__(self, controller, config, handlers=None):
        self.controller = controller
        self.config = config
        self.handlers = handlers or {}

    def finalized_features(self) -> dict[str, int]:
        return dict(self.controller.image.features)

    def metadata_epoch(self) -> int:
        return max(self.controller.image.offset, 0)

    @property
    def image(self):
        return self.controller.image


class ControllerApi:
    def __init__(self, controller, config, voters=None):
        self.controller = controller
        self.config = config
        self.voters = voters or {}           # {id: (host, port)} of the controller listeners
        self._handlers = {
            19: self._topics(handle_create_topics),
            20: self._topics(handle_delete_topics),
            37: self._topics(handle_create_partitions),
            33: self._alter_configs,
            44: self._incremental_alter_configs,
            55: self._describe_quorum,
            43: self._topics(handle_elect_leaders),
            45: self._topics(handle_alter_partition_reassignments),
            46: self._topics(handle_list_partition_reassignments),
            56: lambda header, body: admin.alter_partition(self.controller, body,
                                                           header.api_version),
            62: lambda header, body: admin.broker_registration(self.controller, body),
            63: lambda header, body: admin.broker_heartbeat(self.controller, body),
            64: lambda header, body: admin.unregister_broker(self.controller, body),
            67: lambda header, body: admin.allocate_producer_ids(self.controller, body),
            70: self._controller_registration,
            60: self._describe_cluster,
            18: self._api_versions,
            30: self._create_acls,
            31: self._delete_acls,
            51: self._alter_user_scram_credentials,
            57: self._topics(handle_update_features),
            58: self._envelope,
        }
        self._versions = self._version_ranges()

    @property
    def api_keys(self):
        return set(self._handlers)

    async def handle(self, header, body):
        handler = self._handlers.get(header.api_key)
        if handler is None:
            raise ValueError(f"api {header.api_key} is not served on the controller listener")
        return await handler(header, body)

    def _topics(self, handler):
        async def run(header, body):
            return await handler(_HandlerContext(self.controller, self.config), header, body)
        return run

    async def _alter_configs(self, header, body):
        resources = [(r.resource_type, r.resource_name, [(c.name, c.value) for c in r.configs])
                     for r in body.resources]
        return await self._configs_answer(
            m.AlterConfigsResponse, resources,
            lambda: self.controller.alter_configs(resources, validate_only=body.validate_only))

    async def _incremental_alter_configs(self, header, body):
        resources = [(r.resource_type, r.resource_name,
                      [(c.name, c.config_operation, c.value) for c in r.configs])
                     for r in body.resources]
        return await self._configs_answer(
            m.IncrementalAlterConfigsResponse, resources,
            lambda: self.controller.incremental_alter_configs(
                resources, validate_only=body.validate_only))

    @staticmethod
    async def _configs_answer(Response, resources, call):
        Entry = Response.AlterConfigsResourceResponse
        try:
            results = await call()
        except ApiError as exc:
            return Response(throttle_time_ms=0, responses=[
                Entry(error_code=exc.code, error_message=exc.message, resource_type=t,
                      resource_name=n) for t, n, _ in resources])
        return Response(throttle_time_ms=0, responses=[
            Entry(error_code=r.error_code, error_message=r.error_message,
                  resource_type=r.resource_type, resource_name=r.resource_name) for r in results])

    def _version_ranges(self) -> dict[int, tuple[int, int, None]]:
        """ApiVersions on this listener: the broker's ranges for the handlers shared with it, the
        spec's for the rest."""
        from broker.handlers import load_registry

        registry = load_registry()
        ranges = {key: (low, high, None) for key, (low, high) in RAFT_VERSIONS.items()}
        for key in (*self._handlers, *SASL_APIS):   # SASL: the listener's guard answers them
            if key in registry:
                ranges[key] = (registry[key][0], registry[key][1], None)
            else:
                spec = protocol.API_SPECS[key]
                ranges[key] = (spec.min_version, spec.max_version, None)
        return ranges

    async def _api_versions(self, header, body):
        return await handle_api_versions(
            _HandlerContext(self.controller, self.config, self._versions), header, body)

    # ACLs and SCRAM credentials forwarded by brokers (security_wire has the mapping)
    async def _create_acls(self, header, body):
        try:
            results = await self.controller.create_acls(security_wire.create_acls_args(body))
        except ApiError as exc:
            results = [AclCreateResult(int(exc.code), exc.message) for _ in body.creations]
        return security_wire.create_acls_response(results)

    async def _delete_acls(self, header, body):
        try:
            results = await self.controller.delete_acls(security_wire.delete_acls_args(body))
        except ApiError as exc:
            results = [AclDeleteResult(int(exc.code), exc.message) for _ in body.filters]
        return security_wire.delete_acls_response(results)

    async def _alter_user_scram_credentials(self, header, body):
        deletions, upsertions = security_wire.alter_scram_args(body)
        try:
            outcome = await self.controller.alter_user_scram_credentials(deletions, upsertions)
        except ApiError as exc:
            outcome = {user: (int(exc.code), exc.message) for user in dict.fromkeys(
                [d.name for d in deletions] + [u.name for u in upsertions])}
        return security_wire.alter_scram_response(outcome)

    # Delegation tokens: brokers forward the client's request in an Envelope naming the client
    async def _envelope(self, header, body):
        try:
            return await self._enveloped(*token_wire.open_envelope(body))
        except ApiError as exc:   # NOT_CONTROLLER makes the broker retry on the active one
            return m.EnvelopeResponse(response_data=None, error_code=int(exc.code))

    async def _enveloped(self, inner_header, inner, principal):
        controller = self.controller
        if inner_header.api_key == token_wire.CREATE:
            owner, renewers, max_lifetime_ms = token_wire.create_args(inner)
            created = await controller.create_delegation_token(owner, principal, renewers,
                                                               max_lifetime_ms)
            response = token_wire.create_response(owner, principal, created)
        elif inner_header.api_key == token_wire.RENEW:
            code, expiry = await controller.renew_delegation_token(
                principal, bytes(inner.hmac), inner.renew_period_ms)
            response = m.RenewDelegationTokenResponse(error_code=code, expiry_timestamp_ms=expiry)
        elif inner_header.api_key == token_wire.EXPIRE:
            code, expiry = await controller.expire_delegation_token(
                principal, bytes(inner.hmac), inner.expiry_time_period_ms)
            response = m.ExpireDelegationTokenResponse(error_code=code, expiry_timestamp_ms=expiry)
        else:
            return m.EnvelopeResponse(response_data=None,
                                      error_code=int(ErrorCode.INVALID_REQUEST))
        return token_wire.envelope_response(inner_header, response)

    async def _controller_registration(self, header, body):
        endpoints = [(l.name, l.host, l.port, l.security_protocol) for l in body.listeners]
        try:
            await self.controller.register_controller(body.controller_id, body.incarnation_id,
                                                      endpoints)
        except ApiError as exc:
            return m.ControllerRegistrationResponse(error_code=int(exc.code),
                                                    error_message=exc.message)
        return m.ControllerRegistrationResponse(error_code=0, error_message=None)

    async def _describe_cluster(self, header, body):
        """KIP-919: a controller lists the registered controllers (admin clients bootstrapped
        with --bootstrap-controller); brokers are asked on a broker listener."""
        Response = m.DescribeClusterResponse
        image = self.controller.image
        refused = refused_endpoint_type(header, body, CONTROLLERS_ENDPOINT_TYPE)
        if refused is not None:
            return refused
        name = (self.config.controller_listener_names or [""])[0]
        brokers = []
        for controller in sorted(image.controllers.values(), key=lambda c: c.controller_id):
            endpoint = next((e for e in controller.endpoints if e.name == name), None)
            if endpoint is not None:
                brokers.append(Response.DescribeClusterBroker(
                    broker_id=controller.controller_id, host=endpoint.host, port=endpoint.port,
                    rack=None))
        leader = self.controller.leader_id
        return Response(error_code=0, error_message=None, endpoint_type=CONTROLLERS_ENDPOINT_TYPE,
                        cluster_id=image.cluster_id, controller_id=leader, brokers=brokers,
                        cluster_authorized_operations=-(2**31))

    async def _describe_quorum(self, header, body):
        """v2 names every voter's controller listener in Nodes (KIP-853: how brokers and admin
        clients find the controllers)."""
        response = await admin.describe_quorum(self.controller, body)
        names = self.config.controller_listener_names
        if header.api_version >= 2 and names and response.topics \
                and not response.topics[0].partitions[0].error_code:
            R = m.DescribeQuorumResponse
            response.nodes = [R.Node(node_id=node, listeners=[
                R.Listener(name=names[0], host=host, port=port)])
                for node, (host, port) in sorted(self.voters.items())]
        return response
