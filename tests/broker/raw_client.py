"""A tiny blocking Kafka client over our own codec, for raw-protocol tests."""

from __future__ import annotations

import contextlib
import itertools
import time
import socket
import struct

import protocol
from protocol import messages
from protocol.records import SimpleRecord, build_batch


class RawClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._ids = itertools.count(1)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, api_key: int, version: int, body, correlation_id: int | None = None) -> int:
        correlation_id = next(self._ids) if correlation_id is None else correlation_id
        frame = protocol.encode_request(api_key, version, correlation_id, "raw-test", body)
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        return correlation_id

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def receive_frame(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def receive(self, api_key: int, version: int):
        return protocol.decode_response(api_key, version, self.receive_frame())

    def request(self, api_key: int, version: int, body):
        sent = self.send(api_key, version, body)
        correlation_id, response = self.receive(api_key, version)
        assert correlation_id == sent
        return response

    def _exactly(self, size: int) -> bytes:
        chunks, remaining = [], size
        while remaining:
            chunk = self.sock.recv(remaining)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    # ---- conveniences
    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None):
        T = messages.CreateTopicsRequest
        response = self.request(19, 7, T(topics=[T.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1,
            configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
            timeout_ms=5000))
        return response.topics[0]

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1, version: int = 9,
                transactional_id: str | None = None):
        P = messages.ProduceRequest
        body = P(transactional_id=transactional_id, acks=acks, timeout_ms=5000, topic_data=[
            P.TopicProduceData(name=topic, partition_data=[
                P.PartitionProduceData(index=partition, records=records)])])
        if acks == 0:
            self.send(0, version, body)
            return None
        response = self.request(0, version, body)
        return response.responses[0].partition_responses[0]

    def fetch(self, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0,
              min_bytes: int = 1, max_bytes: int = 1 << 20, version: int = 11,
              isolation_level: int = 0):
        F = messages.FetchRequest
        body = F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                 isolation_level=isolation_level, session_id=0, session_epoch=-1, topics=[
                     F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                         partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])],
                 forgotten_topics_data=[], rack_id="")
        return self.request(1, version, body)

    def list_offset(self, topic: str, partition: int, timestamp: int, version: int = 7,
                    isolation_level: int = 0):
        L = messages.ListOffsetsRequest
        response = self.request(2, version, L(replica_id=-1, isolation_level=isolation_level, topics=[
            L.ListOffsetsTopic(name=topic, partitions=[L.ListOffsetsPartition(
                partition_index=partition, timestamp=timestamp)])]))
        return response.topics[0].partitions[0]


def batch(values, timestamps=None, **kwargs) -> bytes:
    now = int(time.time() * 1000)
    timestamps = timestamps or [now + i for i in range(len(values))]
    return build_batch([SimpleRecord(value=v, key=None, timestamp=t)
                        for v, t in zip(values, timestamps)], **kwargs)


@contextlib.contextmanager
def raw_client_with_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60):
    """A RawClient on `bootstrap`, once `topic` was created there (replication factor 1)."""
    from broker.admin.client import KafkaClient
    from broker.admin.topics import create_topics

    admin = KafkaClient(bootstrap)
    try:
        create_topics(admin, [topic], partitions=partitions, replication_factor=1)
    finally:
        admin.close()
    host, port = bootstrap.rsplit(":", 1)
    with RawClient(host, int(port), timeout=timeout) as client:
        yield client
