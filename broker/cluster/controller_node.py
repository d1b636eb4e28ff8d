"""A dedicated controller (``process.roles=controller``): a metadata quorum voter and nothing else.

It serves only its controller listener: the KRaft RPCs to the other voters and ``ControllerApi`` to
brokers. ``ControllerNode.run_until_signalled(config, announce)`` is what ``odradek serve`` runs for
such a node; SIGTERM hands leadership over (EndQuorumEpoch) and exits 0. ``metrics.port`` serves
/metrics, /healthz and /readyz (ready once this node knows the active controller).
"""

from __future__ import annotations

import functools
import logging
import signal

import trio

from broker.config import BrokerConfig, validate_topic_configs
from broker.health import Health, serve_ops_http
from broker.metrics import BrokerMetrics, broker_sources

from .metadata import controller_settings, open_metadata

log = logging.getLogger("odradek.cluster")

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4


class ControllerNode:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id = config.node_id
        self.controller = None
        self.partitions = None
        self.coordinators: dict = {}
        self.metrics_port: int | None = None
        self.metrics = BrokerMetrics(config.node_id)
        self.health = Health(conditions=("quorum",), metrics=self.metrics)
        self._shutdown = trio.Event()

    def listening(self) -> list[tuple[str, str]]:
        listener = str(self.config.controller_listener)
        return [(listener, listener)]

    def request_shutdown(self) -> None:
        self._shutdown.set()

    def validate_config(self, resource_type: int, name: str, configs) -> None:
        if resource_type == TOPIC_RESOURCE:
            validate_topic_configs(configs)
        elif resource_type == BROKER_RESOURCE:
            self.config.validate_dynamic(configs)

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        from broker.server import _metadata_dir

        async with open_metadata(self.config, _metadata_dir(self.config),
                                 controller_settings(self.config),
                                 self.validate_config) as controller:
            self.controller = controller
            self.metrics.set_sources(controller=broker_sources(self)["controller"])
            self.health.add_check("quorum", controller.metadata_status)
            async with trio.open_nursery() as nursery:
                if self.config["metrics.port"] >= 0:
                    self.metrics_port = await nursery.start(functools.partial(
                        serve_ops_http, self.config["metrics.port"], health=self.health,
                        metrics=self.metrics))
                task_status.started(self)
                await self._shutdown.wait()
                self.health.begin_shutdown()
                nursery.cancel_scope.cancel()
        log.info("controller %d stopped", self.node_id)

    @classmethod
    async def run_until_signalled(cls, config: BrokerConfig, announce=None) -> None:
        node = cls(config)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                async def wait_for_signal():
                    async for signum in signals:
                        log.info("received %s, shutting down", signal.Signals(signum).name)
                        node.request_shutdown()
                        return
                nursery.start_soon(wait_for_signal)
                await nursery.start(node.serve)
                if announce is not None:
                    announce(node)
                await node._shutdown.wait()
                nursery.cancel_scope.cancel()
