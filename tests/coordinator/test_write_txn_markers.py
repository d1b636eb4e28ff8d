"""WriteTxnMarkers (27) over the wire: what a partition leader does when a transaction coordinator
(on this broker or another) closes a transaction on one of its partitions."""

import pytest

from broker.testing import running_broker
from protocol import ErrorCode as E
from protocol import messages as m
from protocol.records import ControlType, iter_batches
from tests.broker.raw_client import RawClient, batch

W = m.WriteTxnMarkersRequest


@pytest.fixture
def client(tmp_path):
    # verification off: these transactions have no coordinator here, as if coordinated elsewhere
    with running_broker(tmp_path / "data", {"transaction.partition.verification.enable": "false"}) as broker:
        with RawClient("127.0.0.1", broker.port) as raw:
            assert raw.create_topic("w", 2).error_code == 0
            yield raw


def begin(client, partition, producer_id, epoch=0, seq=0, values=(b"a", b"b")):
    records = batch(list(values), producer_id=producer_id, producer_epoch=epoch, base_sequence=seq,
                    transactional=True)
    P = m.ProduceRequest
    body = P(transactional_id=f"elsewhere-{producer_id}", acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name="w", partition_data=[P.PartitionProduceData(index=partition, records=records)])])
    answer = client.request(0, 9, body).responses[0].partition_responses[0]
    assert answer.error_code == 0
    return answer.base_offset


def marker(producer_id, commit, partitions, epoch=0, coordinator_epoch=3, topic="w"):
    return W.WritableTxnMarker(producer_id=producer_id, producer_epoch=epoch, transaction_result=commit,
                               coordinator_epoch=coordinator_epoch,
                               topics=[W.WritableTxnMarkerTopic(name=topic, partition_indexes=partitions)])


def write(client, *markers, version=1):
    response = client.request(27, version, W(markers=list(markers)))
    return [{(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
            for r in response.markers], [r.producer_id for r in response.markers]


def stable_offset(client, partition):
    return client.list_offset("w", partition, -1, isolation_level=1).offset


def committed_values(client, partition):
    response = client.fetch("w", partition, 0, isolation_level=1)
    part = response.responses[0].partitions[0]
    aborted = {a.producer_id for a in (part.aborted_transactions or [])}
    values, controls = [], []
    for b in iter_batches(bytes(part.records or b"")):
        if b.is_control:
            controls.append(b.control_record())
        elif b.producer_id not in aborted:
            values += [r.value for r in b.records()]
    return values, aborted, controls


@pytest.mark.parametrize("version", [0, 1])
def test_markers_close_transactions_for_read_committed(client, version):
    begin(client, 0, 5000)
    begin(client, 1, 5001)
    assert stable_offset(client, 0) == 0 and stable_offset(client, 1) == 0   # open: nothing stable
    results, producers = write(client, marker(5000, True, [0]), marker(5001, False, [1]), version=version)
    assert results == [{("w", 0): E.NONE}, {("w", 1): E.NONE}] and producers == [5000, 5001]
    assert stable_offset(client, 0) == 3 and stable_offset(client, 1) == 3   # 2 records + the marker
    values, aborted, controls = committed_values(client, 0)
    assert values == [b"a", b"b"] and not aborted
    assert [(c.type, c.coordinator_epoch) for c in controls] == [(ControlType.COMMIT, 3)]
    values, aborted, controls = committed_values(client, 1)
    assert values == [] and aborted == {5001}
    assert [(c.type, c.coordinator_epoch) for c in controls] == [(ControlType.ABORT, 3)]


def test_one_marker_over_several_partitions_and_unknown_ones(client):
    begin(client, 0, 6000)
    begin(client, 1, 6000, seq=0)
    results, _ = write(client, W.WritableTxnMarker(
        producer_id=6000, producer_epoch=0, transaction_result=True, coordinator_epoch=0, topics=[
            W.WritableTxnMarkerTopic(name="w", partition_indexes=[0, 1, 7]),
            W.WritableTxnMarkerTopic(name="nope", partition_indexes=[0])]))
    assert results == [{("w", 0): E.NONE, ("w", 1): E.NONE, ("w", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
                        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}]
    assert stable_offset(client, 0) == 3 and stable_offset(client, 1) == 3


def test_a_stale_coordinator_epoch_is_fenced_and_changes_nothing(client):
    begin(client, 0, 7000)
    assert write(client, marker(7000, True, [0], coordinator_epoch=5))[0] == [{("w", 0): E.NONE}]
    begin(client, 0, 7000, seq=2)
    end_before = client.list_offset("w", 0, -1).offset
    # a coordinator that lost its partition (older epoch) must not close the new transaction
    assert write(client, marker(7000, False, [0], coordinator_epoch=4))[0] == \
        [{("w", 0): E.TRANSACTION_COORDINATOR_FENCED}]
    assert client.list_offset("w", 0, -1).offset == end_before
    assert stable_offset(client, 0) == 3
    assert write(client, marker(7000, True, [0], coordinator_epoch=5))[0] == [{("w", 0): E.NONE}]
    assert stable_offset(client, 0) == end_before + 1


def test_a_marker_from_an_older_producer_epoch_is_refused(client):
    begin(client, 0, 8000, epoch=2)
    assert write(client, marker(8000, False, [0], epoch=1))[0] == [{("w", 0): E.INVALID_PRODUCER_EPOCH}]
    assert stable_offset(client, 0) == 0
    # an abort with a bumped epoch (a fenced producer's transaction) closes it
    assert write(client, marker(8000, False, [0], epoch=3))[0] == [{("w", 0): E.NONE}]
    assert stable_offset(client, 0) == 3 and committed_values(client, 0)[1] == {8000}


def test_an_empty_request_gets_an_empty_answer(client):
    assert write(client) == ([], [])
