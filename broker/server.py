"""The broker process: components wired together, listeners, and an orderly shutdown.

``Broker(config)`` owns the controller (this node's replica of the metadata log: a quorum of one, or a
voter / observer of a cluster's quorum, see ``broker.cluster``), the storage ``LogManager``, the
``PartitionManager`` (leadership, high watermarks, appends, long-poll wake-ups), the fetch-session cache
and the handler registry. ``await broker.serve(task_status=...)`` runs it; ``broker.request_shutdown()``
makes ``serve`` stop accepting, finish in-flight requests, flush and checkpoint, then return.
``Broker.run_until_signalled`` is what ``odradek serve`` runs: the same, ended by SIGTERM / SIGINT.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import signal
import time
from typing import Callable

import trio

import protocol
from broker.config import INT_MAX, BrokerConfig, Listener, validate_topic_configs
from broker.config.client_metrics import validate_client_metrics
from broker.config.group_configs import validate_group_configs
from broker.config.ip_overrides import limits_by_address
from broker.log_dirs import watch_log_dirs
from broker.connection import RequestMemory
from broker.fetch_session import FetchSessionCache
from broker.frame_buffers import FrameBuffers
from broker.handlers import load_registry
from broker.health import Health, serve_ops_http
from broker.logs import RequestLogger
from broker.metrics import BrokerMetrics, broker_sources
from broker.partitions import PartitionManager
from broker.quotas import BrokerQuotas
from broker.quotas.metrics import QuotaCollector
from broker.security.authorizer import AuthorizerMetricsCollector, StandardAuthorizer
from broker.security.audit import AuthenticationAudit
from broker.security.delegation_tokens import TokenCredentials, token_secret_key
from broker.security.dynamic import check_listener_update
from broker.security.listener import ListenerSecurity
from broker.security.streams import inter_broker_security

log = logging.getLogger("odradek.server")

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SHUTDOWN_GRACE_SECONDS = 10.0
CONTROLLED_SHUTDOWN_SECONDS = 10.0    # at most this long waiting for the controller's release
TOPIC_RESOURCE, BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 2, 4, 16, 32
# accept(2) errors that mean "overloaded, try again shortly" rather than a broken listener
_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}


class Broker:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id = config.node_id
        self.handlers = load_registry()
        self.fetch_sessions = FetchSessionCache()
        self.controller = None
        self.logs = None
        self.partitions: PartitionManager | None = None
        self.broker_epoch = -1
        self.lifecycle = None           # registration and heartbeats (broker.cluster.liveness)
        self.metrics_port: int | None = None
        self.metrics = BrokerMetrics(config.node_id)
        self.health = Health(metrics=self.metrics)
        # authorizer.class.name: None means no authorization (everything allowed), as Kafka.
        self.authorizer = StandardAuthorizer.from_config(config)
        if self.authorizer is not None:
            self.metrics.registry.register(AuthorizerMetricsCollector(self.authorizer))
        self.request_log = RequestLogger()
        self.request_memory = RequestMemory(config["queued.max.request.bytes"])
        self.frame_buffers = FrameBuffers()   # warm buffers for large request frames
        self.quotas = BrokerQuotas(config)
        self.metrics.registry.register(QuotaCollector(self.quotas))
        # authentication per listener (TLS contexts, SASL mechanisms); ConfigError stops start-up
        self.listener_security = {l.name: ListenerSecurity.for_listener(config, l)
                                  for l in config.client_listeners}
        # how replica fetchers and inter-broker requests reach the other brokers' listener
        self.inter_broker_security = inter_broker_security(config) if config.multi_node else None
        self.auth_audit = AuthenticationAudit()
        self.token_credentials = TokenCredentials(token_secret_key(config))   # delegation tokens
        self.metrics.registry.register(self.auth_audit)
        self._bound: list[tuple[Listener, int]] = []   # (listener, bound port)
        self._shutdown = trio.Event()
        self._draining = False
        self._connections: set = set()
        self._connections_per_ip: dict[str, int] = {}   # accepted and not yet closed
        self._open_connections = 0
        self._open_per_listener: dict[str, int] = {}
        self._slot_freed = trio.Event()
        self._connections_idle = trio.Event()
        self._connections_idle.set()
        self._listener_scopes: list[trio.CancelScope] = []
        self._connection_nursery: trio.Nursery | None = None
        # Coordinators (consumer groups, transactions) register themselves here by name so
        # handlers can reach them as ctx.coordinators["group"], etc.
        self.coordinators: dict[str, object] = {}
        self.startup_hooks: list[Callable] = _default_startup_hooks()

    # ---------------------------------------------------------------------------- public surface
    @property
    def image(self):
        """The current metadata image (immutable; take it once per request)."""
        return self.controller.image

    @property
    def cluster_id(self) -> str:
        return self.controller.cluster_id

    def listening(self) -> list[tuple[str, str]]:
        """(bound address, advertised address) per client listener, as printable strings."""
        advertised = {l.name: l for l in self.advertised_listeners()}
        out = []
        for listener, port in self._bound:
            bound = Listener(listener.name, listener.security_protocol, listener.host or "0.0.0.0",
                             port)
            out.append((str(bound), str(advertised[listener.name])))
        return out

    def advertised_listeners(self) -> list[Listener]:
        return self.config.advertised_listeners({l.name: port for l, port in self._bound})

    @property
    def port(self) -> int:
        """The first client listener's bound port (handy for tests)."""
        return self._bound[0][1]

    def finalized_features(self) -> dict[str, int]:
        return dict(self.image.features)

    def metadata_epoch(self) -> int:
        return max(self.image.offset, 0)

    def observe_request(self, header, seconds: float, response, queue_seconds: float = 0.0,
                        counted_error: int | None = None) -> None:
        """Metrics and the optional request log, once a handler has answered. `counted_error`:
        the handler counted its answer's errors itself (this is the first of them, or 0), so
        the answer is not walked for them."""
        try:
            api_key = header.request_api_key
            if counted_error is not None:
                code = counted_error
            else:
                code = 0 if response is None else self.metrics.count_response_errors(api_key, response)
            self.metrics.observe_answered(api_key, header.request_api_version, queue_seconds,
                                          seconds)   # errors counted just above
            if self.request_log.enabled:
                spec = protocol.API_SPECS.get(header.api_key)
                self.request_log.log(
                    spec.name if spec else str(header.api_key), header.api_version,
                    header.client_id, seconds,
                    error=protocol.ErrorCode(code).name if code else None,
                    correlation_id=header.correlation_id)
        except Exception:   # observability must never break a request
            log.debug("metrics hook failed", exc_info=True)

    @property
    def draining(self) -> bool:
        """Shutting down: long polls return at once."""
        return self._draining

    def record_produce(self, appended) -> None:
        """Metrics hook after a Produce (appended: [(partition, AppendResult, answer)])."""
        try:
            for partition, result, _, size in appended:
                self.metrics.record_produce(partition.topic,
                                            result.last_offset - result.first_offset + 1, size)
        except Exception:
            log.debug("metrics hook failed", exc_info=True)

    def record_fetch(self, reads) -> None:
        """Metrics hook after a Fetch."""
        try:
            for read in reads:
                if read.size and read.partition is not None:
                    self.metrics.record_fetch(read.partition.topic, read.size)
        except Exception:
            log.debug("metrics hook failed", exc_info=True)

    def request_shutdown(self) -> None:
        self._shutdown.set()

    async def run_blocking(self, function, *args):
        """Run blocking work (file I/O, fsync, compression) off the event loop."""
        return await trio.to_thread.run_sync(function, *args)

    def validate_config(self, resource_type: int, name: str, configs) -> None:
        """The controller's config validator: raise ConfigError (a ValueError) to refuse."""
        if resource_type == TOPIC_RESOURCE:
            validate_topic_configs(configs)
        elif resource_type == GROUP_RESOURCE:
            validate_group_configs(configs)
        elif resource_type == CLIENT_METRICS_RESOURCE:
            validate_client_metrics(configs)
        elif resource_type == BROKER_RESOURCE:
            self.config.validate_dynamic(configs, name)
            if name in ("", str(self.node_id)):   # TLS stores / SASL settings must load, as Kafka
                check_listener_update(self.config, self.listener_security, name == "", configs)

    # --------------------------------------------------------------------------------- running
    @classmethod
    async def run_until_signalled(cls, config: BrokerConfig, announce=None) -> None:
        broker = cls(config)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                started = False

                async def wait_for_signal():
                    async for signum in signals:
                        log.info("received %s, shutting down", signal.Signals(signum).name)
                        broker.request_shutdown()
                        if not started:      # still waiting for the quorum: nothing to drain
                            nursery.cancel_scope.cancel()
                        return
                async def serve_then_stop(task_status=trio.TASK_STATUS_IGNORED):
                    await broker.serve(task_status=task_status)   # drains before it returns
                    nursery.cancel_scope.cancel()                 # the signal watcher
                nursery.start_soon(wait_for_signal)
                await nursery.start(serve_then_stop)
                started = True
                if announce is not None:
                    announce(broker)

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        from broker.cluster.metadata import open_metadata

        config = self.config
        opening = time.monotonic()
        self.logs = await self.run_blocking(self._open_storage)
        self.metrics.set_recovery_duration(time.monotonic() - opening)
        try:
            async with trio.open_nursery() as ops:
                # /readyz answers from the start: a node waiting for its quorum says so.
                self.metrics.set_sources(**broker_sources(self))
                if config["metrics.port"] >= 0:
                    self.metrics_port = await ops.start(functools.partial(
                        serve_ops_http, config["metrics.port"], health=self.health,
                        metrics=self.metrics))
                if config.multi_node:
                    # Both say why until the quorum answers: the metadata check takes over once this
                    # node has its replica of the log, the registration once it is registered.
                    self.health.set("metadata", False,
                                    "waiting for the metadata quorum: unreachable so far")
                    self.health.set("controller", False, "waiting for the metadata quorum")
                async with open_metadata(config, _metadata_dir(config),
                                         self._controller_settings(),
                                         self.validate_config) as controller:
                    self.controller = controller
                    if config.multi_node:
                        self.health.add_check("metadata", controller.metadata_status)
                    await self._follow_metadata()
                    async with trio.open_nursery() as nursery:
                        async with trio.open_nursery() as connections:
                            self._connection_nursery = connections
                            await self._start(nursery)
                            task_status.started(self)
                            await self._shutdown.wait()
                            self.health.begin_shutdown()
                            if config.multi_node and self.lifecycle is not None:
                                await self.lifecycle.controlled_shutdown(
                                    CONTROLLED_SHUTDOWN_SECONDS)
                            await self._drain()
                            connections.cancel_scope.cancel()
                        nursery.cancel_scope.cancel()
                ops.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if self.partitions is not None:
                    await self.run_blocking(self.partitions.close)
                if self.logs is not None:
                    await self.run_blocking(self.logs.close)   # flush, checkpoints, clean marker
            log.info("broker %d stopped", self.node_id)

    def _open_storage(self):
        from storage import LogManager

        for directory in self.config.log_dirs:
            os.makedirs(directory, exist_ok=True)
        return LogManager(self.config.log_dirs, self.config.topic_defaults())

    def _controller_settings(self):
        from broker.cluster.metadata import controller_settings

        return controller_settings(self.config)

    async def _follow_metadata(self) -> None:
        """Dynamic configs from the metadata log, then the partition logs the image places here."""
        image = self.image
        self.config.set_dynamic(image.broker_configs.get("", {}),
                                image.broker_configs.get(str(self.node_id), {}))
        self.logs.set_defaults(self.config.topic_defaults())
        if self.authorizer is not None:   # the ACLs are in the image before any request
            self.authorizer.load(image.acls)
            self.controller.add_listener(self.authorizer.on_image_change)
        self.partitions = PartitionManager(self)
        self.controller.add_listener(self.partitions.on_image_change)
        self.quotas.load(image.client_quotas)
        self.controller.add_listener(self.quotas.on_image_change)
        await self.partitions.load_image(image, delete_orphans=not self.config.multi_node)

    async def _start(self, nursery: trio.Nursery) -> None:
        self.metrics.set_sources(**broker_sources(self))
        watch_log_dirs(self)
        self.health.set("recovery", True)
        if self.config.multi_node:
            from broker.replication.readiness import ReplicasCaughtUp

            # ready only once back in sync, so a rolling restart stops the next broker safely
            self.health.add_check("replicas", ReplicasCaughtUp(self))
        bound = await self._bind_listeners()
        await self._register(nursery)   # leading its partitions again before clients get in
        if self.config.multi_node:
            # registered and unfenced: the image covers every topic deleted while we were down
            await self.partitions.delete_orphans(self.image)
        self._start_serving(nursery, bound)
        self.health.set("listeners", True)
        for hook in self.startup_hooks:
            await hook(self, nursery)
        self.partitions.start_background(nursery)

    async def _bind_listeners(self) -> list:
        """Bind every client listener (port 0 gets a free port); serving starts later."""
        bound = []
        for listener in self.config.client_listeners:
            try:
                sockets = await trio.open_tcp_listeners(
                    listener.port, host=listener.host or None,
                    backlog=self.config["socket.listen.backlog.size"])
            except OSError as exc:
                raise OSError(exc.errno, f"cannot listen on {listener}: {exc.strerror}") from None
            port = sockets[0].socket.getsockname()[1]
            self._bound.append((listener, port))
            bound.append((listener, sockets))
        return bound

    def _start_serving(self, nursery: trio.Nursery, bound: list) -> None:
        for listener, sockets in bound:
            nursery.start_soon(self._serve_listener, listener, sockets)
            log.info("listening on %s (port %d)", listener,
                     sockets[0].socket.getsockname()[1])

    async def _serve_listener(self, listener: Listener, sockets) -> None:
        scope = trio.CancelScope()
        self._listener_scopes.append(scope)
        with scope:
            async with trio.open_nursery() as accepting:
                for socket_listener in sockets:
                    accepting.start_soon(self._accept_loop, listener, socket_listener)

    async def _accept_loop(self, listener: Listener, socket_listener) -> None:
        """Accept connections under Kafka's quotas: at max.connections the acceptor waits for a
        free slot (the client waits in the listen backlog); a connection from an address already
        at max.connections.per.ip is closed right after accept."""
        async with socket_listener:
            while True:
                await self._wait_for_slot(listener)
                try:
                    stream = await socket_listener.accept()
                except OSError as exc:
                    if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                        raise
                    log.error("accept on %s failed: %s; retrying", listener, exc.strerror)
                    await trio.sleep(0.1)
                    continue
                try:
                    await self._wait_for_slot(listener)   # a limit lowered while accept() waited
                except BaseException:
                    await trio.aclose_forcefully(stream)  # shutting down: do not leak the socket
                    raise
                # KIP-612: over the connection creation rate the acceptor waits; a connection
                # from an IP over its own rate is closed after its throttle time.
                delay_ms = self.quotas.connections.accept_delay_ms(listener.name,
                                                                   len(self._bound))
                if delay_ms:
                    await trio.sleep(delay_ms / 1000)
                address = _peer_address(stream)
                ip_throttle_ms = self.quotas.connections.ip_throttle_ms(address)
                if ip_throttle_ms:
                    log.info("closing connection from %s in %d ms: connection_creation_rate "
                             "exceeded", address, ip_throttle_ms)
                    self._connection_nursery.start_soon(_close_after, stream, ip_throttle_ms)
                    continue
                if self._connections_per_ip.get(address, 0) >= self._ip_connection_limit(address):
                    log.info("closing connection from %s: max.connections.per.ip reached",
                             address)
                    await trio.aclose_forcefully(stream)
                    continue
                self._open_connections += 1
                self._open_per_listener[listener.name] = self._open_per_listener.get(listener.name, 0) + 1
                self._connections_per_ip[address] = self._connections_per_ip.get(address, 0) + 1
                self._connection_nursery.start_soon(self._handle_connection, listener, stream,
                                                    address)

    async def _wait_for_slot(self, listener: Listener) -> None:
        """Wait while max.connections or the listener's own max.connections is reached."""
        while (self._open_connections >= self.config["max.connections"]
               or self._open_per_listener.get(listener.name, 0) >= self._listener_connection_limit(listener)):
            with trio.move_on_after(1.0):   # also notices a raised (dynamic) limit
                await self._slot_freed.wait()

    def _listener_connection_limit(self, listener: Listener) -> int:
        """Kafka's per-listener `listener.name.<listener>.max.connections` (static or dynamic)."""
        key = f"listener.name.{listener.name.lower()}.max.connections"
        if not self.config.is_set(key):
            return INT_MAX
        try:
            return int(self.config.get(key))
        except (TypeError, ValueError):
            return INT_MAX   # refused at alter time; a bad static value is caught at start-up

    def _ip_connection_limit(self, address: str) -> int:
        """max.connections.per.ip, or this address's entry in max.connections.per.ip.overrides."""
        overrides = limits_by_address(self.config["max.connections.per.ip.overrides"])
        return overrides.get(address, self.config["max.connections.per.ip"])

    async def _handle_connection(self, listener: Listener, stream: trio.SocketStream,
                                 address: str) -> None:
        from broker.connection import Connection
        from broker.security.tls_connection import TlsConnection

        try:
            if self._draining:
                return
            security = self.listener_security.get(listener.name)
            if security is not None and security.uses_tls:
                connection = TlsConnection(self, stream, listener.name, security)
            else:
                connection = Connection(self, stream, listener.name, security)
            if not self._connections:
                self._connections_idle = trio.Event()
            self._connections.add(connection)
            self.metrics.connection_opened(listener.name)
            try:
                await connection.serve()
            finally:
                self.metrics.connection_closed(listener.name)
                self._connections.discard(connection)
                if not self._connections:
                    self._connections_idle.set()
        finally:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            self._open_connections -= 1
            self._open_per_listener[listener.name] -= 1
            remaining = self._connections_per_ip.pop(address) - 1
            if remaining:
                self._connections_per_ip[address] = remaining
            self._slot_freed.set()
            self._slot_freed = trio.Event()

    async def _register(self, nursery: trio.Nursery) -> None:
        from broker.cluster.liveness import BrokerLifecycle

        self.lifecycle = BrokerLifecycle(self)
        await self.lifecycle.register()
        nursery.start_soon(self.lifecycle.heartbeat_loop)

    async def _drain(self) -> None:
        """Stop accepting, let in-flight requests finish (long polls return early), then return."""
        self._draining = True
        for scope in self._listener_scopes:
            scope.cancel()
        self.partitions.wake_all_fetchers()
        groups = self.coordinators.get("group")
        if groups is not None:      # a parked JoinGroup/SyncGroup would hold the drain for a whole rebalance
            groups.answer_waiting_members()
        for connection in list(self._connections):
            connection.stop_reading()
        with trio.move_on_after(SHUTDOWN_GRACE_SECONDS):
            await self._connections_idle.wait()
        self._connection_nursery.cancel_scope.cancel()


def _default_startup_hooks() -> list[Callable]:
    """The coordinators load their internal topics at start-up (decided transactions complete)."""
    try:
        from broker.coordinator.service import CoordinatorService
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("broker.coordinator"):
            return []
        raise
    return [CoordinatorService.startup_hook]


async def _close_after(stream: trio.SocketStream, delay_ms: int) -> None:
    try:
        await trio.sleep(delay_ms / 1000)
    finally:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)


def _peer_address(stream: trio.SocketStream) -> str:
    try:
        return stream.socket.getpeername()[0]
    except OSError:
        return "?"


def _metadata_dir(config: BrokerConfig) -> str:
    """Where the controller keeps ``__cluster_metadata-0/`` and ``meta.properties``.

    Inside a log dir it goes one level down (``<dir>/metadata/``): storage opens every
    ``<name>-<n>`` directory of a log dir as a partition log, and the metadata log is not one.
    """
    chosen = os.path.abspath(config.metadata_log_dir)
    if chosen in (os.path.abspath(d) for d in config.log_dirs):
        return os.path.join(chosen, "metadata")
    return chosen
