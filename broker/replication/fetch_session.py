"""A follower's side of an incremental fetch session (KIP-227), as Kafka's replica fetchers keep one.

The first Fetch to a leader is a full one (epoch 0) that opens a session; then each Fetch carries only
the partitions whose fetch position changed (in practice the ones just appended to) and forgets those
no longer fetched (moved away, or backing off after an error), and the leader answers only the
partitions with something new. Without it every round trip encoded, decoded and walked every followed
partition twice (the leader's __consumer_offsets partitions alone are ~17 per follower), which was
most of a replica round trip's time.

A session the leader no longer has (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, a
reconnect) starts over with a full fetch; that fetch still names the old session (epoch 0 with its
id), which tells the leader to drop it rather than keep it until its cache evicts it.
"""

from __future__ import annotations

from protocol import ErrorCode

INITIAL_EPOCH = 0
INT32_MAX = 2**31 - 1
SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                            ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR})


class FollowerSession:
    def __init__(self):
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        # What the leader's session holds per (topic id, partition): the fields last sent.
        self._sent: dict[tuple, tuple] = {}
        self._pending: tuple[dict, list] | None = None   # (sent, forgotten) of the Fetch in flight

    def reset(self) -> None:
        """Start over with a full fetch (the leader lost the session, or the connection went)."""
        self.epoch, self._sent, self._pending = INITIAL_EPOCH, {}, None

    def plan(self, wanted: dict[tuple, tuple]) -> tuple[list[tuple], list[tuple]]:
        """For the partitions to fetch now ({key: fields}): the keys to send and the keys to forget."""
        if self.epoch == INITIAL_EPOCH:
            send, forget = list(wanted), []
        else:
            send = [key for key, fields in wanted.items() if self._sent.get(key) != fields]
            forget = [key for key in self._sent if key not in wanted]
        self._pending = ({key: wanted[key] for key in send}, forget)
        return send, forget

    def answered(self, response_error: int, response_session_id: int) -> None:
        """The leader answered the Fetch built from the last plan()."""
        pending, self._pending = self._pending, None
        if response_error in SESSION_ERRORS:
            self.reset()
            return
        if response_error or pending is None:
            return
        sent, forgotten = pending
        if self.epoch == INITIAL_EPOCH:
            # (0: the leader keeps no session for us, its cache is full: full fetches go on)
            self.session_id = response_session_id
            if response_session_id:
                self.epoch, self._sent = 1, dict(sent)
            return
        for key in forgotten:
            self._sent.pop(key, None)
        self._sent.update(sent)
        self.epoch = 1 if self.epoch >= INT32_MAX else self.epoch + 1
