"""Fetch from follower (KIP-392): which replica a consumer in a given rack should read from.

With ``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector`` the leader
answers a consumer's Fetch (v11+, with its ``client.rack``) with PreferredReadReplica instead of
records when a replica in the consumer's rack is a better source than the leader itself: among the
replicas on live brokers whose log covers the fetch offset, those in the consumer's rack; the leader
if it is one of them, else the most caught-up (largest log end, then most recently caught up), as
Kafka's RackAwareReplicaSelector. Followers serve such consumers up to their own high watermark.
"""

from __future__ import annotations

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
SELECTORS = (RACK_AWARE, LEADER_SELECTOR)


def preferred_read_replica(broker, partition, fetch_offset: int, client_rack: str | None,
                           now_ms: int) -> int:
    """The replica a consumer should fetch from, or -1 for this leader."""
    if broker.config["replica.selector.class"] != RACK_AWARE or not client_rack:
        return -1
    state = partition.replica_state
    if state is None:
        return -1
    brokers = broker.image.brokers
    leader_broker = brokers.get(broker.node_id)
    if leader_broker is not None and leader_broker.rack == client_rack:
        return -1
    candidates = []
    for replica, progress in state.followers.items():
        info = brokers.get(replica)
        if info is None or info.fenced or info.rack != client_rack:
            continue
        if progress.log_end_offset < fetch_offset or progress.log_start_offset > fetch_offset:
            continue
        candidates.append((progress.log_end_offset, -(now_ms - progress.last_caught_up_ms), -replica,
                           replica))
    return max(candidates)[3] if candidates else -1
