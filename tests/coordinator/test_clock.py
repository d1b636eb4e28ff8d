"""Timers (keyed, replaceable deadlines) and Pending results."""

from broker.coordinator.clock import FakeClock, Timers
from broker.coordinator.pending import Pending


def test_timers_fire_in_deadline_order_and_replace_by_key():
    timers, fired = Timers(), []
    timers.schedule("a", 30, lambda: fired.append("a"))
    timers.schedule("b", 10, lambda: fired.append("b"))
    timers.schedule("c", 20, lambda: fired.append("c"))
    timers.schedule("b", 40, lambda: fired.append("b2"))  # replaces b's deadline and callback
    timers.cancel("c")
    assert timers.next_deadline() == 30
    assert timers.run_due(29) == 0
    assert timers.run_due(100) == 2 and fired == ["a", "b2"]
    assert timers.next_deadline() is None and not timers.is_scheduled("a")


def test_timer_callbacks_may_schedule_more():
    timers, clock, fired = Timers(), FakeClock(0), []

    def tick():
        fired.append(clock.now_ms())
        if len(fired) < 3:
            timers.schedule("tick", clock.now_ms() + 5, tick)
    timers.schedule("tick", 5, tick)
    for _ in range(3):
        clock.advance(5)
        timers.run_due(clock.now_ms())
    assert fired == [5, 10, 15]


def test_change_hook_sees_every_schedule():
    timers, calls = Timers(), []
    timers.on_change = lambda: calls.append(timers.next_deadline())
    timers.schedule("x", 50, lambda: None)
    timers.schedule("y", 20, lambda: None)
    assert calls == [50, 20]


def test_pending_completes_once_and_runs_callbacks():
    p, seen = Pending(), []
    p.add_callback(seen.append)
    assert not p.done
    assert p.complete(1) and not p.complete(2)
    p.add_callback(seen.append)  # late callbacks run at once
    assert p.result == 1 and seen == [1, 1]
