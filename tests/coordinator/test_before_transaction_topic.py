"""Transaction requests before `__transaction_state` exists, version by version, as Kafka 3.9 answers
them (checked against a fresh Kafka 3.9.0): only FindCoordinator creates the topic; until then no
broker coordinates any transactional id, so each request is NOT_COORDINATOR and creates nothing,
after the checks Kafka makes first (the partitions, the empty id, the timeout).

    python -m tests.coordinator.test_before_transaction_topic HOST:PORT    # the same checks on any broker
"""

from __future__ import annotations

import time

from protocol import ErrorCode as E
from protocol import messages as m

from tests.coordinator.fresh_broker_checks import on_broker_named_in_argv, on_fresh_odradek

NC = E.NOT_COORDINATOR


def _add(topics, txn="tx"):
    A = m.AddPartitionsToTxnRequest
    return A(v3_and_below_transactional_id=txn, v3_and_below_producer_id=5, v3_and_below_producer_epoch=0,
             v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=n, partitions=ps) for n, ps in topics])


def _added(answer) -> dict:
    """AddPartitionsToTxn's results as {(topic, partition): code}."""
    return {(t.name, p.partition_index): p.partition_error_code
            for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}


def _requests():
    """(api key, versions, request, what to read from the answer, the value expected)."""
    init = m.InitProducerIdRequest
    code = (lambda answer: answer.error_code)
    yield 22, range(0, 6), init(transactional_id="tx", transaction_timeout_ms=60_000), code, NC
    yield 22, [4], init(transactional_id="tx", transaction_timeout_ms=10**9), code, E.INVALID_TRANSACTION_TIMEOUT
    yield 22, [4], init(transactional_id="", transaction_timeout_ms=60_000), code, E.INVALID_REQUEST
    yield 24, range(0, 4), _add([("t", [0])]), _added, {("t", 0): NC}
    yield 24, [3], _add([("t", [0])], txn=""), _added, {("t", 0): E.INVALID_REQUEST}
    yield 24, [3], _add([("nosuch", [0]), ("t", [0, 7])]), _added, {
        ("nosuch", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("t", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 0): E.OPERATION_NOT_ATTEMPTED}
    yield 24, [3], _add([("__consumer_offsets", [0]), ("t", [0])]), _added, {
        ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED, ("t", 0): E.OPERATION_NOT_ATTEMPTED}
    offsets = m.AddOffsetsToTxnRequest
    yield 25, range(0, 4), offsets(transactional_id="tx", producer_id=5, producer_epoch=0, group_id="g"), code, NC
    yield 25, [3], offsets(transactional_id="", producer_id=5, producer_epoch=0, group_id="g"), code, E.INVALID_REQUEST
    end = m.EndTxnRequest
    yield 26, range(0, 4), end(transactional_id="tx", producer_id=5, producer_epoch=0, committed=True), code, NC
    yield 26, [3], end(transactional_id="", producer_id=5, producer_epoch=0, committed=False), code, E.INVALID_REQUEST
    yield 65, [0], m.DescribeTransactionsRequest(transactional_ids=["", "tx"]), \
        (lambda answer: [t.error_code for t in answer.transaction_states]), [E.INVALID_REQUEST, NC]
    yield 66, [0, 1], m.ListTransactionsRequest(state_filters=[], producer_id_filters=[]), \
        (lambda answer: (answer.error_code, answer.transaction_states)), (0, [])


def _transaction_topic_error(client) -> int:
    M = m.MetadataRequest
    return client.request(3, 12, M(topics=[M.MetadataRequestTopic(name="__transaction_state")],
                                    allow_auto_topic_creation=False)).topics[0].error_code


def check(client) -> None:
    """On a broker with topic `t` and no `__transaction_state`: each transaction request's answer,
    then FindCoordinator creates the topic and the id is served."""
    assert _transaction_topic_error(client) == E.UNKNOWN_TOPIC_OR_PARTITION
    for key, versions, request, read, expected in _requests():
        for version in versions:
            answer = client.request(key, version, request)
            assert read(answer) == expected, (key, version, answer)
    assert _transaction_topic_error(client) == E.UNKNOWN_TOPIC_OR_PARTITION   # nothing created it
    deadline = time.monotonic() + 15
    init = m.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000)
    while client.request(10, 3, m.FindCoordinatorRequest(key="tx", key_type=1)).error_code != E.NONE or \
            client.request(22, 4, init).error_code in (NC, E.COORDINATOR_LOAD_IN_PROGRESS):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert client.request(65, 0, m.DescribeTransactionsRequest(transactional_ids=["tx"])) \
        .transaction_states[0].transaction_state == "Empty"


def test_transaction_requests_answer_not_coordinator_until_find_coordinator_creates_the_topic(tmp_path):
    on_fresh_odradek(check, tmp_path)


if __name__ == "__main__":
    on_broker_named_in_argv(check)
