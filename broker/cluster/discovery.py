"""KIP-853: find the voters through ``controller.quorum.bootstrap.servers``; and the cluster id.

A node configured with bootstrap servers instead of ``controller.quorum.voters`` asks each of them
DescribeQuorum v2 until the active controller answers; its answer names the voters and, in ``Nodes``,
their controller listeners. Until one answers the node keeps asking (it never gives up) and logs so
once every ``LOG_EVERY_S``.
"""

from __future__ import annotations

import logging
import struct

import trio

import protocol
from protocol import messages as m

from broker.security.streams import open_stream

from broker.controller.wire import METADATA_TOPIC

log = logging.getLogger("odradek.cluster")

_SIZE = struct.Struct(">i")
LOG_EVERY_S = 10.0
RETRY_S = 0.5


def describe_quorum_request():
    R = m.DescribeQuorumRequest
    return R(topics=[R.TopicData(topic_name=METADATA_TOPIC,
                                 partitions=[R.PartitionData(partition_index=0)])])


async def ask(address: tuple[str, int], api_key: int, version: int, body,
              timeout_s: float = 2.0, security=None):
    """One request/response round trip to a controller listener, secured with `security` (a
    ClientSecurity, None for PLAINTEXT); raises OSError (ConnectionError: TLS or SASL refused),
    ValueError, trio.TooSlowError or protocol.DecodeError."""
    from broker.controller.transport import read_frame

    with trio.fail_after(timeout_s):
        stream = await open_stream(address, security, "odradek-discovery")
        async with stream:
            data = protocol.encode_request(api_key, version, 1, "odradek-discovery", body)
            await stream.send_all(_SIZE.pack(len(data)) + data)
            frame = await read_frame(stream, bytearray())
            if frame is None:
                raise ValueError("controller closed the connection")
            return protocol.decode_response(api_key, version, frame)[1]


async def ask_describe_quorum(address: tuple[str, int], version: int = 2, timeout_s: float = 2.0,
                             security=None):
    return await ask(address, 55, version, describe_quorum_request(), timeout_s, security)


async def quorum_cluster_id(voters: dict[int, tuple[str, int]], security=None) -> str:
    """The cluster id the controllers hold (DescribeCluster on their listener), for a fresh broker
    that was not formatted: it joins their cluster rather than deriving an id of its own."""
    last_log = -LOG_EVERY_S
    request = m.DescribeClusterRequest(endpoint_type=2, include_cluster_authorized_operations=False)
    while True:
        for address in voters.values():
            try:
                response = await ask(address, 60, 1, request, security=security)
            except (OSError, ValueError, trio.TooSlowError, protocol.DecodeError):
                continue
            if response.cluster_id:
                return response.cluster_id
        if trio.current_time() - last_log >= LOG_EVERY_S:
            last_log = trio.current_time()
            log.warning("no controller of %s answered with the cluster id yet; retrying",
                        ",".join(f"{v}@{h}:{p}" for v, (h, p) in sorted(voters.items())))
        await trio.sleep(RETRY_S)


def voters_from(response, listener_name: str) -> dict[int, tuple[str, int]] | None:
    """{voter id: controller listener address} from the active controller's answer, else None."""
    if response.error_code or not response.topics or not response.topics[0].partitions:
        return None
    partition = response.topics[0].partitions[0]
    if partition.error_code:
        return None
    endpoints = {}
    for node in response.nodes:
        for listener in node.listeners:
            if listener.name == listener_name:
                endpoints[node.node_id] = (listener.host, listener.port)
    voters = {v.replica_id: endpoints.get(v.replica_id) for v in partition.current_voters}
    return voters if voters and None not in voters.values() else None


async def discover_voters(config, security=None) -> dict[int, tuple[str, int]]:
    servers = config.quorum_bootstrap_servers
    listener_name = config.controller_listener_names[0]
    last_log = -LOG_EVERY_S
    while True:
        for address in servers:
            try:
                response = await ask_describe_quorum(address, security=security)
            except (OSError, ValueError, trio.TooSlowError, protocol.DecodeError):
                continue
            voters = voters_from(response, listener_name)
            if voters:
                log.info("metadata quorum voters from %s:%d: %s", *address,
                         ",".join(f"{v}@{h}:{p}" for v, (h, p) in sorted(voters.items())))
                return voters
        if trio.current_time() - last_log >= LOG_EVERY_S:
            last_log = trio.current_time()
            log.warning("no active controller among controller.quorum.bootstrap.servers (%s) yet; "
                        "retrying", ",".join(f"{h}:{p}" for h, p in servers))
        await trio.sleep(RETRY_S)
