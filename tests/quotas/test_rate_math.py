"""Kafka's quota arithmetic with a fake clock: sampled rates, throttle times, token buckets, and
which quota (and which shared sensor) a request gets under Kafka's eight-level precedence."""

from broker.controller.client_quotas import CLIENT_ID, USER
from broker.quotas.manager import ClientQuotaManager
from broker.quotas.rate import SampledRate, TokenBucket, throttle_ms


class FakeClock:
    def __init__(self, now_ms=1_000_000):
        self.now_ms = now_ms

    def __call__(self):
        return self.now_ms

    def sleep(self, ms):
        self.now_ms += ms


def test_throttle_time_of_a_spike_is_kafkas():
    # Kafka's own example: 400 B/s for 10 s under a 500 B/s quota, then a 2300 B spike half way
    # into the 11th window: 6300 B over 10.5 s = 600 B/s -> (600-500)/500 * 10.5 s = 2100 ms.
    clock = FakeClock(0)
    manager = ClientQuotaManager("producer_byte_rate", clock=clock)
    manager.update({((CLIENT_ID, None),): {"producer_byte_rate": 500.0}})
    for _ in range(10):
        assert manager.record("ANONYMOUS", "c", 400) == 0
        clock.sleep(1000)
    clock.sleep(-500)   # the 10th sleep was only half a window
    assert manager.record("ANONYMOUS", "c", 2300) == 2100
    clock.sleep(2100)
    # Throttled until the spike's window rolls out of the 11 samples.
    for _ in range(10):
        manager.record("ANONYMOUS", "c", 400)
        clock.sleep(1000)
    assert manager.record("ANONYMOUS", "c", 0) == 0


def test_first_window_counts_as_samples_minus_one_windows():
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(1000, 5_000)
    assert rate.window_size_ms(5_000) == 10_000      # not 0 ms: 10 whole windows assumed
    assert rate.measure(5_000) == 100.0
    assert rate.window_size_ms(5_250) == 10_250


def test_idle_samples_expire_and_windows_roll():
    rate = SampledRate(samples=3, window_ms=100)
    for t in range(0, 1000, 50):
        rate.record(10, t)
    # 3 samples + 1 kept; the newest covers [900, 1000)
    assert 0 < rate.measure(999) <= 10 * 20 / 0.2
    # nothing for samples * window: every sample is reset
    assert rate.measure(999 + 300 + 50) == 0.0


def test_throttle_formula_matches_rate_excess():
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(2_000_000, 0)
    # 2 MB in the first (assumed 10 s) window against 100 kB/s: 200 kB/s -> (200-100)/100*10 s
    assert throttle_ms(rate, 100_000, 0) == 10_000
    assert throttle_ms(rate, 300_000, 0) == 0


def test_token_bucket_goes_into_debt_and_refills():
    bucket = TokenBucket(samples=11, window_ms=1000)
    start = 1_000_000
    assert bucket.measure(10.0, start) == 110.0        # full burst: quota * samples * window
    bucket.record(150, 10.0, start)                    # a mutation may take the bucket below zero
    assert bucket.tokens == -40.0
    assert bucket.throttle_ms(10.0, start) == 4000     # -(-40) / 10 per second
    assert bucket.throttle_ms(10.0, start + 4000) == 0


def test_controller_mutation_quota_is_strict_once_in_debt():
    clock = FakeClock()
    manager = ClientQuotaManager("controller_mutation_rate", token_bucket=True, clock=clock)
    manager.update({((USER, None),): {"controller_mutation_rate": 5.0}})
    assert manager.mutation_throttle_ms("bob", "admin") == 0
    manager.record_mutation("bob", "admin", 60)        # burst 55: 5 in debt
    assert manager.mutation_throttle_ms("bob", "admin") == 1000
    clock.sleep(1000)
    assert manager.mutation_throttle_ms("bob", "admin") == 0
    # every user has their own bucket under /config/users/<default>
    assert manager.mutation_throttle_ms("carol", "admin") == 0


def test_request_quota_throttle_is_capped_at_one_window():
    clock = FakeClock()
    manager = ClientQuotaManager("request_percentage", max_throttle_ms=1000, clock=clock)
    manager.update({((CLIENT_ID, "busy"),): {"request_percentage": 1.0}})
    assert manager.record("ANONYMOUS", "busy", 500.0) == 1000   # 5 s of thread time


def test_precedence_of_the_eight_levels():
    quotas = {
        ((CLIENT_ID, "c1"), (USER, "alice")): 1.0,   # 1 /users/alice/clients/c1
        ((CLIENT_ID, None), (USER, "alice")): 2.0,   # 2 /users/alice/clients/<default>
        ((USER, "alice"),): 3.0,                     # 3 /users/alice
        ((CLIENT_ID, "c4"), (USER, None)): 4.0,      # 4 /users/<default>/clients/c4
        ((CLIENT_ID, None), (USER, None)): 5.0,      # 5 /users/<default>/clients/<default>
        ((USER, None),): 6.0,                        # 6 /users/<default>
        ((CLIENT_ID, "c7"),): 7.0,                   # 7 /clients/c7
        ((CLIENT_ID, None),): 8.0,                   # 8 /clients/<default>
    }

    def manager_with(levels):
        manager = ClientQuotaManager("producer_byte_rate")
        manager.update({entity: {"producer_byte_rate": value} for entity, value in quotas.items()
                        if value in levels})
        return manager

    every = manager_with({1, 2, 3, 4, 5, 6, 7, 8})
    assert every.lookup("alice", "c1") == (("alice", "c1"), 1.0)
    assert every.lookup("alice", "other") == (("alice", "other"), 2.0)
    assert every.lookup("bob", "c4") == (("bob", "c4"), 4.0)
    assert every.lookup("bob", "c7") == (("bob", "c7"), 5.0)    # level 5 outranks level 7
    assert manager_with({3, 4, 6, 7, 8}).lookup("alice", "c4") == (("alice", ""), 3.0)
    assert manager_with({6, 7, 8}).lookup("bob", "c7") == (("bob", ""), 6.0)
    assert manager_with({7, 8}).lookup("bob", "c7") == (("", "c7"), 7.0)
    assert manager_with({7, 8}).lookup("bob", "zz") == (("", "zz"), 8.0)
    assert manager_with({7}).lookup("bob", "zz") == (("", "zz"), None)
    assert manager_with({3}).lookup("bob", "zz") == (("bob", ""), None)
    # a quota on /users/alice is one sensor for all of alice's clients
    shared = manager_with({3})
    shared.record("alice", "a", 10, now_ms=5_000)
    shared.record("alice", "b", 10, now_ms=5_000)
    assert list(shared.sensors) == [("alice", "")]


def test_no_quotas_record_nothing():
    manager = ClientQuotaManager("producer_byte_rate")
    assert manager.record("ANONYMOUS", "c", 10**9) == 0
    assert manager.sensors == {}


def test_the_user_is_the_connections_principal_name():
    from types import SimpleNamespace

    from broker.quotas import principal_name
    assert principal_name(SimpleNamespace()) == "ANONYMOUS"      # no authentication yet
    assert principal_name(SimpleNamespace(principal=None)) == "ANONYMOUS"
    # a KafkaPrincipal-like object (User:alice) is charged as "alice"
    assert principal_name(SimpleNamespace(principal=SimpleNamespace(principal_type="User",
                                                                    name="alice"))) == "alice"
