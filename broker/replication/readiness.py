"""Readiness after a (re)start: the replicas this broker follows are back in their ISR.

A rolling restart (a StatefulSet RollingUpdate, a script) stops the next broker as soon as this one
is ready. Were it ready before its replicas caught up, that next stop could leave partitions with
fewer in-sync replicas than min.insync.replicas (acks=all refused) or with no in-sync replica left
to take over leadership. So once started, the ``replicas`` condition of /readyz waits until every
partition placed here that has a leader elsewhere lists this broker in its ISR, then holds for the
rest of the process's life: later lag is the ISR's business (the leader shrinks it), not a reason
to take the broker out of its Service.
"""

from __future__ import annotations


class ReplicasCaughtUp:
    """A readiness check (see ``Health.add_check``): ``(ok, detail)``."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.caught_up = False

    def behind(self) -> list[str]:
        """The partitions this broker follows but is not yet in sync with."""
        node = self.broker.node_id
        out = []
        for topic in self.broker.image.topics.values():
            for index, partition in topic.partitions.items():
                # A replica being added by a reassignment is not in sync yet by design: not ours to
                # wait for. Nor one without a leader: nothing to catch up from.
                if (node in partition.replicas and node not in partition.isr
                        and node not in partition.adding_replicas
                        and partition.leader not in (-1, node)):
                    out.append(f"{topic.name}-{index}")
        return out

    def registered(self) -> bool:
        """The image holds this process's registration, unfenced: it has then also applied what came
        before it, such as the ISR removals of this broker's last controlled shutdown (an image
        still replaying an older state would show this broker in sync when it is not)."""
        lifecycle = self.broker.lifecycle
        entry = self.broker.image.brokers.get(self.broker.node_id)
        return (lifecycle is not None and entry is not None and not entry.fenced
                and entry.incarnation_id == lifecycle.incarnation_id)

    def __call__(self) -> tuple[bool, str]:
        if self.caught_up:
            return True, "ok"
        if not self.registered():
            return False, "waiting for this broker's registration in the metadata"
        behind = self.behind()
        if behind:
            return False, f"{len(behind)} replica(s) catching up with their leaders, e.g. {behind[0]}"
        self.caught_up = True
        return True, "ok"
