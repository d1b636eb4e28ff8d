"""Follower fetchers over in-process fakes: num.replica.fetchers fetchers per source broker, a partition
always on the same one, and the replica.fetch.* settings in the Fetch a fetcher sends (as Kafka's)."""

from types import SimpleNamespace

import trio

from broker.partitions import Partition
from broker.replication.fetcher import FetcherPool, ReplicaFetcher, whole_batches
from protocol import records as r

SETTINGS = {"num.replica.fetchers": 2, "replica.fetch.wait.max.ms": 321, "replica.fetch.min.bytes": 7,
            "replica.fetch.max.bytes": 4096, "replica.fetch.response.max.bytes": 65536,
            "replica.fetch.backoff.ms": 50, "broker.rack": "rack-b", "inter.broker.listener.name": ""}


def fake_broker(**settings):
    # no brokers in the image: fetchers find no address and back off instead of connecting
    return SimpleNamespace(node_id=5, broker_epoch=42, config={**SETTINGS, **settings},
                           image=SimpleNamespace(brokers={}))


def follower(topic, index, end=10, start=2, epoch=6):
    log = SimpleNamespace(log_end_offset=end, log_start_offset=start, latest_epoch=epoch)
    return Partition(topic=topic, index=index, topic_id=f"id-{topic}", log=log, leader=1, leader_epoch=epoch)


async def test_fetchers_per_source_broker_and_partition_placement():
    broker = fake_broker()
    partitions = [follower("t", i) for i in range(12)]
    async with trio.open_nursery() as nursery:
        pool = FetcherPool(broker, None, nursery)
        for p in partitions[:6]:
            pool.add(p, leader=1, leader_epoch=6)
        for p in partitions[6:]:
            pool.add(p, leader=2, leader_epoch=6)
        assert {key[0] for key in pool.fetchers} == {1, 2}
        assert all(0 <= key[1] < 2 for key in pool.fetchers) and len(pool.fetchers) <= 4
        placed = {p: pool._where[p].key for p in partitions}
        # the same partition goes to the same fetcher again (a new epoch from the same leader)
        for p in partitions[:6]:
            pool.add(p, leader=1, leader_epoch=7)
        assert {p: pool._where[p].key for p in partitions} == placed
        # a new leader moves it to one of that broker's fetchers, out of the old one
        moved = partitions[0]
        pool.add(moved, leader=3, leader_epoch=8)
        assert pool._where[moved].key[0] == 3
        assert moved not in pool.fetchers[placed[moved]].states
        pool.remove(moved)
        assert moved not in pool.fetchers[(3, placed[moved][1])].states
        nursery.cancel_scope.cancel()

    one = fake_broker(**{"num.replica.fetchers": 1})
    async with trio.open_nursery() as nursery:
        pool = FetcherPool(one, None, nursery)
        for p in partitions:
            pool.add(p, leader=1, leader_epoch=6)
        assert list(pool.fetchers) == [(1, 0)]
        nursery.cancel_scope.cancel()


def test_the_fetch_request_carries_the_replica_settings():
    broker = fake_broker()
    fetcher = ReplicaFetcher(broker, None, (1, 0))
    a, b = follower("a", 0, end=10, start=2, epoch=6), follower("b", 3, end=99, start=0, epoch=4)
    fetcher.add(a, 6)
    fetcher.add(b, 4)
    request, sent = fetcher._request(list(fetcher.states.values()))
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (5, 42)
    assert (request.max_wait_ms, request.min_bytes, request.max_bytes) == (321, 7, 65536)
    assert request.rack_id == "rack-b" and request.isolation_level == 0
    wanted = {("id-a", 0): (6, 10, 6, 2), ("id-b", 3): (4, 99, 4, 0)}
    got = {(t.topic_id, p.partition): (p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                                       p.log_start_offset)
           for t in request.topics for p in t.partitions}
    assert got == wanted
    assert {p.partition_max_bytes for t in request.topics for p in t.partitions} == {4096}
    assert set(sent) == set(wanted)


def test_only_whole_batches_are_appended():
    one = r.build_batch([r.SimpleRecord(value=b"x" * 50)])
    two = r.build_batch([r.SimpleRecord(value=b"y" * 80)], base_offset=1)
    data = bytes(one) + bytes(two)
    assert bytes(whole_batches(data)) == data
    assert bytes(whole_batches(data[:-1])) == bytes(one)      # a leader may cut the last batch short
    assert bytes(whole_batches(data[:10])) == b""
