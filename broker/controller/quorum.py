"""The trio driver that runs the sans-IO Raft core against the disk (and, with a transport, the network).

Contract used by the controller:
- `start(apply_snapshot, apply_entry, prepare_entries=None)` loads the durable state and replays what
  is committed; `await prepare_entries(entries)`, when given, runs before committed entries are handed
  to `apply_entry` (the controller works out large ones off the event loop there);
- `run()` (in a nursery) keeps the core's timers and, with a transport, its messages going;
- `await propose(data) -> offset` returns once the entry is durable, committed by a voter majority AND
  handed to `apply_entry`; it raises ApiError(NOT_CONTROLLER) if this node is not (or stops being) the
  leader before the entry commits;
- `is_leader`, `leader_id`, `epoch`, `end_offset`, `describe()` describe this node's role.

Effects run strictly in order; consecutive persistence effects are written (and fsynced) together in a
worker thread before any send or commit that follows them.
"""

from __future__ import annotations

import logging
import os
import random
import time
from typing import Awaitable, Callable

import trio

from .disklog import DiskLog, Entry, Snapshot
from .errors import ApiError, ErrorCode
from .raft import DurableState, NotLeaderError, RaftConfig, RaftNode, Role
from .raft.messages import (
    AppendEntries, BeginQuorumEpochResponse, Commit, FetchRequest, FetchResponse, FetchSnapshotResponse,
    LeaderChange,
    LoadSnapshot, PersistState, SaveSnapshot, Send, TruncateFrom, VoteResponse,
)

log = logging.getLogger(__name__)

# A leader holds a fetch that has nothing new for the fetcher up to this long (Kafka's KRaft fetch
# max wait): an append or a high-watermark move answers it at once, so followers do not poll.
FETCH_MAX_WAIT_S = 0.5

_DURABLE = (PersistState, AppendEntries, TruncateFrom, SaveSnapshot)
_RESPONSES = (VoteResponse, BeginQuorumEpochResponse, FetchResponse, FetchSnapshotResponse)


def halt(status: int) -> None:
    """End the process at once (no cleanup that could write more): tests replace this."""
    logging.shutdown()
    os._exit(status)


class RaftQuorum:
    def __init__(self, log_dir: str, node_id: int, voters=None, *, transport=None,
                 config: RaftConfig | None = None, snapshot_every: int = 1000,
                 snapshot_state: Callable[[], tuple[int, bytes]] | None = None,
                 fetch_max_wait: float = FETCH_MAX_WAIT_S):
        self.node_id = node_id
        self.voters = frozenset(voters or [node_id])
        self.log = DiskLog(log_dir)
        self.transport = transport
        self.snapshot_every = snapshot_every
        self.snapshot_state = snapshot_state        # () -> (end offset, state bytes)
        durable = DurableState(self.log.quorum_state, self.log.snapshot, list(self.log.entries))
        self.node = RaftNode(node_id, self.voters, config or RaftConfig(), random.Random(), durable)
        self._apply_entry: Callable[[Entry], None] = lambda entry: None
        self._apply_snapshot: Callable[[Snapshot], None] = lambda snap: None
        self._prepare_entries: Callable[[list], Awaitable[None]] | None = None
        self._lock = trio.Lock()
        self._wakeup = trio.Event()
        self._waiters: dict[int, tuple[int, trio.Event, list]] = {}
        self._ready = trio.Event()                  # leader whose own epoch marker has committed
        self._reply = None                          # (src, reply) of the request being handled
        self._started = False
        self.leader_listeners: list[Callable[[int, int], None]] = []   # (epoch, leader id)
        # Held no longer than half the fetcher's request timeout, or it would resend meanwhile.
        self.fetch_max_wait = min(fetch_max_wait, self.node.config.request_timeout / 2)
        self._progress = trio.Event()               # set when the log grows or commits more
        self._sent_high_watermark: dict[int, int] = {}   # per fetcher: the last one we told it

    # -- role ------------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.node.role is Role.LEADER

    @property
    def leader_id(self) -> int:
        return self.node.leader_id

    @property
    def epoch(self) -> int:
        return self.node.epoch

    @property
    def end_offset(self) -> int:
        return self.node.end_offset

    def in_touch(self) -> bool:
        """Whether this node leads or is hearing from the leader (its metadata is current)."""
        return self.node.hearing_from_leader(trio.current_time())

    def describe(self) -> dict:
        """The core's view with times as wall-clock milliseconds (-1: never), as DescribeQuorum has them."""
        now = trio.current_time()
        view = self.node.describe(now)
        wall = time.time()
        for replica in view["replicas"].values():
            for key in ("last_fetch_timestamp", "last_caught_up_timestamp"):
                t = replica[key]
                replica[key] = int((wall - (now - t)) * 1000) if t != float("-inf") else -1
        return view

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self, apply_snapshot: Callable[[Snapshot], None], apply_entry: Callable[[Entry], None],
              prepare_entries: Callable[[list], Awaitable[None]] | None = None) -> None:
        """Load and replay synchronously (startup may block on the disk)."""
        self._apply_snapshot, self._apply_entry = apply_snapshot, apply_entry
        self._prepare_entries = prepare_entries
        effects = self.node.start(trio.current_time())
        for effect in effects:
            if isinstance(effect, _DURABLE):
                self._persist([effect])
            else:
                self._act(effect)
        self._started = True

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            if self.transport is not None:
                await nursery.start(self.transport.run)
                nursery.start_soon(self._receiver, nursery)
            nursery.start_soon(self._ticker)

    def close(self) -> None:
        self.log.close()

    async def resign(self) -> None:
        """Graceful shutdown of a leader: ask the other voters to elect a successor now."""
        async with self._lock:
            await self._execute(self.node.resign(trio.current_time()))

    async def _ticker(self) -> None:
        while True:
            with trio.move_on_at(self.node.next_deadline()):
                await self._wakeup.wait()
            async with self._lock:
                await self._execute(self.node.tick(trio.current_time()))
                # _execute sets the event to wake us for a new deadline; this pass already sees it,
                # so start afresh here or the next wait returns at once and the loop spins.
                self._wakeup = trio.Event()

    async def _receiver(self, nursery) -> None:
        async for src, message, reply in self.transport.incoming():
            if reply is not None and isinstance(message, FetchRequest) and self.is_leader:
                nursery.start_soon(self._long_poll_fetch, src, message, reply)
                continue
            async with self._lock:
                self._reply = (src, reply) if reply is not None else None
                try:
                    await self._execute(self.node.handle(src, message, trio.current_time()))
                finally:
                    self._reply = None
                    if reply is not None:
                        reply(None)              # no answer from the core: an empty one

    async def _long_poll_fetch(self, src: int, request: FetchRequest, reply) -> None:
        """Answer a fetch at once when it brings the fetcher something (entries, a new high
        watermark, an error, a divergence or snapshot); otherwise hold it until the log moves or
        `fetch_max_wait` passes, then handle it again."""
        deadline = trio.current_time() + self.fetch_max_wait
        while True:
            progress, answers = self._progress, []
            async with self._lock:
                self._reply = (src, answers.append)
                try:
                    await self._execute(self.node.handle(src, request, trio.current_time()))
                finally:
                    self._reply = None
            response = answers[0] if answers else None
            if not self._nothing_new(src, response) or trio.current_time() >= deadline:
                break
            with trio.move_on_at(deadline):
                await progress.wait()
        if isinstance(response, FetchResponse):
            self._sent_high_watermark[src] = response.high_watermark
        reply(response)

    def _nothing_new(self, src: int, response) -> bool:
        return (isinstance(response, FetchResponse) and response.error is None
                and not response.entries and response.diverging is None
                and response.snapshot_id is None
                and response.high_watermark == self._sent_high_watermark.get(src))

    # -- proposals -------------------------------------------------------------------------------------

    async def wait_ready(self) -> None:
        """Return once this node leads and has applied everything committed before its epoch."""
        while True:
            if not self.is_leader:
                raise ApiError(ErrorCode.NOT_CONTROLLER, "This node is not the active controller.")
            ready = self._ready
            await ready.wait()
            if ready is self._ready:
                return

    async def propose(self, data: bytes) -> int:
        async with self._lock:
            try:
                (offset, epoch), effects = self.node.propose(data, trio.current_time())
            except NotLeaderError:
                raise ApiError(ErrorCode.NOT_CONTROLLER, "This node is not the active controller.") from None
            done, result = trio.Event(), []
            self._waiters[offset] = (epoch, done, result)
            await self._execute(effects)
        await done.wait()
        if not result[0]:
            raise ApiError(ErrorCode.NOT_CONTROLLER, "Leadership changed before the change committed.")
        return offset

    # -- effects ---------------------------------------------------------------------------------------

    async def _execute(self, effects: list) -> None:
        # The core already acts as if every effect happened: never let a cancellation cut the list.
        with trio.CancelScope(shield=True):
            await self._execute_all(effects)

    async def _execute_all(self, effects: list) -> None:
        pending: list = []
        for effect in effects:
            if isinstance(effect, _DURABLE):
                pending.append(effect)
                continue
            if pending:
                await trio.to_thread.run_sync(self._persist, pending)
                pending = []
            if isinstance(effect, Commit) and self._prepare_entries is not None:
                await self._prepare_entries(effect.entries)
            self._act(effect)
        if pending:
            await trio.to_thread.run_sync(self._persist, pending)
        if any(isinstance(e, (AppendEntries, Commit)) for e in effects):
            self._progress.set()                 # held fetches have something new to see
            self._progress = trio.Event()
        self._wakeup.set()
        await self._maybe_snapshot()

    def _persist(self, effects: list) -> None:
        """Write the effects durably. The core already counts them as done (a vote given, entries
        acknowledged to the leader), so a failed write cannot be taken back: the node halts, as
        Kafka's does when its metadata log dir fails, rather than keep a promise it broke."""
        try:
            self._write(effects)
        except OSError as exc:
            log.critical("the metadata log in %s failed: %s: halting", self.log.path, exc)
            halt(1)

    def _write(self, effects: list) -> None:
        for effect in effects:
            if isinstance(effect, PersistState):
                self.log.save_quorum_state(effect.state, self.voters)
            elif isinstance(effect, AppendEntries):
                self.log.append(effect.entries)
            elif isinstance(effect, TruncateFrom):
                self.log.truncate_from(effect.offset)
            elif isinstance(effect, SaveSnapshot):
                self.log.save_snapshot(effect.snapshot)

    def _act(self, effect) -> None:
        if isinstance(effect, Send):
            if isinstance(effect.message, _RESPONSES):
                # Answers go back on the connection of the request being handled.
                if self._reply is not None and self._reply[0] == effect.dest:
                    self._reply[1](effect.message)
            elif self.transport is not None:
                self.transport.send(effect.dest, effect.message)
        elif isinstance(effect, Commit):
            for entry in effect.entries:
                self._apply_entry(entry)
                self._settle(entry.offset, entry.epoch)
                if entry.control and entry.epoch == self.node.epoch and self.is_leader:
                    self._ready.set()
        elif isinstance(effect, LoadSnapshot):
            if self._started:
                log.info("metadata quorum: installed the leader's snapshot up to offset %d",
                         effect.snapshot.end_offset)
            self._apply_snapshot(effect.snapshot)
        elif isinstance(effect, LeaderChange):
            log.info("metadata quorum: epoch %d, leader %d", effect.epoch, effect.leader_id)
            for listener in self.leader_listeners:
                listener(effect.epoch, effect.leader_id)
            if not effect.is_self:
                lost, self._ready = self._ready, trio.Event()
                lost.set()                       # wake wait_ready() callers: they see the change
                for offset in list(self._waiters):
                    self._settle(offset, None)

    def _settle(self, offset: int, epoch: int | None) -> None:
        waiter = self._waiters.pop(offset, None)
        if waiter is not None:
            want, done, result = waiter
            result.append(epoch == want)
            done.set()

    async def _maybe_snapshot(self) -> None:
        node = self.node
        if self.snapshot_state is None or node.applied - node.log_start < self.snapshot_every:
            return
        # In worker threads: the image of 50,000 partitions takes ~0.45 s to encode. Nothing applies
        # meanwhile (the lock is held), so the state encoded is the one at `end`.
        end, data = await trio.to_thread.run_sync(self.snapshot_state)
        if node.log_start < end <= node.applied:
            effects = node.take_snapshot(end, data)
            await trio.to_thread.run_sync(self._persist, effects)
