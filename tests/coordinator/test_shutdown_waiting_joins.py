"""A broker that shuts down while a classic group rebalances does not wait out the rebalance.

Found with faststream/librdkafka: a member killed without leaving and a second member joining leave the
second JoinGroup parked until the first one's session ends; a SIGTERM then took the whole 10 s shutdown
grace (Kafka 3.9 stops in about 2 s). Kafka answers the joins it holds for a group it gives up with
NOT_COORDINATOR, so the member looks for the coordinator again.
"""

import time

import trio

from broker.testing import serving_broker
from protocol import ErrorCode, messages as m
from tests.broker.raw_client import RawClient
from tests.coordinator.test_raw_protocol import SUB, find_group_coordinator

J = m.JoinGroupRequest


def _join(member_id: str) -> J:
    return J(group_id="g", session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=member_id,
             protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range", metadata=SUB)])


def _joined_member(port: int) -> str:
    with RawClient("127.0.0.1", port) as first:
        find_group_coordinator(first)
        member_id = first.request(11, 5, _join("")).member_id
        answer = first.request(11, 5, _join(member_id))
        assert answer.error_code == 0 and answer.leader == member_id
        S = m.SyncGroupRequest
        synced = first.request(14, 3, S(group_id="g", generation_id=answer.generation_id, member_id=member_id,
                                        assignments=[S.SyncGroupRequestAssignment(member_id=member_id,
                                                                                  assignment=b"")]))
        assert synced.error_code == 0
    return member_id   # it never rejoins: a rebalance now waits for it


async def test_shutdown_answers_a_parked_join_with_not_coordinator(tmp_path):
    async with trio.open_nursery() as nursery:
        async with serving_broker(tmp_path / "data") as running:
            await trio.to_thread.run_sync(_joined_member, running.port)
            second = RawClient("127.0.0.1", running.port, timeout=30)
            new_id = (await trio.to_thread.run_sync(second.request, 11, 5, _join(""))).member_id
            second.send(11, 5, _join(new_id))    # parked: the first member has 30 s to rejoin
            await trio.sleep(0.3)
            answer: list = []

            async def receive():
                _, body = await trio.to_thread.run_sync(second.receive, 11, 5)
                answer.append(body)
            nursery.start_soon(receive)
            started = time.monotonic()
        stopped = time.monotonic() - started    # serving_broker's exit has drained the broker
    second.close()
    assert answer[0].error_code == ErrorCode.NOT_COORDINATOR
    assert stopped < 5, f"shutdown waited {stopped:.1f} s for a parked JoinGroup"
