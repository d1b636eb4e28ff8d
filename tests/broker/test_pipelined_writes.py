"""Responses written together (one gather write per burst) stay whole, paired and in order."""

from protocol import messages
from protocol.records import iter_batches

from tests.broker.raw_client import batch


def test_pipelined_fetches_and_metadata_come_back_whole_and_in_order(client):
    client.create_topic("burst")
    values = [bytes([i]) * (1000 + 97 * i) for i in range(8)]
    for value in values:
        assert client.produce("burst", 0, batch([value])).error_code == 0
    F, M = messages.FetchRequest, messages.MetadataRequest
    expected = []
    for round_ in range(30):
        offset = round_ % len(values)
        fetch = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic="burst", partitions=[
                      F.FetchPartition(partition=0, fetch_offset=offset,
                                       partition_max_bytes=1 << 20)])],
                  forgotten_topics_data=[], rack_id="")
        expected.append((client.send(1, 11, fetch), 1, offset))
        metadata = M(topics=[M.MetadataRequestTopic(name="burst")])
        expected.append((client.send(3, 9, metadata), 3, None))
    for correlation_id, api_key, offset in expected:
        received_id, response = client.receive(api_key, 11 if api_key == 1 else 9)
        assert received_id == correlation_id
        if api_key == 3:
            assert response.topics[0].name == "burst"
            continue
        records = bytes(response.responses[0].partitions[0].records)
        stored = [r.value for b in iter_batches(records) for r in b.records()]
        assert stored == values[offset:]
