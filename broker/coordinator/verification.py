"""Produce's transaction partition verification (KIP-890 part 1).

Before a transactional batch goes into a partition's log, the leader asks the transaction coordinator
whether that partition is part of the producer's ongoing transaction. A batch that is not (a stray
write, or a retry that lands after its transaction was aborted) is refused: appended, it would open a
transaction that no marker ever closes, and the partition's last stable offset would stall for good.

Only a transaction's first batch on a partition costs a coordinator check, as with Kafka's
verification guard: once the log holds an ongoing transaction for the producer id at this epoch, the
partition is known to be in it until the commit/abort marker closes it.

    refused = await refused_batches(ctx, transactional_id, [(key, partition, batch_header), ...])
    # -> {key: (ErrorCode, message)} for the batches that must not be appended
"""

from __future__ import annotations

from typing import Optional

from protocol import ErrorCode

from .service import TRANSACTION_TOPIC, CoordinatorService

E = ErrorCode

# Coordinator answers a Produce client (v11 and below) cannot act on, translated as Kafka does:
# retriable ones become NOT_ENOUGH_REPLICAS (retried without a metadata refresh).
_RETRIABLE = frozenset({E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                        E.NOT_COORDINATOR, E.CONCURRENT_TRANSACTIONS})


async def refused_batches(ctx, transactional_id: Optional[str], candidates) -> dict:
    """The transactional batches among `candidates` ((key, partition, batch header) triples) that
    the coordinator does not place in their producer's ongoing transaction, as {key: (code, msg)}.

    Returns without yielding once the coordinators are loaded, so a caller that appends right away
    (inline) cannot have a commit/abort marker slip in between the check and the append."""
    service = await CoordinatorService.of(ctx.broker)
    txns = service.txns
    refused = {}
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
                continue  # coordinated by another broker, which we cannot ask: as a pre-KIP-890 leader
            if where is not E.NONE:
                refused[key] = _for_produce(where)
                continue
        tp = (partition.topic, partition.index)
        code = txns.verify_partitions(txn_id, batch.producer_id, batch.producer_epoch, [tp])[tp]
        if code is not E.NONE:
            refused[key] = _for_produce(code)
    return refused


def _in_ongoing_transaction(partition, batch) -> bool:
    """The verification guard: the log already has this producer epoch's transaction open."""
    entry = partition.log.producer_state.producers.get(batch.producer_id)
    return (entry is not None and entry.epoch == batch.producer_epoch
            and entry.current_txn_first_offset is not None)


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
