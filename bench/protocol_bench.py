"""Codec micro-benchmarks: prints µs per operation (a script, not a test).

    .venv/bin/python bench/protocol_bench.py [--quick]

Cases: request header decode; Produce decode with one 16 KiB batch; Metadata response encode for
100 topics x 10 partitions; Fetch response encode with 1 MiB of record slots (file slices sent
separately). For scale, the same header decoded by construct's stock compiled Struct is timed too.
"""

import argparse
import sys
import timeit
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import construct  # noqa: E402

import protocol  # noqa: E402
from protocol import messages as m  # noqa: E402


class FileSlice:
    """Stands in for storage's (fd, position, length) slice."""

    def __init__(self, length):
        self.length = length

    def __len__(self):
        return self.length


def produce_frame():
    body = m.ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[m.ProduceRequest.TopicProduceData(
        name="bench-topic", partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=b"\x07" * 16384)])])
    return protocol.encode_request(0, 9, 12345, "producer-1", body)


def metadata_response(topic_count=100, partition_count=10):
    brokers = [m.MetadataResponse.MetadataResponseBroker(node_id=i, host=f"broker-{i}", port=9092) for i in range(3)]
    topics = [m.MetadataResponse.MetadataResponseTopic(
        name=f"topic-{t:03d}", topic_id=uuid.uuid4(), partitions=[m.MetadataResponse.MetadataResponsePartition(
            partition_index=p, leader_id=p % 3, leader_epoch=5, replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2])
            for p in range(partition_count)]) for t in range(topic_count)]
    return m.MetadataResponse(brokers=brokers, cluster_id="cluster", controller_id=0, topics=topics)


def fetch_response():
    partitions = [m.FetchResponse.PartitionData(partition_index=p, high_watermark=1000, last_stable_offset=1000,
                                                log_start_offset=0, records=FileSlice(65536)) for p in range(16)]
    return m.FetchResponse(session_id=1, responses=[m.FetchResponse.FetchableTopicResponse(
        topic_id=uuid.uuid4(), partitions=partitions)])


def stock_construct_header():
    """Request header v1 with construct's own primitives, compiled, for comparison."""
    return construct.Struct(
        "api_key" / construct.Int16sb,
        "api_version" / construct.Int16sb,
        "correlation_id" / construct.Int32sb,
        "client_id" / construct.PascalString(construct.Int16sb, "utf8"),
    ).compile()


def measure(label, fn, seconds):
    fn()  # warm up (compiles the schema on first use)
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    runs = max(3, int(seconds / max(timer.timeit(number) / number, 1e-9) / number))
    best = min(timer.repeat(repeat=runs if runs < 7 else 7, number=number)) / number
    print(f"{label:<62} {best * 1e6:10.2f} µs/op")
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    args = parser.parse_args()
    seconds = 0.2 if args.quick else 1.0

    frame = produce_frame()
    header_frame = frame[:24]
    v1_header = protocol.encode_request(3, 8, 12345, "producer-1", m.MetadataRequest())[:20]
    stock = stock_construct_header()
    meta = metadata_response()
    fetch = fetch_response()

    print(f"protocol codec, Python {sys.version.split()[0]}, construct {construct.__version__}")
    small_meta = metadata_response(10, 1)
    measure("request header decode (v2, client id 'producer-1')", lambda: protocol.decode_request_header(header_frame), seconds)
    ours = measure("request header decode (v1)", lambda: protocol.decode_request_header(v1_header), seconds)
    stock_time = measure("  reference: construct stock compiled Struct, header v1", lambda: stock.parse(v1_header), seconds)
    print(f"  -> header v1 decode is {stock_time / ours:.1f}x faster than stock compiled construct")
    measure("Produce v9 request decode, one 16 KiB batch", lambda: protocol.decode_request(frame), seconds)
    measure("Metadata v12 response encode, 100 topics x 10 partitions", lambda: protocol.encode_response(3, 12, 1, meta), seconds)
    measure("Metadata v12 response encode, 10 topics x 1 partition", lambda: protocol.encode_response(3, 12, 1, small_meta), seconds)
    measure("Fetch v13 response encode_parts, 16 x 64 KiB record slots", lambda: protocol.encode_response_parts(1, 13, 1, fetch), seconds)


if __name__ == "__main__":
    main()
