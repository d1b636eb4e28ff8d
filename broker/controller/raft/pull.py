"""Log replication by pull, the KRaft way: followers and observers Fetch from the leader, which
validates each fetch against its log (answering with the diverging epoch or a snapshot id when the
follower's log does not match) and advances the high watermark from what voters have fetched.

A mixin of `RaftNode` (core.py): it shares the node's state and effect list, and keeps the serving side
(leader) and the fetching side (follower, observer) of the protocol together in one place.
"""

from __future__ import annotations

from ..disklog import Snapshot
from .messages import (
    FENCED_LEADER_EPOCH, NOT_LEADER, SNAPSHOT_NOT_FOUND, FetchRequest, FetchResponse,
    FetchSnapshotRequest, FetchSnapshotResponse, LoadSnapshot, SaveSnapshot, TruncateFrom,
)
from .roles import ReplicaState, Role


class PullReplication:
    # -- leader: serving fetches -----------------------------------------------------------------------

    def _on_fetch(self, src: int, req: FetchRequest, now: float) -> None:
        if req.epoch > self.epoch:
            self._observe_epoch(req.epoch, -1, now)
        if self.role is not Role.LEADER:
            self._send(src, FetchResponse(self.epoch, self.leader_id, req.fetch_offset,
                                          req.last_fetched_epoch, error=NOT_LEADER))
            return
        if req.epoch < self.epoch:
            self._send(src, FetchResponse(self.epoch, self.node_id, req.fetch_offset,
                                          req.last_fetched_epoch, error=FENCED_LEADER_EPOCH))
            return
        st = self._replicas.setdefault(src, ReplicaState())
        base = dict(epoch=self.epoch, leader_id=self.node_id, fetch_offset=req.fetch_offset,
                    last_fetched_epoch=req.last_fetched_epoch, high_watermark=self.high_watermark, log_start_offset=self.log_start)
        offset, epoch = req.fetch_offset, req.last_fetched_epoch
        found = self._end_offset_for_epoch(epoch) if offset > 0 else (0, 0)
        if offset < self.log_start or found is None:
            # What the replica needs next is only in our snapshot.
            st.last_fetch = now
            self._send(src, FetchResponse(**base, snapshot_id=(self.log_start, self.snapshot.epoch)))
            return
        if offset > 0 and (found[0] != epoch or offset > found[1]):
            st.last_fetch = now
            self._send(src, FetchResponse(**base, diverging=found))
            return
        # Valid: the replica's log matches ours below `offset`.
        st.record_fetch(offset, self.end_offset, now)
        if src in self.voters and offset > st.end_offset:
            st.end_offset = offset
            self._leader_update_hw(now)
        elif src not in self.voters:
            st.end_offset = offset
        base["high_watermark"] = self.high_watermark
        start = offset - self.log_start
        chunk = tuple(self.entries[start:start + self.config.max_fetch_entries])
        self._send(src, FetchResponse(**base, entries=chunk))

    def _on_fetch_snapshot(self, src: int, req: FetchSnapshotRequest, now: float) -> None:
        if req.epoch > self.epoch:
            self._observe_epoch(req.epoch, -1, now)
        if self.role is not Role.LEADER or req.epoch < self.epoch:
            error = NOT_LEADER if self.role is not Role.LEADER else FENCED_LEADER_EPOCH
            self._send(src, FetchSnapshotResponse(self.epoch, self.leader_id, req.snapshot_id,
                                                  req.position, error=error))
            return
        self._replicas.setdefault(src, ReplicaState()).last_fetch = now
        snap = self.snapshot
        if snap is None or (snap.end_offset, snap.epoch) != tuple(req.snapshot_id) \
                or not 0 <= req.position <= len(snap.data):
            self._send(src, FetchSnapshotResponse(self.epoch, self.node_id, req.snapshot_id, req.position,
                                                  error=SNAPSHOT_NOT_FOUND))
            return
        chunk = snap.data[req.position:req.position + self.config.snapshot_chunk]
        self._send(src, FetchSnapshotResponse(self.epoch, self.node_id, req.snapshot_id, req.position,
                                              size=len(snap.data), chunk=chunk))

    # -- follower --------------------------------------------------------------------------------------

    def _fetch_target(self) -> int | None:
        if self.role is Role.FOLLOWER:
            return self.leader_id
        if not self.is_voter and self.voters:
            # An observer without a leader asks a random voter, which redirects it.
            return self.rng.choice(sorted(self.voters))
        return None

    def _maybe_fetch(self, now: float) -> None:
        if self._fetch_sent is not None and now < self._fetch_sent + self.config.request_timeout:
            return
        if self._fetch_sent is None and now < self._next_fetch:
            return
        target = self._fetch_target()
        if target is None:
            return
        if self._download is not None:
            snapshot_id, buf = self._download
            self._send(target, FetchSnapshotRequest(self.epoch, self.node_id, snapshot_id, len(buf)))
        else:
            self._send(target, FetchRequest(self.epoch, self.node_id, self.end_offset,
                                            self._last_fetched_epoch()))
        self._fetch_sent = now
        self._next_fetch = now + self.config.fetch_interval

    def _last_fetched_epoch(self) -> int:
        return self.last_epoch if self.end_offset > 0 else 0

    def _fetch_done(self, now: float, again_now: bool) -> None:
        self._fetch_sent = None
        self._next_fetch = now if again_now else now + self.config.fetch_interval
        self._maybe_fetch(now)

    def _on_fetch_response(self, src: int, resp: FetchResponse, now: float) -> None:
        if not self._observe_epoch(resp.epoch, resp.leader_id, now, from_leader=src == resp.leader_id):
            return
        if resp.error is not None:
            if self.role is Role.FOLLOWER or not self.is_voter:
                self._fetch_done(now, again_now=False)
            return
        if self.role is not Role.FOLLOWER or src != self.leader_id or resp.epoch != self.epoch:
            return
        if (resp.fetch_offset, resp.last_fetched_epoch) != (self.end_offset, self._last_fetched_epoch()) \
                or self._download is not None:
            return                                         # an answer to a request we moved past
        self._fetch_deadline = now + self._fetch_timeout()
        if resp.snapshot_id is not None:
            self._download = (resp.snapshot_id, bytearray())
            self._fetch_done(now, again_now=True)
            return
        if resp.diverging is not None:
            div_epoch, div_end = resp.diverging
            mine = self._end_offset_for_epoch(div_epoch)
            target = min(div_end, mine[1] if mine else self.log_start)
            target = max(target, self.log_start)
            assert target >= self.high_watermark, "truncating committed entries"
            if target < self.end_offset:
                del self.entries[target - self.log_start:]
                self._out.append(TruncateFrom(target))
            self._fetch_done(now, again_now=True)
            return
        if resp.entries:
            self._append(resp.entries)
        self._commit_to(min(resp.high_watermark, self.end_offset))
        self._fetch_done(now, again_now=bool(resp.entries))

    def _on_fetch_snapshot_response(self, src: int, resp: FetchSnapshotResponse, now: float) -> None:
        if not self._observe_epoch(resp.epoch, resp.leader_id, now, from_leader=src == resp.leader_id):
            return
        if self.role is not Role.FOLLOWER or src != self.leader_id or self._download is None:
            return
        snapshot_id, buf = self._download
        if resp.error is not None:
            self._download = None                          # the leader moved on: fetch again
            self._fetch_done(now, again_now=True)
            return
        if tuple(resp.snapshot_id) != tuple(snapshot_id) or resp.position != len(buf):
            return
        self._fetch_deadline = now + self._fetch_timeout()
        buf += resp.chunk
        if len(buf) >= resp.size:
            self._install_snapshot(Snapshot(snapshot_id[0], snapshot_id[1], bytes(buf)))
        self._fetch_done(now, again_now=True)

    def _install_snapshot(self, snap: Snapshot) -> None:
        self._download = None
        if snap.end_offset <= self.applied:
            return                                         # we already have all of that
        keeps = (self.log_start <= snap.end_offset - 1 < self.end_offset
                 and self._epoch_at(snap.end_offset - 1) == snap.epoch)
        self.entries = self.entries[snap.end_offset - self.log_start:] if keeps else []
        self.snapshot, self.log_start = snap, snap.end_offset
        self._out.append(SaveSnapshot(snap))
        self._out.append(LoadSnapshot(snap))
        self.applied = snap.end_offset
        self.high_watermark = max(self.high_watermark, snap.end_offset)
