"""The coordinator service inside a broker: start-up loading through the broker's start-up hook."""

import trio

from broker.coordinator.service import CoordinatorService
from broker.server import Broker
from broker.testing import make_config, serving_broker
from tests.broker.raw_client import RawClient
from tests.coordinator.test_raw_protocol import find_group_coordinator
from protocol import messages as m


def commit_simple(port, group, offset):
    with RawClient("127.0.0.1", port) as raw:
        raw.create_topic("t", 1)
        find_group_coordinator(raw, group)
        C = m.OffsetCommitRequest
        r = raw.request(8, 8, C(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            C.OffsetCommitRequestTopic(name="t", partitions=[
                C.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])]))
        assert r.topics[0].partitions[0].error_code == 0


async def test_startup_hook_loads_before_any_request(tmp_path):
    data = tmp_path / "data"
    async with serving_broker(data) as running:
        await trio.to_thread.run_sync(commit_simple, running.port, "g", 42)
    broker = Broker(make_config(data))
    broker.startup_hooks.append(CoordinatorService.startup_hook)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        groups = broker.coordinators["group"]  # loaded at start-up, nobody asked yet
        assert groups.groups["g"].offsets[("t", 0)].offset == 42
        broker.request_shutdown()
