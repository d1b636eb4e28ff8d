"""A broker's life as the controller sees it: registration, heartbeats, controlled shutdown.

``BrokerLifecycle(broker)``:

- ``await register()``: BrokerRegistration (listeners, rack, supported features, a fresh incarnation
  id) until the active controller accepts it, then heartbeats until the broker has caught up with the
  metadata log and is unfenced, and its own image shows it unfenced. Without a reachable quorum it keeps trying (never exits), logs so at
  most every ``LOG_EVERY_S`` and reports it on the readiness condition ``controller``.
- ``heartbeat_loop()``: BrokerHeartbeat every ``broker.heartbeat.interval.ms`` with the applied metadata
  offset; a broker the controller forgot (STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED) registers again.
- ``await controlled_shutdown(timeout)``: heartbeats with WantShutDown until the controller answers
  ShouldShutDown (it has moved this broker's leaderships away) or the time is up.
"""

from __future__ import annotations

import logging
import uuid

import trio

from protocol import ErrorCode

from broker.config import ConfigError
from broker.controller.errors import ApiError

log = logging.getLogger("odradek.cluster")

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
LOG_EVERY_S = 10.0
RETRY_S = 0.2
IMAGE_UNFENCE_WAIT_S = 5.0     # the unfence record is committed already: it comes in milliseconds
IMAGE_POLL_S = 0.01
_REREGISTER = (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED)


class BrokerLifecycle:
    def __init__(self, broker):
        self.broker = broker
        self.controller = broker.controller
        self.node_id = broker.node_id
        self.incarnation_id = uuid.uuid4()
        self.fenced = True
        self.want_shutdown = False
        self.should_shut_down = False
        self._last_log: dict[str, float] = {}

    @property
    def multi_node(self) -> bool:
        return self.broker.config.multi_node

    def _log_limited(self, key: str, message: str, *args) -> None:
        now = trio.current_time()
        if now - self._last_log.get(key, -LOG_EVERY_S) >= LOG_EVERY_S:
            self._last_log[key] = now
            log.warning(message, *args)

    def _not_ready(self, reason: str) -> None:
        self.broker.health.set("controller", False, reason)

    # -- registration ------------------------------------------------------------------------------
    async def register(self) -> None:
        while True:
            self._not_ready("broker registration: waiting for the active controller")
            try:
                await self._register_once()
            except ApiError as exc:
                if exc.code == ErrorCode.INCONSISTENT_CLUSTER_ID:
                    raise ConfigError(f"cluster id {self.controller.cluster_id} (meta.properties) "
                                      "differs from the metadata quorum's") from None
                reason = f"broker registration failed: {ErrorCode(exc.code).name}: {exc.message}"
                self._not_ready(reason)
                self._log_limited("register", "%s; retrying", reason)
                await trio.sleep(RETRY_S)
                continue
            if await self._until_unfenced():
                self.broker.health.set("controller", True)
                return

    async def _register_once(self) -> None:
        broker = self.broker
        endpoints = [(l.name, l.host, l.port, SECURITY_PROTOCOL_IDS[l.security_protocol])
                     for l in broker.advertised_listeners()]
        rack = broker.config["broker.rack"]
        if self.multi_node:
            from broker.controller.features import SUPPORTED_FEATURES

            features = [(name, low, high) for name, (low, high) in sorted(SUPPORTED_FEATURES.items())]
            epoch = await self.controller.register_broker(self.node_id, self.incarnation_id,
                                                          endpoints, rack=rack, features=features)
        else:
            epoch = await self.controller.register_broker(self.node_id, self.incarnation_id,
                                                          endpoints, rack=rack)
        broker.broker_epoch = epoch
        log.info("registered as broker %d (epoch %d)", self.node_id, epoch)

    async def _until_unfenced(self) -> bool:
        """Heartbeat quickly until unfenced; False when the registration must be redone."""
        while True:
            if self.multi_node:
                with trio.move_on_after(1.0):   # the registration record reaches our image
                    await self.controller.local.wait_applied(self.broker.broker_epoch + 1)
            try:
                result = await self._heartbeat()
            except ApiError as exc:
                if exc.code in _REREGISTER:
                    return False
                reason = f"heartbeat failed: {ErrorCode(exc.code).name}"
                self._not_ready(reason)
                self._log_limited("unfence", "%s; retrying", reason)
                await trio.sleep(RETRY_S)
                continue
            if not result.is_fenced:
                if self.multi_node:
                    await self._until_image_unfenced()
                return True
            self._not_ready("registered, fenced until caught up with the metadata log")
            await trio.sleep(RETRY_S)

    async def _until_image_unfenced(self) -> None:
        """The controller has unfenced this broker: wait (bounded) until its own image says so too
        before clients get in. Metadata lists the live brokers of the answering broker's image; a
        Kafka broker serving clients is always among them. After every node restarted, a broker a
        step behind its unfencing listed none, and librdkafka, told the cluster has no brokers,
        dropped every one it knew (bootstrap ones too) and never produced again."""
        with trio.move_on_after(IMAGE_UNFENCE_WAIT_S):
            while True:
                me = self.broker.image.brokers.get(self.node_id)
                if me is not None and not me.fenced and me.epoch == self.broker.broker_epoch:
                    return
                await trio.sleep(IMAGE_POLL_S)

    # -- heartbeats --------------------------------------------------------------------------------
    async def _heartbeat(self):
        result = await self.controller.heartbeat(
            self.node_id, self.broker.broker_epoch, self.broker.image.offset,
            want_shutdown=self.want_shutdown)
        self.fenced = result.is_fenced
        self.should_shut_down = result.should_shut_down
        return result

    async def heartbeat_loop(self) -> None:
        interval = self.broker.config["broker.heartbeat.interval.ms"] / 1000
        while True:
            await trio.sleep(interval)
            try:
                await self._heartbeat()
            except ApiError as exc:
                if exc.code in _REREGISTER and not self.want_shutdown:
                    log.warning("the controller forgot this broker (%s): registering again",
                                ErrorCode(exc.code).name)
                    self.incarnation_id = uuid.uuid4()
                    await self.register()
                    continue
                self._log_limited("heartbeat", "broker heartbeat failed: %s: %s",
                                  ErrorCode(exc.code).name, exc.message)
            except Exception:
                log.exception("broker heartbeat failed")

    # -- controlled shutdown -----------------------------------------------------------------------
    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move our leaderships away; True once it says we may go."""
        self.want_shutdown = True
        with trio.move_on_after(timeout_s):
            while True:
                try:
                    if (await self._heartbeat()).should_shut_down:
                        log.info("controlled shutdown: the controller released this broker")
                        return True
                except ApiError as exc:
                    self._log_limited("shutdown", "controlled shutdown heartbeat failed: %s",
                                      ErrorCode(exc.code).name)
                await trio.sleep(RETRY_S)
        log.warning("controlled shutdown: no release from the controller within %.0f s; "
                    "stopping anyway", timeout_s)
        return False
