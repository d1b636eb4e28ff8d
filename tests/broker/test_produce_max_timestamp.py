"""A produced batch's max timestamp is the records' own, whatever the producer wrote in the header.

sarama 1.x never sets a batch's MaxTimestamp (it sends -1). Kafka recomputes the field from the
records when it validates a client batch and stores the corrected header (CRC updated); a broker that
kept -1 answered ListOffsets by timestamp with -1 for every such batch and never expired it by time.
"""

import pytest

from protocol import ErrorCode
from protocol.records import Compression, RecordBatch, SimpleRecord, build_batch, iter_batches

from tests.broker.test_admin_apis import create

BASE = 1_709_528_767_008   # 2024-03-04T05:06:07.008Z


def stored_batches(client, topic):
    partition = client.fetch(topic, 0, 0).responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE
    return list(iter_batches(partition.records))


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
@pytest.mark.parametrize("written_max", [-1, 0, BASE + 99_999])
def test_the_stored_max_timestamp_is_the_records_largest(client, codec, written_max):
    topic = f"maxts-{int(codec)}-{written_max & 0xffff}"
    create(client, (topic, 1, 1, {}))
    records = [SimpleRecord(value=b"v%d" % i, key=b"k", timestamp=BASE + delta)
               for i, delta in enumerate((0, 5000, 2000))]
    client.produce(topic, 0, build_batch(records, compression_type=codec, max_timestamp=written_max))
    client.produce(topic, 0, build_batch([SimpleRecord(value=b"late", key=b"k",
                                                       timestamp=BASE + 9000)]))
    [first, second] = stored_batches(client, topic)
    first.ensure_valid()   # the CRC covers the rewritten field
    assert (first.max_timestamp, second.max_timestamp) == (BASE + 5000, BASE + 9000)
    assert [r.timestamp for r in first.records()] == [BASE, BASE + 5000, BASE + 2000]
    # the first record at or after a time, as Kafka answers sarama's GetOffset(topic, 0, ms)
    for wanted, expected in ((BASE - 3_600_000, 0), (BASE + 3000, 1), (BASE + 5001, 3),
                             (BASE + 9001, -1)):
        for version in (1, 7):
            assert client.list_offset(topic, 0, wanted, version=version).offset == expected
    found = client.list_offset(topic, 0, -3)   # MAX_TIMESTAMP
    assert (found.offset, found.timestamp) == (3, BASE + 9000)


def test_a_correct_header_is_stored_as_sent(client):
    create(client, ("maxts-kept", 1, 1, {}))
    sent = build_batch([SimpleRecord(value=b"x", timestamp=BASE + 7)])
    client.produce("maxts-kept", 0, sent)
    [stored] = stored_batches(client, "maxts-kept")
    assert bytes(stored.body()) == bytes(RecordBatch(sent, 0).body())
    assert stored.crc == RecordBatch(sent, 0).crc and stored.max_timestamp == BASE + 7
