"""The ``replicas`` readiness condition: a (re)started broker is ready only once every partition it
follows lists it in the ISR again, and stays ready afterwards."""

import uuid
from types import SimpleNamespace

from broker.controller.image import BrokerImage, MetadataImage, PartitionImage, TopicImage

INCARNATION = uuid.uuid4()
from broker.replication.readiness import ReplicasCaughtUp


def _image(partitions: dict[int, PartitionImage], node=2, incarnation=INCARNATION,
           fenced=False) -> MetadataImage:
    me = BrokerImage(broker_id=node, epoch=7, incarnation_id=incarnation, endpoints=(), rack=None,
                     fenced=fenced)
    return MetadataImage(brokers={node: me},
                         topics={"t": TopicImage("t", uuid.uuid4(), partitions)})


def _broker(node, image):
    return SimpleNamespace(node_id=node, image=image,
                           lifecycle=SimpleNamespace(incarnation_id=INCARNATION))


def _partition(index, replicas, isr, leader, adding=()):
    return PartitionImage(partition_id=index, replicas=tuple(replicas), isr=tuple(isr),
                          leader=leader, leader_epoch=1, partition_epoch=1,
                          adding_replicas=tuple(adding))


def test_waits_for_the_isr_then_latches():
    broker = _broker(2, _image({
        0: _partition(0, [0, 1, 2], [0, 1], leader=0),       # behind
        1: _partition(1, [2, 0, 1], [0, 1], leader=-1),      # no leader to catch up from
        2: _partition(2, [0, 1, 3], [0, 1], leader=0),       # not ours
        3: _partition(3, [0, 1, 2], [0, 1], leader=1, adding=[2]),   # being added: not waited for
        4: _partition(4, [2, 0, 1], [2, 0, 1], leader=2),    # we lead it
    }))
    check = ReplicasCaughtUp(broker)
    assert check()[0] is False
    ok, detail = check()
    assert not ok and "1 replica(s)" in detail and "t-0" in detail
    broker.image = _image({0: _partition(0, [0, 1, 2], [0, 1, 2], leader=0)})
    assert check() == (True, "ok")
    # later lag (the leader shrank the ISR) does not take the broker out of its Service
    broker.image = _image({0: _partition(0, [0, 1, 2], [0, 1], leader=0)})
    assert check() == (True, "ok")


def test_a_broker_with_nothing_to_follow_is_ready():
    assert ReplicasCaughtUp(_broker(0, _image({}, node=0)))() == (True, "ok")


def test_not_before_the_image_holds_this_incarnation_unfenced():
    """An image still replaying an older state (here: nothing yet, a former incarnation, fenced)
    proves nothing about being in sync: not ready, and nothing latched."""
    in_sync = {0: _partition(0, [0, 1, 2], [0, 1, 2], leader=0)}
    broker = _broker(2, MetadataImage())
    check = ReplicasCaughtUp(broker)
    for image in (MetadataImage(), _image(in_sync, incarnation=uuid.uuid4()),
                  _image(in_sync, fenced=True)):
        broker.image = image
        ok, detail = check()
        assert not ok and "registration" in detail and not check.caught_up
    broker.lifecycle = None
    broker.image = _image(in_sync)
    assert check()[0] is False
    broker.lifecycle = SimpleNamespace(incarnation_id=INCARNATION)
    assert check() == (True, "ok")
