"""A standalone controller process: one voter of a metadata quorum on loopback or a real network.

    python -m broker.controller.node --node-id 1 --log-dir /tmp/c1 \\
        --voters 1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093

Its listener speaks the KRaft RPCs to the other voters and, for brokers and clients, DescribeQuorum (55),
AllocateProducerIds (67), BrokerRegistration (62) and BrokerHeartbeat (63) (`admin.HANDLERS`).
AllocateProducerIds commits a ProducerIdsRecord through the quorum: the simplest proof that a leader
can commit.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

import trio

from .admin import HANDLERS
from .controller import Controller, ControllerSettings
from .raft import RaftConfig
from .transport import TcpTransport


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    """Kafka's `controller.quorum.voters` form: id@host:port,..."""
    voters = {}
    for item in text.split(","):
        node, _, address = item.strip().partition("@")
        host, _, port = address.rpartition(":")
        voters[int(node)] = (host, int(port))
    return voters


async def admin_handler(controller: Controller, header, body):
    handler = HANDLERS.get(header.api_key)
    if handler is None:
        raise ValueError(f"unsupported api {header.api_key}")
    return await handler(controller, body)


async def run(args) -> None:
    voters = parse_voters(args.voters)
    transport = TcpTransport(args.node_id, voters, args.cluster_id)
    config = RaftConfig(election_timeout=args.election_timeout_ms / 1000,
                        fetch_timeout=args.fetch_timeout_ms / 1000)
    async with Controller.open(args.log_dir, node_id=args.node_id, cluster_id=args.cluster_id,
                               settings=ControllerSettings(), voters=voters, transport=transport,
                               raft_config=config, snapshot_every=args.snapshot_every) as controller:
        async def handle(header, body):
            return await admin_handler(controller, header, body)
        transport.admin_handler = handle
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                await controller.resign()
                await trio.sleep(0.2)           # let EndQuorumEpoch reach the other voters
                return


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.controller.node", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--voters", required=True, help="id@host:port,... (controller.quorum.voters)")
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--cluster-id", default="odradek-quorum")
    parser.add_argument("--election-timeout-ms", type=int, default=1000)
    parser.add_argument("--fetch-timeout-ms", type=int, default=2000)
    parser.add_argument("--snapshot-every", type=int, default=1000, help="entries between snapshots")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"controller {args.node_id} %(levelname)s %(message)s")
    trio.run(run, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
