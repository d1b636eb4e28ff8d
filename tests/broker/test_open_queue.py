"""broker.open_queue: keys a request waits for are opened before the rest, each once."""

import trio
import trio.testing

from broker.open_queue import OpenQueue


def _queue(keys):
    opening = set(keys)
    queue = OpenQueue(opening)
    for key in keys:
        queue.append(key)
    return queue, opening


def test_chunks_follow_image_order():
    queue, _ = _queue([("t", i) for i in range(5)])
    assert queue.next_chunk(2) == [("t", 0), ("t", 1)]
    assert queue.next_chunk(5) == [("t", 2), ("t", 3), ("t", 4)]
    assert not queue


def test_a_waiting_request_moves_its_keys_first_and_is_woken_once_they_are_installed():
    async def main():
        queue, opening = _queue([("t", i) for i in range(6)])
        woken = []

        async def producer():
            await queue.wait_opened([("t", 4)], timeout_s=30)
            woken.append(("t", 4) in opening)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(producer)
            await trio.testing.wait_all_tasks_blocked()
            chunk = queue.next_chunk(2)
            assert chunk == [("t", 4), ("t", 0)]
            queue.chunk_installed()        # not installed yet: the waiter keeps waiting
            await trio.testing.wait_all_tasks_blocked()
            assert woken == []
            opening.difference_update(chunk)
            queue.chunk_installed()
        assert woken == [False]
        # the key opened early is skipped when its own turn comes
        assert queue.next_chunk(10) == [("t", 1), ("t", 2), ("t", 3), ("t", 5)]
        assert not queue

    trio.run(main)


def test_waiting_is_bounded_by_the_timeout():
    async def main():
        queue, opening = _queue([("t", 0)])
        with trio.fail_after(10):
            await queue.wait_opened([("t", 0)], timeout_s=0.05)
        assert ("t", 0) in opening

    trio.run(main)
