"""The sans-IO Raft core of the metadata quorum (KRaft flavoured: followers pull from the leader).

    from broker.controller.raft import RaftNode, RaftConfig, DurableState

    node = RaftNode(node_id, voters, RaftConfig(), random.Random(seed), durable=DurableState(...))
    effects = node.start(now)                 # then, whenever something happens:
    effects = node.handle(src, message, now)  # a message from another node
    effects = node.tick(now)                  # time passed; call again by node.next_deadline()
    (offset, epoch), effects = node.propose(data, now)    # leader only, else NotLeaderError
    effects = node.take_snapshot(end_offset, state_bytes) # state machine state below end_offset
    effects = node.resign(now)                # leader about to stop: EndQuorumEpoch to voters

The driver executes effects strictly in order: PersistState / AppendEntries / TruncateFrom /
SaveSnapshot must be durable before the Send / Commit / LoadSnapshot effects that follow them. Commit
hands committed entries (control entries included) to the state machine; an entry proposed as
(offset, epoch) is committed exactly when a Commit carries an entry with that offset and epoch.
Messages and effects: `broker.controller.raft.messages`. `node.describe()` gives DescribeQuorum's view.
"""

from .core import NotLeaderError, RaftConfig, RaftNode, Role
from .messages import DurableState

__all__ = ["DurableState", "NotLeaderError", "RaftConfig", "RaftNode", "Role"]
