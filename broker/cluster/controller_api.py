"""The requests a controller answers on its controller listener besides the KRaft RPCs.

Brokers send them here: BrokerRegistration (62), BrokerHeartbeat (63), UnregisterBroker (64),
AllocateProducerIds (67), AlterPartition (56), DescribeQuorum (55), and the admin mutations they
forward (CreateTopics 19, DeleteTopics 20, CreatePartitions 37, AlterConfigs 33,
IncrementalAlterConfigs 44, ElectLeaders 43). A controller that is not active answers NOT_CONTROLLER, which makes the
sender retry on the new one. ``ControllerApi(controller, config).handle(header, body)`` is the
transport's ``admin_handler``.
"""

from __future__ import annotations

import logging

from protocol import messages as m

from broker.controller import admin
from broker.controller.errors import ApiError
from broker.handlers.cluster import handle_elect_leaders
from broker.handlers.reassignments import (
    handle_alter_partition_reassignments, handle_list_partition_reassignments,
)
from broker.handlers.topics import (
    handle_create_partitions, handle_create_topics, handle_delete_topics,
)

log = logging.getLogger("odradek.cluster")


class _HandlerContext:
    """Just enough of a broker request context for the topic handlers to run on a controller."""

    def __init__(self, controller, config):
        self.controller = controller
        self.config = config


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
        }

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
        resources = [(r.resource_type, r.resource_name, {c.name: c.value for c in r.configs})
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
