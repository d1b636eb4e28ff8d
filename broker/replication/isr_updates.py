"""Sending a leader's ISR proposals to the active controller: AlterPartition (KIP-497), answered as
Kafka's Partition does (see ``LeaderState.proposal_failed``).

As Kafka's AlterPartitionManager, the proposals of every partition this broker leads travel together:
one request in flight, carrying all that are pending. After a leader change a broker may have hundreds
of ISR changes to make; one request each would queue as many metadata writes (and commits) on the
controller, delaying everything behind them, heartbeats included.

The request goes over the controller listener through the cluster's controller client (which follows
the active controller and retries on NOT_CONTROLLER); a node without one (the one-node quorum, where
no partition has a follower) has nothing to send.
"""

from __future__ import annotations

import logging

import trio

from protocol import ErrorCode, messages as m

log = logging.getLogger("odradek.replication")

API_KEY = 56
VERSION = 3                  # topic ids, NewIsrWithEpochs (KIP-903)
RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_S = 10.0


class IsrUpdates:
    def __init__(self, broker, manager):
        self.broker = broker
        self.manager = manager
        # (topic id, index) -> (partition, state, proposal, whether it shrinks the ISR)
        self._queued: dict[tuple, tuple] = {}
        self._sending = False

    def send(self, partition, state, proposal) -> None:
        """Queue `proposal` for the next AlterPartition (a newer one for the partition replaces it)."""
        shrinks = len(proposal.new_isr) < len(state.isr)
        self._queued[(partition.topic_id, partition.index)] = (partition, state, proposal, shrinks)
        if not self._sending:
            self._sending = True
            self.broker.replication_nursery.start_soon(self._send_queued)

    async def _send_queued(self) -> None:
        try:
            while self._queued:
                batch, self._queued = self._queued, {}
                batch = {key: item for key, item in batch.items() if _still_pending(*item[:3])}
                if batch and await self._send_batch(batch):
                    await trio.sleep(RETRY_BACKOFF_S)
        finally:
            self._sending = False

    async def _send_batch(self, batch: dict) -> bool:
        """One AlterPartition for `batch`; True when some of it is queued again for a retry."""
        client = getattr(self.broker.controller, "client", None)
        if client is None:
            for partition, state, proposal, _ in batch.values():
                log.warning("%s-%d: no controller to send the ISR change %s to", partition.topic,
                            partition.index, list(proposal.new_isr))
                state.proposal_failed(ErrorCode.OPERATION_NOT_ATTEMPTED)
            return False
        answers = await self._call(client, batch)
        retry = False
        for key, item in batch.items():
            error, answer = answers.get(key, (ErrorCode.UNKNOWN_SERVER_ERROR, None))
            if self._answered(*item, error, answer) and key not in self._queued:
                self._queued[key] = item
                retry = True
        return retry

    def _answered(self, partition, state, proposal, shrinks, error, answer) -> bool:
        """Apply one partition's answer; True when the same proposal should be sent again. A
        success counts even when the new image got here first; an error only while the proposal
        is still the one waited on."""
        if error == ErrorCode.NONE:
            log.info("%s-%d: ISR %s -> %s (partition epoch %d)", partition.topic, partition.index,
                     list(state.isr), list(answer.isr), answer.partition_epoch)
            if answer.leader_epoch == state.leader_epoch:
                state.proposal_committed(answer.partition_epoch, answer.isr)
                self.manager.on_isr_committed(partition, state, shrinks)
            return False
        log.info("%s-%d: ISR change to %s answered %s", partition.topic, partition.index,
                 list(proposal.new_isr), ErrorCode(error).name)
        return _still_pending(partition, state, proposal) and state.proposal_failed(error)

    def _request(self, batch: dict):
        image = self.broker.image
        R = m.AlterPartitionRequest
        topics: dict = {}
        for partition, state, proposal, _ in batch.values():
            members = []
            for replica in proposal.new_isr:
                progress = state.followers.get(replica)
                epoch = progress.broker_epoch if progress is not None and progress.broker_epoch >= 0 else -1
                if epoch < 0 and replica in image.brokers:
                    epoch = image.brokers[replica].epoch
                members.append(R.BrokerState(broker_id=replica, broker_epoch=epoch))
            topics.setdefault(partition.topic_id, []).append(R.PartitionData(
                partition_index=partition.index, leader_epoch=proposal.leader_epoch,
                new_isr_with_epochs=members, leader_recovery_state=0,
                partition_epoch=proposal.partition_epoch))
        return R(broker_id=self.broker.node_id, broker_epoch=self.broker.broker_epoch, topics=[
            R.TopicData(topic_id=topic_id, partitions=partitions)
            for topic_id, partitions in topics.items()])

    async def _call(self, client, batch: dict) -> dict:
        """(topic id, index) -> (error, the partition's answer or None) for every partition asked."""
        try:
            response = await client.call(API_KEY, VERSION, self._request(batch),
                                         timeout_s=REQUEST_TIMEOUT_S)
        except Exception as exc:   # no controller reachable: the outcome is unknown, retry
            log.debug("AlterPartition failed: %s", exc)
            return dict.fromkeys(batch, (ErrorCode.REQUEST_TIMED_OUT, None))
        if response.error_code:
            return dict.fromkeys(batch, (response.error_code, None))
        return {(topic.topic_id, answer.partition_index): (answer.error_code, answer)
                for topic in response.topics for answer in topic.partitions}


def _still_pending(partition, state, proposal) -> bool:
    """Whether `proposal` is still what the partition's leader state waits on."""
    return state.pending is proposal and partition.replica_state is state
