"""The KIP-848 consumer group protocol's error paths (ConsumerGroupHeartbeat, ConsumerGroupDescribe).
Kafka 3.9 serves them only with `group.coordinator.rebalance.protocols=classic,consumer`: run these
against such a Kafka (`KAFKA_EXTRA_PROPS=group.coordinator.rebalance.protocols=classic,consumer`).

Differences left, not ours to copy: Kafka 3.9 answers ConsumerGroupDescribe with GROUP_ID_NOT_FOUND for
every group, each listed once per offsets partition it asked (a 3.9 defect), and UNKNOWN_SERVER_ERROR
for an empty group id; its first heartbeats may assign nothing until its coordinator sees the new
topic (a member epoch one ahead afterwards)."""

from __future__ import annotations

from protocol import messages

from tests.differential.session import Session

H, D = messages.ConsumerGroupHeartbeatRequest, messages.ConsumerGroupDescribeRequest


def consumer_group_protocol(s: Session, p: str):
    out = []
    topic = f"{p}-k8"
    s.topic(topic, 2)
    group = f"{p}-cg"
    s.settled(10, 3, messages.FindCoordinatorRequest(key=group, key_type=0))

    def beat(label, **fields):
        body = dict(group_id=group, member_id="", member_epoch=0, instance_id=None, rack_id=None,
                    rebalance_timeout_ms=30_000, subscribed_topic_names=None, server_assignor=None,
                    topic_partitions=None)
        body.update(fields)
        answer = s.request(68, 0, H(**body))
        out.append((label, 68, answer))
        return answer
    joined = beat("join", subscribed_topic_names=[topic], topic_partitions=[])
    member, epoch = joined.member_id, joined.member_epoch
    beat("join without a subscription", topic_partitions=[])
    beat("join without owned partitions", subscribed_topic_names=[topic])
    beat("join with a bad rebalance timeout", subscribed_topic_names=[topic], topic_partitions=[],
         rebalance_timeout_ms=-1)
    beat("join with an unknown assignor", subscribed_topic_names=[topic], topic_partitions=[],
         server_assignor="nonsense")
    beat("join without a group", group_id="", subscribed_topic_names=[topic], topic_partitions=[])
    beat("heartbeat", member_id=member, member_epoch=epoch)
    beat("heartbeat, future epoch", member_id=member, member_epoch=epoch + 5)
    beat("heartbeat, unknown member", member_id="nobody-here", member_epoch=epoch)
    beat("heartbeat, no member id", member_id="", member_epoch=epoch)
    beat("heartbeat, negative epoch", member_id=member, member_epoch=-3)
    beat("static leave of an unknown instance", member_id=member, member_epoch=-2, instance_id="ghost")
    static = beat("static join", member_id="", instance_id="i1", subscribed_topic_names=[topic],
                  topic_partitions=[])
    beat("static leave by another member", member_id="someone-else", member_epoch=-2, instance_id="i1")
    beat("heartbeat claiming another's instance id", member_id=member, member_epoch=epoch, instance_id="i1")
    beat("static heartbeat by an unknown member", member_id="someone-else", member_epoch=1, instance_id="i1")
    beat("heartbeat with an instance id nobody holds", member_id=member, member_epoch=epoch, instance_id="i9")
    beat("static leave", member_id=static.member_id, member_epoch=-2, instance_id="i1")
    beat("leave", member_id=member, member_epoch=-1)
    beat("leave again", member_id=member, member_epoch=-1)
    classic = f"{p}-classic"
    s.join(classic, [topic])
    beat("a classic group with a member", group_id=classic, subscribed_topic_names=[topic], topic_partitions=[])
    out.append(("describe", 69, s.request(69, 0, D(group_ids=[group, classic, f"{p}-nosuch"],
                                                   include_authorized_operations=False))))
    out.append(("describe an empty group id", 69, s.request(69, 0, D(group_ids=[""],
                                                                     include_authorized_operations=False))))
    return out
