"""Sending a leader's ISR proposals to the active controller: AlterPartition (KIP-497), one in flight
per partition, its answer handled as Kafka's Partition does (see ``LeaderState.proposal_failed``).

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
        self._nursery = None

    def send(self, partition, state, proposal) -> None:
        nursery = self.broker.replication_nursery
        nursery.start_soon(self._send, partition, state, proposal)

    def _request(self, partition, state, proposal):
        image = self.broker.image
        R = m.AlterPartitionRequest
        members = []
        for replica in proposal.new_isr:
            progress = state.followers.get(replica)
            epoch = progress.broker_epoch if progress is not None and progress.broker_epoch >= 0 else -1
            if epoch < 0 and replica in image.brokers:
                epoch = image.brokers[replica].epoch
            members.append(R.BrokerState(broker_id=replica, broker_epoch=epoch))
        return R(broker_id=self.broker.node_id, broker_epoch=self.broker.broker_epoch, topics=[
            R.TopicData(topic_id=partition.topic_id, partitions=[R.PartitionData(
                partition_index=partition.index, leader_epoch=proposal.leader_epoch,
                new_isr_with_epochs=members, leader_recovery_state=0,
                partition_epoch=proposal.partition_epoch)])])

    async def _send(self, partition, state, proposal) -> None:
        client = getattr(self.broker.controller, "client", None)
        if client is None:
            log.warning("%s-%d: no controller to send the ISR change %s to", partition.topic,
                        partition.index, list(proposal.new_isr))
            state.proposal_failed(ErrorCode.OPERATION_NOT_ATTEMPTED)
            return
        shrank = len(proposal.new_isr) < len(state.isr)
        while state.pending is proposal and partition.replica_state is state:
            error, answer = await self._call(client, self._request(partition, state, proposal))
            if error == ErrorCode.NONE:
                log.info("%s-%d: ISR %s -> %s (partition epoch %d)", partition.topic, partition.index,
                         list(state.isr), list(answer.isr), answer.partition_epoch)
                if answer.leader_epoch == state.leader_epoch:
                    state.proposal_committed(answer.partition_epoch, answer.isr)
                    self.manager.on_isr_committed(partition, state, shrank)
                return
            log.info("%s-%d: ISR change to %s answered %s", partition.topic, partition.index,
                     list(proposal.new_isr), ErrorCode(error).name)
            if not state.proposal_failed(error):
                return
            await trio.sleep(RETRY_BACKOFF_S)

    async def _call(self, client, request):
        try:
            response = await client.call(API_KEY, VERSION, request, timeout_s=REQUEST_TIMEOUT_S)
        except Exception as exc:   # no controller reachable: the outcome is unknown, retry
            log.debug("AlterPartition failed: %s", exc)
            return ErrorCode.REQUEST_TIMED_OUT, None
        if response.error_code:
            return response.error_code, None
        for topic in response.topics:
            for answer in topic.partitions:
                return answer.error_code, answer
        return ErrorCode.UNKNOWN_SERVER_ERROR, None
