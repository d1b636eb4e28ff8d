"""A broker's registration (broker/cluster/liveness.py) against a fake controller and image."""

from __future__ import annotations

from types import SimpleNamespace

import trio

from broker.cluster.liveness import BrokerLifecycle

BROKER_EPOCH = 42


class FakeConfig(dict):
    multi_node = True


class FakeController:
    """Accepts the registration and answers every heartbeat: unfenced."""

    def __init__(self):
        self.local = SimpleNamespace(wait_applied=self._wait_applied)

    async def _wait_applied(self, offset):
        pass

    async def register_broker(self, node_id, incarnation_id, endpoints, rack=None, features=None):
        return BROKER_EPOCH

    async def heartbeat(self, node_id, broker_epoch, offset, want_shutdown=False):
        return SimpleNamespace(is_fenced=False, should_shut_down=False)


async def test_a_broker_lets_clients_in_only_once_its_own_image_shows_it_unfenced(autojump_clock):
    """The controller's answer comes before the unfence record reaches this broker's image; until
    it does, a Metadata answer from here lists no live broker (all of them, after every node
    restarted), and librdkafka, told so, dropped every broker it knew and stalled for good."""
    image = SimpleNamespace(offset=0, brokers={})
    broker = SimpleNamespace(node_id=1, controller=FakeController(), image=image, broker_epoch=-1,
                             config=FakeConfig({"broker.rack": None}),
                             advertised_listeners=lambda: [],
                             health=SimpleNamespace(set=lambda *args: None))
    me = SimpleNamespace(fenced=True, epoch=BROKER_EPOCH)
    registered_at = []

    async def register():
        await BrokerLifecycle(broker).register()
        registered_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        began = trio.current_time()
        nursery.start_soon(register)
        await trio.sleep(0.5)
        image.brokers[1] = me                   # the registration record: fenced
        await trio.sleep(0.5)
        assert registered_at == []
        image.brokers[1] = SimpleNamespace(fenced=False, epoch=BROKER_EPOCH)   # the unfence
        await trio.sleep(0.5)
    assert broker.broker_epoch == BROKER_EPOCH
    assert registered_at and 1.0 <= registered_at[0] - began < 1.1
