"""KIP-848 consumer groups: the group type Kafka 4's `group.protocol=consumer` clients join with
ConsumerGroupHeartbeat, assignment computed on the broker, next to the classic groups.

- `model` — `ConsumerGroup` / `ConsumerMember` (member epochs, assigned and pending-revocation
  partitions by topic id), `ConsumerGroupConfig` (group.consumer.*), and who owns each partition.
- `assignors` — the server-side `uniform` (balanced, sticky) and `range` assignors.
- `reconcile` — one member's step towards its target (revoke first, then take partitions as their
  previous owners release them): the invariant that no partition has two owners.
- `records` — Kafka's ConsumerGroup* records of `__consumer_offsets` and their replay (the only way
  the state changes).
- `classic_members` — classic-protocol members inside a consumer group (JoinGroup/SyncGroup/
  Heartbeat/LeaveGroup driven by the coordinator) during an online migration.
- `migration` — KIP-848 online upgrade (classic -> consumer) and downgrade, as
  `group.consumer.migration.policy` allows, with Kafka's conversion records.
- `re2j` — `SubscribedTopicRegex` in Kafka's RE2/J dialect, translated to Python `re`.
- `coordinator.ConsumerGroupCoordinator` — heartbeats, leaving and fencing (session and revocation
  timeouts on the injected `Timers`), static members, member-epoch checks for OffsetCommit and
  OffsetFetch, ListGroups/ConsumerGroupDescribe views, DeleteGroups, load and unload.

Committed offsets of a consumer group are stored like any group's (`group_offsets`): the classic
coordinator keeps them in an offsets-only group of the same id, and the handlers check member epochs
here first. Handlers: `broker/handlers/consumer_groups.py` (68, 69) and `broker/handlers/groups.py`.
"""
