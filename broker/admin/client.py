"""A small synchronous Kafka client on plain sockets and our codec.

Enough of a client for the admin tools and for tests; it talks to any Kafka-compatible broker:

    with KafkaClient("127.0.0.1:9092") as client:
        meta = client.metadata(["orders"])           # -> ClusterMetadata
        conn = client.leader("orders", 0)            # BrokerConnection to the partition's leader
        version, resp = conn.request(API.LIST_OFFSETS, lambda v: messages.ListOffsetsRequest(...))
        conn = client.coordinator("my-group")        # FindCoordinator, cached
        conn = client.any_broker()                   # for cluster-wide requests (KRaft forwards)

``BrokerConnection.request`` picks the highest version both the broker (ApiVersions, negotiated on
connect with the KIP-511 fallback) and our codec support, capped by ``max_version``; the body may be
given as a callable of the version so version-specific fields are set right. Top-level and
per-item error codes are left to the caller; ``KafkaError`` carries a code and Kafka's error name.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import protocol
from protocol import messages

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
CLIENT_SOFTWARE = ("odradek-admin", "0.1.0")


class API:
    """Api keys the admin tools use."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_QUORUM = 55
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_DESCRIBE = 77


def error_name(code: int) -> str:
    try:
        return protocol.ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


class KafkaError(Exception):
    """A Kafka error code (or a connection problem) with where it happened."""

    def __init__(self, code: int, message: str | None = None, context: str | None = None):
        self.code = code
        self.message = message
        self.context = context
        super().__init__(str(self))

    @property
    def name(self) -> str:
        return error_name(self.code)

    @property
    def retriable(self) -> bool:
        return self.code in RETRIABLE

    def __str__(self) -> str:
        text = self.name
        if self.message:
            text += f": {self.message}"
        return f"{self.context}: {text}" if self.context else text


#: Error codes worth a metadata refresh and a retry.
RETRIABLE = {3, 5, 6, 7, 13, 14, 15, 16, 19, 20, 51, 74, 75, 89}


def check(code: int, message: str | None = None, context: str | None = None) -> None:
    """Raise KafkaError for a non-zero error code."""
    if code:
        raise KafkaError(code, message, context)


class ConnectionFailed(KafkaError):
    """The broker could not be reached or dropped the connection (NETWORK_EXCEPTION)."""

    def __init__(self, message: str, context: str | None = None):
        super().__init__(13, message, context)


def codec_range(api_key: int) -> tuple[int, int]:
    spec = protocol.API_SPECS[api_key]
    if isinstance(spec, dict):
        return spec["min_version"], spec["max_version"]
    return spec.min_version, spec.max_version


# --------------------------------------------------------------------------- one connection


class BrokerConnection:
    """One blocking socket to one broker, with negotiated api versions."""

    def __init__(self, host: str, port: int, *, client_id: str = "odradek-admin",
                 timeout: float = 30.0, node_id: int | None = None, security=None):
        self.host, self.port, self.node_id = host, port, node_id
        self.client_id = client_id
        self.timeout = timeout
        self._correlation_id = 0
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ConnectionFailed(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.api_versions: dict[int, tuple[int, int]] = {}
        if security is not None:   # broker.security.client.ClientSecurity: TLS, then SASL
            try:
                self._sock = security.wrap(self._sock, host)
            except (OSError, ValueError) as exc:
                self.close()
                raise ConnectionFailed(f"TLS handshake with {host}:{port} failed: {exc}") from exc
        self._negotiate()
        if security is not None and security.mechanism:
            from broker.security.sasl import AuthenticationFailed
            try:
                security.authenticate(self.request)
            except AuthenticationFailed as exc:
                self.close()
                raise KafkaError(58, str(exc), f"{host}:{port}") from None

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port}, node {self.node_id})"

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    # ---------------------------------------------------------------- framing

    def _send(self, api_key: int, version: int, body: Any) -> int:
        self._correlation_id += 1
        cid = self._correlation_id
        data = protocol.encode_request(api_key, version, cid, self.client_id, body)
        try:
            self._sock.sendall(_SIZE.pack(len(data)) + data)
        except OSError as exc:
            raise ConnectionFailed(f"send to {self.host}:{self.port} failed: {exc}") from exc
        return cid

    def _recv_exact(self, n: int) -> bytes:
        chunks, remaining = [], n
        while remaining:
            try:
                chunk = self._sock.recv(min(remaining, 1 << 20))
            except socket.timeout as exc:
                raise KafkaError(7, f"no response from {self.host}:{self.port} "
                                    f"within {self.timeout:g}s") from exc
            except OSError as exc:
                raise ConnectionFailed(f"receive from {self.host}:{self.port} failed: {exc}") from exc
            if not chunk:
                raise ConnectionFailed(f"{self.host}:{self.port} closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _recv_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._recv_exact(4))
        if size < 4 or size > MAX_RESPONSE_BYTES:
            raise ConnectionFailed(f"bad response size {size} from {self.host}:{self.port}")
        return self._recv_exact(size)

    def _receive(self, api_key: int, version: int, cid: int) -> Any:
        frame = self._recv_frame()
        try:
            got, body = protocol.decode_response(api_key, version, frame)
        except protocol.DecodeError as exc:
            raise KafkaError(2, f"cannot decode {_api_name(api_key)} v{version} response: {exc}")
        if got != cid:
            raise ConnectionFailed(f"correlation id {got} does not match request {cid}")
        return body

    # ---------------------------------------------------------------- versions

    def _negotiate(self) -> None:
        lo, hi = codec_range(API.API_VERSIONS)
        version = min(hi, 3)
        cid = self._send(API.API_VERSIONS, version, self._api_versions_request(version))
        frame = self._recv_frame()
        try:
            _, resp = protocol.decode_response(API.API_VERSIONS, version, frame)
        except protocol.DecodeError:
            resp = None
        if resp is None or resp.error_code == 35:
            # KIP-511: a broker that does not know our version answers in v0 format with its ranges.
            _, resp = protocol.decode_response(API.API_VERSIONS, 0, frame)
            ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            broker_hi = ranges.get(API.API_VERSIONS, (0, 0))[1]
            version = max(lo, min(hi, broker_hi))
            cid = self._send(API.API_VERSIONS, version, self._api_versions_request(version))
            resp = self._receive(API.API_VERSIONS, version, cid)
        check(resp.error_code, context="ApiVersions")
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    @staticmethod
    def _api_versions_request(version: int):
        if version >= 3:
            return messages.ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE[0],
                                               client_software_version=CLIENT_SOFTWARE[1])
        return messages.ApiVersionsRequest()

    def version_for(self, api_key: int, max_version: int | None = None,
                    min_version: int = 0) -> int:
        """The highest version of an api both sides speak (within our own bounds)."""
        if api_key not in self.api_versions:
            raise KafkaError(35, f"the broker does not support {_api_name(api_key)}")
        b_lo, b_hi = self.api_versions[api_key]
        c_lo, c_hi = codec_range(api_key)
        hi = min(b_hi, c_hi, max_version if max_version is not None else c_hi)
        lo = max(b_lo, c_lo, min_version)
        if hi < lo:
            raise KafkaError(35, f"no common version of {_api_name(api_key)}: broker "
                                 f"{b_lo}-{b_hi}, client {max(c_lo, min_version)}-"
                                 f"{min(c_hi, max_version if max_version is not None else c_hi)}")
        return hi

    def supports(self, api_key: int) -> bool:
        return api_key in self.api_versions

    # ---------------------------------------------------------------- requests

    def request(self, api_key: int, body: Any | Callable[[int], Any], *,
                max_version: int | None = None, min_version: int = 0,
                expect_response: bool = True, timeout: float | None = None) -> tuple[int, Any]:
        """Send one request at the best common version; returns (version, response body).
        ``timeout`` overrides the connection's for this request (e.g. a JoinGroup that waits
        for a rebalance)."""
        version = self.version_for(api_key, max_version, min_version)
        if callable(body):
            body = body(version)
        cid = self._send(api_key, version, body)
        if not expect_response:
            return version, None
        if timeout is None:
            return version, self._receive(api_key, version, cid)
        self._sock.settimeout(timeout)
        try:
            return version, self._receive(api_key, version, cid)
        finally:
            self._sock.settimeout(self.timeout)


def _api_name(api_key: int) -> str:
    try:
        spec = protocol.API_SPECS[api_key]
        name = spec["name"] if isinstance(spec, dict) else spec.name
        return str(name).removesuffix("Request")
    except Exception:
        return f"api {api_key}"


# --------------------------------------------------------------------------- cluster view


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error_code: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: Any
    internal: bool
    error_code: int
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo]


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise ValueError("no bootstrap server given")
    return out


class KafkaClient:
    """Connections to a cluster: bootstrap, per-node, coordinators; metadata helpers."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "odradek-admin",
                 timeout: float = 30.0, security=None):
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = security
        self.client_id = client_id
        self.timeout = timeout
        self._bootstrap_conn: BrokerConnection | None = None
        self._nodes: dict[int, BrokerConnection] = {}
        self._coordinators: dict[str, BrokerConnection] = {}
        self._brokers: dict[int, BrokerInfo] = {}  # from the latest metadata response

    def __enter__(self) -> "KafkaClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for conn in {id(c): c for c in [self._bootstrap_conn, *self._nodes.values(),
                                         *self._coordinators.values()] if c}.values():
            conn.close()
        self._nodes.clear()
        self._coordinators.clear()
        self._bootstrap_conn = None

    def _connect(self, host: str, port: int, node_id: int | None = None) -> BrokerConnection:
        return BrokerConnection(host, port, client_id=self.client_id, timeout=self.timeout,
                                node_id=node_id, security=self.security)

    def any_broker(self) -> BrokerConnection:
        """A connection to some broker (the first bootstrap server that answers)."""
        if self._bootstrap_conn is not None:
            return self._bootstrap_conn
        errors: list[KafkaError] = []
        for host, port in self.bootstrap:
            try:
                self._bootstrap_conn = self._connect(host, port)
                return self._bootstrap_conn
            except KafkaError as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        raise ConnectionFailed("; ".join(exc.message or exc.name for exc in errors))

    def node(self, node_id: int) -> BrokerConnection:
        """A connection to the broker with this node id (from metadata)."""
        conn = self._nodes.get(node_id)
        if conn is not None:
            return conn
        broker = self._brokers.get(node_id)
        if broker is None:
            broker = self.metadata([]).brokers.get(node_id)
        if broker is None:
            raise KafkaError(8, f"broker {node_id} is not in the cluster metadata")
        boot = self.any_broker()
        if (boot.host, boot.port) == (broker.host, broker.port) or boot.node_id == node_id:
            boot.node_id = node_id
            conn = boot
        else:
            conn = self._connect(broker.host, broker.port, node_id)
        self._nodes[node_id] = conn
        return conn

    # ---------------------------------------------------------------- metadata

    def metadata(self, topics: Iterable[str] | None = None, *,
                 allow_auto_create: bool = False) -> ClusterMetadata:
        """Cluster metadata; ``topics=None`` means all topics, ``[]`` none (brokers only)."""
        names = None if topics is None else list(topics)

        def build(version: int):
            req_topics = None
            if names is not None:
                req_topics = [messages.MetadataRequest.MetadataRequestTopic(name=n) for n in names]
            elif version == 0:
                req_topics = []  # v0 has no null: empty means all
            kwargs: dict[str, Any] = {"topics": req_topics}
            if version >= 4:
                kwargs["allow_auto_topic_creation"] = allow_auto_create
            return messages.MetadataRequest(**kwargs)

        _, resp = self.any_broker().request(API.METADATA, build, max_version=12, min_version=1)
        brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None))
                   for b in resp.brokers}
        out_topics = {}
        for t in resp.topics:
            info = TopicInfo(t.name, getattr(t, "topic_id", None), getattr(t, "is_internal", False),
                             t.error_code)
            for p in t.partitions:
                info.partitions[p.partition_index] = PartitionInfo(
                    p.partition_index, p.leader_id, getattr(p, "leader_epoch", -1),
                    list(p.replica_nodes), list(p.isr_nodes),
                    list(getattr(p, "offline_replicas", []) or []), p.error_code)
            out_topics[t.name] = info
        meta = ClusterMetadata(getattr(resp, "cluster_id", None),
                               getattr(resp, "controller_id", -1), brokers, out_topics)
        self._brokers = brokers
        return meta

    def topic(self, name: str, *, retries: int = 20, allow_auto_create: bool = False) -> TopicInfo:
        """One topic's metadata, waiting briefly for leaders (fresh topics); raises its error.
        ``allow_auto_create`` lets a broker with auto.create.topics.enable create it, as
        producers do (the request that creates it answers it unknown, as Kafka's brokers do)."""
        for attempt in range(retries):
            info = self.metadata([name], allow_auto_create=allow_auto_create).topics.get(name)
            if info is None:
                raise KafkaError(3, context=f"topic {name}")
            waiting = (5, 3) if allow_auto_create else (5,)
            if info.error_code in waiting or any(p.leader < 0 for p in info.partitions.values()):
                time.sleep(min(0.05 * (attempt + 1), 0.5))
                continue
            check(info.error_code, context=f"topic {name}")
            return info
        check(info.error_code or 5, context=f"topic {name}")
        return info

    def leader(self, topic: str, partition: int) -> BrokerConnection:
        info = self.topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            raise KafkaError(3, f"partition {partition} does not exist", f"topic {topic}")
        if p.leader < 0:
            raise KafkaError(5, context=f"{topic}-{partition}")
        return self.node(p.leader)

    def leaders(self, topic_partitions: Iterable[tuple[str, int]]
                ) -> dict[int, list[tuple[str, int]]]:
        """Group partitions by their leader's node id."""
        by_node: dict[int, list[tuple[str, int]]] = {}
        infos: dict[str, TopicInfo] = {}
        for topic, partition in topic_partitions:
            if topic not in infos:
                infos[topic] = self.topic(topic)
            info = infos[topic]
            p = info.partitions.get(partition)
            if p is None:
                raise KafkaError(3, f"partition {partition} does not exist", f"topic {topic}")
            by_node.setdefault(p.leader, []).append((topic, partition))
        return by_node

    def controller(self) -> BrokerConnection:
        """Where cluster-wide admin requests go: the controller if it is a broker, else any."""
        meta = self.metadata([])
        if meta.controller_id in meta.brokers:
            return self.node(meta.controller_id)
        return self.any_broker()

    # ---------------------------------------------------------------- coordinators

    def coordinator(self, group_id: str, key_type: int = 0, *, retries: int = 20
                    ) -> BrokerConnection:
        """The group (key_type 0) or transaction (1) coordinator for a key."""
        cache_key = f"{key_type}:{group_id}"
        if cache_key in self._coordinators:
            return self._coordinators[cache_key]
        last: KafkaError | None = None
        for attempt in range(retries):
            try:
                node_id, host, port = self._find_coordinator(group_id, key_type)
            except KafkaError as exc:
                if exc.code not in (14, 15):  # loading / not available yet: retry
                    raise
                last = exc
                time.sleep(min(0.05 * (attempt + 1), 0.5))
                continue
            conn = self._nodes.get(node_id)
            if conn is None:
                boot = self.any_broker()
                if (boot.host, boot.port) == (host, port):
                    boot.node_id = node_id
                    conn = boot
                else:
                    conn = self._connect(host, port, node_id)
                self._nodes[node_id] = conn
            self._coordinators[cache_key] = conn
            return conn
        assert last is not None
        raise last

    def forget_coordinator(self, group_id: str, key_type: int = 0) -> None:
        self._coordinators.pop(f"{key_type}:{group_id}", None)

    def _find_coordinator(self, key: str, key_type: int) -> tuple[int, str, int]:
        def build(version: int):
            if version >= 4:
                return messages.FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
            if version >= 1:
                return messages.FindCoordinatorRequest(key=key, key_type=key_type)
            return messages.FindCoordinatorRequest(key=key)

        version, resp = self.any_broker().request(API.FIND_COORDINATOR, build, max_version=6)
        context = f"FindCoordinator {key}"
        if version >= 4:
            (c,) = resp.coordinators
            check(c.error_code, c.error_message, context)
            return c.node_id, c.host, c.port
        check(resp.error_code, getattr(resp, "error_message", None), context)
        return resp.node_id, resp.host, resp.port
