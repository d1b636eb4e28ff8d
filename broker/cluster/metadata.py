"""This node's replica of the metadata log, opened from Kafka's quorum settings.

``open_metadata(config, log_dir, settings, validator)`` (an async context manager) yields what the
broker calls ``controller``:

- no ``controller.quorum.voters`` / ``bootstrap.servers``: the single-node ``Controller`` (a quorum of
  one, as before);
- otherwise a ``ClusterController`` over a ``Controller`` that is a voter (process.roles has
  controller: it serves the KRaft RPCs and ``ControllerApi`` on the controller listener) or an observer
  (broker only: it fetches the log from the voters and applies it to its image).

Cluster id: ``cluster.id`` in ``<log dir>/meta.properties`` when the node was formatted (or ran
before); a fresh controller derives it from the voter set (so controllers started with the same
``controller.quorum.voters`` agree), a fresh broker asks the controllers for theirs (DescribeCluster on
the controller listener); either writes it there. A node whose id differs from the quorum's is
refused by the voters (INCONSISTENT_CLUSTER_ID), and ``open_metadata`` raises ``ConfigError``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import os
import uuid
from contextlib import asynccontextmanager

import trio

from broker.config import ConfigError
from broker.config.quorum import standalone_voters
from broker.controller.controller import Controller
from broker.controller.raft import RaftConfig
from broker.controller.transport import TcpTransport
from broker.security.controller_listener import ControllerListenerGuard
from broker.security.streams import controller_security, open_stream

from .client import ControllerClient
from .controller_api import ControllerApi
from .discovery import discover_voters, quorum_cluster_id
from .liveness import SECURITY_PROTOCOL_IDS
from .router import ClusterController

log = logging.getLogger("odradek.cluster")


def derived_cluster_id(voters: dict[int, tuple[str, int]]) -> str:
    """A cluster id every node computes alike from the voter set (22 base64url characters)."""
    text = ",".join(f"{node}@{host}:{port}" for node, (host, port) in sorted(voters.items()))
    digest = hashlib.sha256(b"odradek-cluster:" + text.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _read_cluster_id(log_dir: str) -> str | None:
    try:
        with open(os.path.join(log_dir, "meta.properties")) as handle:
            for line in handle:
                key, _, value = line.strip().partition("=")
                if key == "cluster.id" and value:
                    return value
    except FileNotFoundError:
        return None
    return None


def _write_meta_properties(log_dir: str, cluster_id: str, node_id: int) -> None:
    path = os.path.join(log_dir, "meta.properties")
    with open(path + ".tmp", "w") as handle:
        handle.write(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)


def controller_settings(config):
    from broker.controller.controller import ControllerSettings
    from broker.controller.delegation_tokens import TokenSettings
    from broker.security.delegation_tokens import token_secret_key

    return ControllerSettings(
        num_partitions=config["num.partitions"],
        default_replication_factor=config["default.replication.factor"],
        delete_topic_enable=config["delete.topic.enable"],
        broker_session_timeout_ms=config["broker.session.timeout.ms"],
        unclean_leader_election_enable=config["unclean.leader.election.enable"],
        auto_leader_rebalance_enable=config["auto.leader.rebalance.enable"],
        leader_imbalance_check_interval_s=config["leader.imbalance.check.interval.seconds"],
        leader_imbalance_per_broker_percentage=config["leader.imbalance.per.broker.percentage"],
        tokens=TokenSettings(
            secret_key=token_secret_key(config),
            max_lifetime_ms=config["delegation.token.max.lifetime.ms"],
            renew_lifetime_ms=config["delegation.token.expiry.time.ms"],
            check_interval_ms=config["delegation.token.expiry.check.interval.ms"]))


def raft_config(config) -> RaftConfig:
    return RaftConfig(election_timeout=config["controller.quorum.election.timeout.ms"] / 1000,
                      fetch_timeout=config["controller.quorum.fetch.timeout.ms"] / 1000,
                      request_timeout=config["controller.quorum.request.timeout.ms"] / 1000)


@asynccontextmanager
async def open_metadata(config, log_dir: str, settings, validator):
    node_id = config.node_id
    if not config.multi_node:
        async with Controller.open(log_dir, node_id=node_id, settings=settings,
                                   config_validator=validator) as controller:
            yield controller
        return
    os.makedirs(log_dir, exist_ok=True)
    # the controller listener's security, both ways (ConfigError here stops start-up)
    security = controller_security(config)
    guard = ControllerListenerGuard.for_config(config) if "controller" in config.roles else None
    voters = (config.quorum_voters or standalone_voters(config)
              or await discover_voters(config, security))
    cluster_id = _read_cluster_id(log_dir)
    if cluster_id is None:
        if "controller" in config.roles:
            cluster_id = derived_cluster_id(voters)
        else:
            cluster_id = await quorum_cluster_id(voters, security)
        _write_meta_properties(log_dir, cluster_id, node_id)
    bind = None
    if "controller" in config.roles:
        listener = config.controller_listener
        bind = (listener.host, listener.port)
    transport = TcpTransport(node_id, voters, cluster_id, bind=bind, guard=guard,
                             connect=functools.partial(open_stream, security=security,
                                                       client_id=f"odradek-raft-{node_id}"))
    async with Controller.open(log_dir, node_id=node_id, cluster_id=cluster_id, settings=settings,
                               config_validator=validator, voters=voters, transport=transport,
                               raft_config=raft_config(config)) as local:
        if guard is not None:
            guard.attach(local)
        client, lifecycle = (ControllerClient(lambda: voters, lambda: local.leader_id,
                                              client_id=f"odradek-node-{node_id}",
                                              security=security)
                             for _ in range(2))
        for each in (client, lifecycle):
            local.add_leader_listener(lambda epoch, leader, each=each: each.leader_changed())
        transport.admin_handler = ControllerApi(local, config, voters).handle
        cluster = ClusterController(local, client, lifecycle)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_refuse_foreign_cluster, transport)
            nursery.start_soon(_report_quorum_loss, cluster)
            if "controller" in config.roles:
                nursery.start_soon(_keep_controller_registered, cluster, config, voters[node_id])
            try:
                yield cluster
            finally:
                nursery.cancel_scope.cancel()
                with trio.CancelScope(shield=True):
                    await client.aclose()
                    await lifecycle.aclose()
                    if local.is_active:          # hand leadership over before going away
                        with trio.move_on_after(1.0):
                            await local.resign()
                            await trio.sleep(0.2)   # let EndQuorumEpoch reach the voters


async def _keep_controller_registered(cluster: ClusterController, config, address) -> None:
    """ControllerRegistration with this controller's listener, again whenever the active
    controller's image lacks this incarnation (a fresh log, a restart)."""
    from broker.controller.errors import ApiError

    listener = config.controller_listener
    endpoints = [(listener.name, address[0], address[1],
                  SECURITY_PROTOCOL_IDS[listener.security_protocol])]
    incarnation = uuid.uuid4()
    while True:
        known = cluster.image.controllers.get(config.node_id)
        if cluster.leader_id >= 0 and (known is None or known.incarnation_id != incarnation):
            try:
                await cluster.register_controller(config.node_id, incarnation, endpoints)
            except ApiError as exc:
                log.debug("controller registration failed: %s", exc)
        await trio.sleep(1.0)


QUORUM_GRACE_S = 5.0       # an election or a start-up is not worth a warning
QUORUM_LOG_EVERY_S = 30.0


async def _report_quorum_loss(cluster: ClusterController) -> None:
    """Say in the log when this node cannot reach the metadata quorum (as /readyz does), again every
    QUORUM_LOG_EVERY_S while it lasts, and when it is reached again; the Raft core keeps retrying."""
    lost_since = last_said = None
    while True:
        await trio.sleep(1.0)
        current, why = cluster.metadata_status()
        now = trio.current_time()
        if current:
            if last_said is not None:
                log.info("metadata quorum reached again after %.0f s: active controller %d",
                         now - lost_since, cluster.leader_id)
            lost_since = last_said = None
            continue
        lost_since = now if lost_since is None else lost_since
        if now - lost_since >= QUORUM_GRACE_S and (
                last_said is None or now - last_said >= QUORUM_LOG_EVERY_S):
            log.warning("%s for %.0f s; retrying", why, now - lost_since)
            last_said = now


async def _refuse_foreign_cluster(transport: TcpTransport) -> None:
    await transport.inconsistent_cluster_event.wait()
    raise ConfigError(transport.inconsistent_cluster)
