"""Produce (key 0), v0–v11.

Batches are appended as opaque bytes (storage validates the 61-byte headers and CRCs, assigns offsets,
checks idempotent / transactional producer state). Once every partition is appended the connection
may start its next request; then the appends are acknowledged — after the fsync when
``log.flush.before.acknowledge`` is on — which advances the high watermark and wakes waiting fetches.
acks=0 gets no response at all.

Produce v0–v2 carry message format v0/v1, which Kafka 4 no longer stores: the versions stay
advertised (min 0, as Kafka 4 does, because some librdkafka releases turn compression off otherwise)
and storage rejects the old-format batches with Kafka's error.
"""

from __future__ import annotations

import logging

from protocol import ErrorCode, messages

from protocol.records import RecordBatchError, validate_produce_records

from broker.handlers import common
from broker.partitions import PartitionError
from storage.errors import StorageError

log = logging.getLogger("odradek.produce")

API_KEY = 0
Response = messages.ProduceResponse


def _partition_response(index, error, message=None, base_offset=-1, log_append_time=-1,
                        log_start_offset=-1):
    return Response.PartitionProduceResponse(
        index=index, error_code=error, base_offset=base_offset, log_append_time_ms=log_append_time,
        log_start_offset=log_start_offset, record_errors=[], error_message=message)


async def handle_produce(ctx, header, body):
    acks = body.acks
    partitions = ctx.partitions
    results: list[tuple[str, list]] = []
    appended = []

    for topic in body.topic_data:
        answers = []
        results.append((topic.name, answers))
        for data in topic.partition_data:
            index = data.index
            if acks not in (-1, 0, 1):
                answers.append(_partition_response(index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if common.is_internal(topic.name):
                answers.append(_partition_response(
                    index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Cannot append to internal topic {topic.name}"))
                continue
            try:
                partition = partitions.leader(topic.name, index)
                if acks == -1 and len(partition.isr) < partition.min_insync_replicas:
                    raise PartitionError(
                        ErrorCode.NOT_ENOUGH_REPLICAS,
                        f"The size of the current ISR {len(partition.isr)} is insufficient to "
                        f"satisfy the min.isr requirement of {partition.min_insync_replicas}")
                validate_produce_records(data.records, header.api_version)
                result = await partitions.append(partition, data.records)
            except PartitionError as exc:
                answers.append(_partition_response(index, exc.code, exc.message))
                continue
            except (StorageError, RecordBatchError) as exc:
                answers.append(_partition_response(index, exc.error_code, str(exc)))
                continue
            answer = _partition_response(index, ErrorCode.NONE, None, result.first_offset,
                                         result.log_append_time, result.log_start_offset)
            answers.append(answer)
            appended.append((partition, result, answer, len(data.records)))

    # The appends are in the log in request order: the connection's next request may go ahead
    # (its appends queue behind these), while these wait for durability.
    ctx.release_order()
    for partition, result, answer, _ in appended:
        try:
            await partitions.acknowledge(partition, result)
        except StorageError as exc:
            answer.error_code, answer.error_message = exc.error_code, exc.message
            answer.base_offset = -1

    ctx.broker.record_produce(body, appended)
    if acks == 0:
        return None
    return Response(responses=[Response.TopicProduceResponse(name=name, partition_responses=answers)
                               for name, answers in results], throttle_time_ms=0)


HANDLERS = {API_KEY: (0, 11, handle_produce)}
