"""Produce's transaction partition verification (KIP-890 part 1).

Before a transactional batch goes into a partition's log, the leader asks the transaction coordinator
whether that partition is part of the producer's ongoing transaction. A batch that is not (a stray
write, or a retry that lands after its transaction was aborted) is refused: appended, it would open a
transaction that no marker ever closes, and the partition's last stable offset would stall for good.

Only a transaction's first batch on a partition costs a coordinator check, as with Kafka's
verification guard: once the log holds an ongoing transaction for the producer id at this epoch, the
partition is known to be in it until the commit/abort marker closes it.

A coordinator on this broker is asked directly; one on another broker with AddPartitionsToTxn v5
(VerifyOnly), as Kafka's AddPartitionsToTxnManager does. While that question is out, a verification
guard per (partition, producer id) stands: a marker that lands meanwhile removes it, and the batch is
then refused instead of reopening a transaction that just closed.

    refused = await refused_batches(ctx, transactional_id, [(key, partition, batch_header), ...])
    # -> {key: (ErrorCode, message)} for the batches that must not be appended
"""

from __future__ import annotations

from typing import Optional

from protocol import ErrorCode, messages

from .service import TRANSACTION_TOPIC, CoordinatorService

E = ErrorCode
ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 5      # VerifyOnly arrived in v4; v5 answers TRANSACTION_ABORTABLE (KIP-890)

# Coordinator answers a Produce client (v11 and below) cannot act on, translated as Kafka does:
# retriable ones become NOT_ENOUGH_REPLICAS (retried without a metadata refresh).
_RETRIABLE = frozenset({E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                        E.NOT_COORDINATOR, E.CONCURRENT_TRANSACTIONS})


async def refused_batches(ctx, transactional_id: Optional[str], candidates) -> dict:
    """The transactional batches among `candidates` ((key, partition, batch header) triples) that
    the coordinator does not place in their producer's ongoing transaction, as {key: (code, msg)}.

    When this broker coordinates the transactional id, returns without yielding, so a caller that
    appends right away (inline) cannot have a commit/abort marker slip in between the check and the
    append. A coordinator on another broker is asked with AddPartitionsToTxn (verify only); a marker
    that lands here while that question is out spends the verification (the batch is refused)."""
    service = await CoordinatorService.of(ctx.broker)
    txns = service.txns
    refused = {}
    remote = []
    for key, partition, batch in candidates:
        if _in_ongoing_transaction(partition, batch):
            continue
        txn_id = transactional_id
        if txn_id is None:
            # Kafka refuses transactional records without a transactional id; we find the id from
            # the producer id instead, and let through a producer id no transaction owns.
            txn_id = txns.transactional_id_of(batch.producer_id)
            if txn_id is None:
                continue
        else:
            where = _coordinator_error(ctx, service, txn_id)
            if where is E.NOT_COORDINATOR:
                remote.append((key, partition, batch))
                continue
            if where is not E.NONE:
                refused[key] = _for_produce(where)
                continue
        tp = (partition.topic, partition.index)
        code = txns.verify_partitions(txn_id, batch.producer_id, batch.producer_epoch, [tp])[tp]
        if code is not E.NONE:
            refused[key] = _for_produce(code)
    if remote:
        refused.update(await _verify_remotely(service, transactional_id, remote))
    return refused


async def _verify_remotely(service, transactional_id: str, candidates) -> dict:
    guards = {}
    by_producer: dict[tuple[int, int], list] = {}
    for key, partition, batch in candidates:
        token = object()
        service.verification_guards[(partition.topic, partition.index, batch.producer_id)] = token
        guards[key] = ((partition.topic, partition.index, batch.producer_id), token)
        by_producer.setdefault((batch.producer_id, batch.producer_epoch), []).append((key, partition))
    refused = {}
    for (producer_id, producer_epoch), items in by_producer.items():
        tps = [(p.topic, p.index) for _, p in items]
        codes = await verify_with_coordinator(service, transactional_id, producer_id, producer_epoch, tps)
        for key, partition in items:
            code = codes[(partition.topic, partition.index)]
            if code is not E.NONE:
                refused[key] = _for_produce(code)
    for key, (guard_key, token) in guards.items():
        if service.verification_guards.get(guard_key) is not token:
            # a commit/abort marker arrived while we asked: the answer is stale (Kafka's verification guard)
            refused.setdefault(key, (E.INVALID_TXN_STATE, "The transaction ended while the partition was verified"))
        else:
            del service.verification_guards[guard_key]
    return refused


async def verify_with_coordinator(service, transactional_id: str, producer_id: int, producer_epoch: int,
                                  partitions) -> dict[tuple[str, int], ErrorCode]:
    """Ask the transactional id's coordinator, wherever it is, whether `partitions` are in the producer's
    ongoing transaction: {partition: coordinator error} (AddPartitionsToTxn v5 with VerifyOnly)."""
    from broker.interbroker.client import PeerUnavailable

    partitions = list(partitions)
    where = service.coordinator_error(TRANSACTION_TOPIC, service.txn_partition(transactional_id))
    if where is E.NONE:
        return service.txns.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
    if where is not E.NOT_COORDINATOR:
        return {tp: where for tp in partitions}
    coordinator = service.broker.image.partition(TRANSACTION_TOPIC, service.txn_partition(transactional_id)).leader
    A = messages.AddPartitionsToTxnRequest
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    request = A(transactions=[A.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
        verify_only=True, topics=[A.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])])
    try:
        response = await service.peer_client().request(
            coordinator, ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, request,
            timeout=service.broker.config["request.timeout.ms"] / 1000)
    except PeerUnavailable:
        return {tp: E.NETWORK_EXCEPTION for tp in partitions}
    if response.error_code:
        return {tp: _code(response.error_code) for tp in partitions}
    answered = {}
    for txn in response.results_by_transaction:
        for topic in txn.topic_results:
            for p in topic.results_by_partition:
                answered[(topic.name, p.partition_index)] = _code(p.partition_error_code)
    return {tp: answered.get(tp, E.UNKNOWN_SERVER_ERROR) for tp in partitions}


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return E.UNKNOWN_SERVER_ERROR


def _in_ongoing_transaction(partition, batch) -> bool:
    """The verification guard: the log already has this producer's transaction open (at this
    epoch, or a later one that the append refuses this one against)."""
    return partition.log.producer_state.in_transaction(batch.producer_id, batch.producer_epoch)


def _coordinator_error(ctx, service: CoordinatorService, transactional_id: str) -> ErrorCode:
    if TRANSACTION_TOPIC not in ctx.image.topics:
        return E.COORDINATOR_NOT_AVAILABLE  # no transaction can have begun yet
    return service.coordinator_error(TRANSACTION_TOPIC, service.txn_partition(transactional_id))


def _for_produce(code: ErrorCode) -> tuple[ErrorCode, str]:
    """What Produce v11 and below answers for a failed verification (Kafka's translation)."""
    if code in _RETRIABLE:
        return (E.NOT_ENOUGH_REPLICAS,
                f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}")
    if code is E.PRODUCER_FENCED:
        return E.INVALID_PRODUCER_EPOCH, "Producer's epoch is lower than the transaction coordinator's"
    if code in (E.TRANSACTION_ABORTABLE, E.INVALID_TXN_STATE):
        return E.INVALID_TXN_STATE, "Partition was not added to the transaction"
    return code, None
