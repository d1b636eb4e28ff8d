"""A standalone controller process: one voter of a metadata quorum on loopback or a real network.

    python -m broker.controller.node --node-id 1 --log-dir /tmp/c1 \\
        --voters 1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093

Its listener speaks the KRaft RPCs to the other voters and, for clients, DescribeQuorum (55) and
AllocateProducerIds (67) — the latter commits a ProducerIdsRecord through the quorum, which makes it the
simplest way to prove that a leader can commit.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

import trio

from protocol import messages as m

from .controller import Controller, ControllerSettings
from .errors import ApiError
from .raft import RaftConfig
from .transport import TcpTransport
from .wire import describe_quorum_response


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    """Kafka's `controller.quorum.voters` form: id@host:port,..."""
    voters = {}
    for item in text.split(","):
        node, _, address = item.strip().partition("@")
        host, _, port = address.rpartition(":")
        voters[int(node)] = (host, int(port))
    return voters


async def admin_handler(controller: Controller, header, body):
    if header.api_key == 55:
        return describe_quorum_response(controller.describe_quorum(), body)
    if header.api_key == 67:
        try:
            block = await controller.allocate_producer_ids(body.broker_id, body.broker_epoch)
        except ApiError as exc:
            return m.AllocateProducerIdsResponse(error_code=int(exc.code))
        return m.AllocateProducerIdsResponse(producer_id_start=block.first_producer_id,
                                             producer_id_len=block.size)
    raise ValueError(f"unsupported api {header.api_key}")


async def run(args) -> None:
    voters = parse_voters(args.voters)
    transport = TcpTransport(args.node_id, voters, args.cluster_id)
    config = RaftConfig(election_timeout=args.election_timeout_ms / 1000,
                        fetch_timeout=args.fetch_timeout_ms / 1000)
    async with Controller.open(args.log_dir, node_id=args.node_id, cluster_id=args.cluster_id,
                               settings=ControllerSettings(), voters=voters, transport=transport,
                               raft_config=config) as controller:
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"controller {args.node_id} %(levelname)s %(message)s")
    trio.run(run, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
