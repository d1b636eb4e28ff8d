"""Share sessions (KIP-932): which share-partitions a member fetches from one broker, and the epoch
that orders its ShareFetch / ShareAcknowledge requests.

Epoch 0 opens a session (replacing one the member had: its records go back), -1 closes it, any other
epoch must be the next one expected (INVALID_SHARE_SESSION_EPOCH otherwise; SHARE_SESSION_NOT_FOUND
when there is no session). Every accepted request moves the expected epoch on by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Union

from protocol import ErrorCode

E = ErrorCode
OPEN_EPOCH = 0
CLOSE_EPOCH = -1
Partition = tuple            # (topic id, partition index)


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: list[Partition] = field(default_factory=list)   # in the order they were added
    connection: object = None     # the connection that opened it: the session ends when it closes


@dataclass
class SessionStep:
    session: ShareSession
    opened: bool = False          # a new session: the previous one's (if any) records are released
    closing: bool = False         # epoch -1: acknowledge, then release the rest and forget the session
    replaced: Optional[ShareSession] = None


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000):
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def step(self, group_id: str, member_id: str, epoch: int, added: Iterable[Partition] = (),
             forgotten: Iterable[Partition] = ()) -> Union[SessionStep, ErrorCode]:
        """Check `epoch` against the member's session and apply the request's partition changes."""
        key = (group_id, member_id)
        current = self.sessions.get(key)
        if epoch == OPEN_EPOCH:
            if current is None and len(self.sessions) >= self.max_sessions:
                return E.SHARE_SESSION_LIMIT_REACHED
            session = ShareSession(group_id, member_id)
            self.sessions[key] = session
            _update(session, added, forgotten)
            return SessionStep(session, opened=True, replaced=current)
        if current is None:
            return E.SHARE_SESSION_NOT_FOUND
        if epoch == CLOSE_EPOCH:
            del self.sessions[key]
            return SessionStep(current, closing=True)
        if epoch != current.next_epoch:
            return E.INVALID_SHARE_SESSION_EPOCH
        current.next_epoch = 1 if epoch == 2**31 - 1 else epoch + 1
        _update(current, added, forgotten)
        return SessionStep(current)

    def drop_member(self, group_id: str, member_id: str) -> Optional[ShareSession]:
        return self.sessions.pop((group_id, member_id), None)


def _update(session: ShareSession, added: Iterable[Partition], forgotten: Iterable[Partition]) -> None:
    gone = set(forgotten)
    session.partitions = [p for p in session.partitions if p not in gone]
    present = set(session.partitions)
    for partition in added:
        if partition not in present:
            session.partitions.append(partition)
            present.add(partition)
