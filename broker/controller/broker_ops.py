"""Broker lifecycle on the active controller: registration, heartbeats, session expiry, unregistration.

The decisions are `brokers`' pure functions; this mixin runs them under the controller's lock on the
latest committed image and commits their records.
"""

from __future__ import annotations

import logging
import uuid
from typing import Sequence

import trio

from . import brokers
from .errors import ApiError, ErrorCode
from .features import registration_problem

log = logging.getLogger(__name__)


class BrokerOps:
    """Mixed into Controller: needs self._image, self._settings, self._lock, self._sessions,
    self._quorum, self._commit, self._require_leader and self.node_id."""

    def _policy(self) -> brokers.Policy:
        return brokers.Policy(unclean_default=self._settings.unclean_leader_election_enable,
                              node_id=self.node_id)

    async def register_broker(self, broker_id: int, incarnation_id: uuid.UUID,
                              endpoints: Sequence[tuple[str, str, int, int]],
                              rack: str | None = None, features=None) -> int:
        """Register (or re-register) a broker, fenced until its first heartbeat; returns its epoch.

        `endpoints` are (listener name, host, port, security protocol id). A new incarnation of a
        registered broker first loses its leaderships, exactly as when it is fenced. `features`
        ({name: (min, max)}, from a BrokerRegistration) must cover every finalized feature level
        (UNSUPPORTED_VERSION otherwise); None: this process's own broker, which runs this software.
        """
        await self._require_leader()
        async with self._lock:
            if features is not None:
                problem = registration_problem(self._image.features, features)
                if problem is not None:
                    log.warning("broker %d refused: %s", broker_id, problem)
                    raise ApiError(ErrorCode.UNSUPPORTED_VERSION, problem)
            epoch = self._quorum.end_offset    # Kafka uses the registration record's offset
            now = trio.current_time()
            batch = brokers.registration_records(self._image, self._sessions, broker_id, incarnation_id,
                                                 endpoints, rack, epoch, now, self._policy(),
                                                 self_id=self.node_id)
            if isinstance(batch, int):
                return batch                     # a retried registration of the same process
            offset = await self._commit(batch)
            if offset != epoch:
                raise ApiError(ErrorCode.NOT_CONTROLLER, "The metadata log moved during registration.")
            self._sessions.touch(broker_id, trio.current_time())
            return epoch

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_fence: bool = False, want_shutdown: bool = False) -> brokers.HeartbeatResult:
        """Keep a broker's session alive and move it between fenced, unfenced and controlled shutdown
        (see `brokers`); `should_shut_down` comes once it leads nothing and the others know it."""
        await self._require_leader()
        # Liveness counts from arrival: a heartbeat queued behind other writes (a burst of ISR
        # changes on a loaded machine) must not let its broker's session run out while it waits.
        known = self._image.brokers.get(broker_id)
        if known is not None and known.epoch == broker_epoch:
            self._sessions.touch(broker_id, trio.current_time())
        async with self._lock:
            records, result, entering = brokers.heartbeat(
                self._image, self._sessions, broker_id, broker_epoch, metadata_offset, want_fence,
                want_shutdown, trio.current_time(), self._policy())
            offset = await self._commit(records)
            if entering:
                self._sessions.shutdown_offset[broker_id] = offset
            return result

    async def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker: the broker leaves every ISR and leadership, then the registry."""
        await self._require_leader()
        async with self._lock:
            await self._commit(brokers.unregister_records(self._image, broker_id, self._policy()))
            self._sessions.last_seen.pop(broker_id, None)

    async def _fence_expired_brokers(self) -> None:
        self._sessions.start(self._image, trio.current_time())   # everyone gets a fresh session
        was_leader = self._quorum.is_leader
        while True:
            await trio.sleep(min(1.0, self._settings.broker_session_timeout_ms / 4000))
            if not self._quorum.is_leader:
                was_leader = False
                continue
            if not was_leader:           # a new term of leadership starts everyone's session afresh
                self._sessions.start(self._image, trio.current_time())
                was_leader = True
                continue
            async with self._lock:
                records = brokers.expire_sessions(self._image, self._sessions, trio.current_time(),
                                                  self._policy())
                if records:
                    log.info("fencing brokers whose sessions expired: %s", sorted(
                        rec.broker_id for rec in records if type(rec).__name__ == "BrokerRegistrationChangeRecord"))
                try:
                    await self._commit(records)
                except ApiError:
                    pass                 # lost leadership meanwhile; the next leader decides
