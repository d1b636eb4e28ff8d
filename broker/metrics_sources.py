"""The scrape-time metric sources of a running ``broker.server.Broker`` (see ``broker.metrics``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

def broker_sources(broker) -> dict[str, Callable]:
    """The scrape-time sources for a ``broker.server.Broker``: its hosted partitions (storage
    logs), its group coordinator's groups and its controller. Each reads only in-memory state."""
    from broker.metrics import ControllerSnapshot, GroupSnapshot, PartitionSnapshot

    def partitions() -> Iterable[PartitionSnapshot]:
        manager, controller = broker.partitions, broker.controller
        if manager is None:
            return []
        image = controller.image if controller is not None else None
        out = []
        for p in manager.all():
            log = p.log
            replicas, isr = 1, len(p.isr) or 1
            placed = image.topics.get(p.topic) if image is not None else None
            placed = placed.partitions.get(p.index) if placed is not None else None
            if placed is not None:
                replicas, isr = len(placed.replicas), len(placed.isr)
            leader = placed.leader if placed is not None else p.leader
            out.append(PartitionSnapshot(
                p.topic, p.index, is_leader=leader == broker.node_id, size_bytes=log.size_bytes,
                log_start_offset=log.log_start_offset, log_end_offset=log.log_end_offset,
                high_watermark=log.high_watermark, num_segments=len(log.segments),
                replicas=replicas, isr=isr, offline=leader < 0))
        return out

    def groups() -> Iterable[GroupSnapshot]:
        coordinator = broker.coordinators.get("group")
        if coordinator is None:
            return []
        return [GroupSnapshot(g.group_id, getattr(g.state, "value", str(g.state)), len(g.members),
                              {tp: om.offset for tp, om in g.offsets.items()})
                for g in list(coordinator.groups.values())]

    def controller() -> ControllerSnapshot | None:
        c = broker.controller
        if c is None:
            return None
        image = c.image
        quorum, view = getattr(c, "_quorum", None), None
        if hasattr(c, "describe_quorum"):  # the Raft controller's public view
            view = c.describe_quorum()
            active, leader = bool(c.is_active), view.get("leader_id")
            epoch, high_watermark = view.get("epoch", 0), view.get("high_watermark", 0)
        elif quorum is not None:  # the single-voter quorum
            active, leader = bool(quorum.is_leader), quorum.leader_id
            epoch, high_watermark = quorum.epoch, quorum.end_offset
        else:
            return None
        end = quorum.end_offset if quorum is not None else high_watermark
        return ControllerSnapshot(
            is_active=active, leader_id=leader if leader is not None and leader >= 0 else None,
            epoch=epoch, high_watermark=high_watermark,
            last_committed_offset=min(high_watermark, end) - 1, last_applied_offset=image.offset,
            topic_count=len(image.topics),
            partition_count=sum(len(t.partitions) for t in image.topics.values()),
            broker_count=sum(1 for b in image.brokers.values() if not b.fenced),
            fenced_broker_count=sum(1 for b in image.brokers.values() if b.fenced),
            offline_partition_count=sum(
                1 for t in image.topics.values() for p in t.partitions.values() if p.leader < 0)
            if active else 0,
            replica_lag=_replica_lag(view) if active and view is not None else {})

    return {"partitions": partitions, "groups": groups, "controller": controller}


def _replica_lag(view: dict) -> dict[int, int]:
    """Per replica, the metadata log entries it is behind the leader (from describe_quorum())."""
    replicas = view.get("replicas") or {}
    end = max((r["log_end_offset"] for r in replicas.values()), default=0)
    return {node: max(0, end - r["log_end_offset"]) for node, r in replicas.items()
            if r["log_end_offset"] >= 0}
