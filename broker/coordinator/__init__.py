"""Consumer groups, producer ids and transactions: the coordinators inside the broker.

Cores (no I/O, no trio; time from an injected clock, deadlines in a `Timers` queue; every transition
is unit-tested on a `FakeClock`):
- `group_coordinator.GroupCoordinator(clock, timers, group_log, GroupConfig())` (its offsets half in
  `group_offsets.OffsetsMixin`, its snapshots and replay in `group_persistence.PersistenceMixin`) — the classic group protocol: `join_group(...) -> Pending[JoinResult]`, `sync_group(...) -> Pending[SyncResult]`,
  `heartbeat(...)`, `leave_group(group, [(member_id, instance_id)])`, `commit_offsets(...)` (also
  transactional, with a producer id), `complete_transaction(group, producer_id, commit)`,
  `fetch_offsets(group, partitions | None, require_stable)`, `delete_offsets`, `list_groups`,
  `describe_group`, `delete_groups`, `forget_topics`; rebuilt with `replay(record, producer_id)` +
  `loaded(group_ids)`, dropped with `unload(group_ids)`. `.groups` maps group id -> `group.Group`
  (state, members, offsets; read by metrics).
- `txn_coordinator.TransactionCoordinator(clock, timers, txn_log, producer_ids, marker_writer,
  TxnConfig())` — `init_producer_id`, `add_partitions`, `verify_partitions` (what Produce's partition
  verification asks), `add_offsets`, `end_txn`, `describe`, `list`; rebuilt with `replay(record)` +
  `loaded(transactional_ids)` (which finishes commits/aborts decided before a crash or a leader
  change), dropped with `unload(transactional_ids)`. While an id's write is in flight, requests see
  `view(id)` (its state before the write) and get CONCURRENT_TRANSACTIONS where they would change it,
  as Kafka's pending state.
- `consumer_group` — KIP-848 consumer groups (`ConsumerGroupCoordinator`: ConsumerGroupHeartbeat,
  server-side assignors, member epochs, Kafka's ConsumerGroup* records), beside the classic groups;
  their committed offsets live in the classic core's offsets-only group of the same id.
- `log_records` — the typed records the cores write (`GroupLog` / `TransactionLog` protocols, in-memory
  versions for tests); `serde` — those records in Kafka's `__consumer_offsets` / `__transaction_state`
  key/value formats (via `protocol.internal_topics`) and Kafka's `partition_for` (Java hashCode).
- `clock` — `SystemClock`, `FakeClock`, `Timers`; `pending.Pending` — results that arrive later.

In the broker:
- `service.CoordinatorService.of(broker)` — the broker's service (created on first use, stored in
  `broker.coordinators` as "service", "group", "transaction"): creates the internal topics on demand
  (their configured partitions and replication factor; COORDINATOR_NOT_AVAILABLE while too few brokers
  are alive), follows leadership of their partitions, appends to them (acks=all) and `settle()`s
  (acknowledges: durable and replicated; `settle(since=write_mark())` reports a failed write with
  Kafka's error) before a handler answers. Each append answers a `Pending[ErrorCode]` that `settle`
  completes once the write commits (or fails): the cores show what a write decides (committed offsets,
  SyncGroup assignments, a static member's new id) only then, as Kafka's pending offset commits. (The
  writes themselves: `durable_writes.DurableWritesMixin`.) `coordinator_error(topic, partition)` is what a request for
  a key of that partition gets here: NONE, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or
  COORDINATOR_LOAD_IN_PROGRESS. `CoordinatorService.startup_hook` is an `async hook(broker, nursery)`
  for `broker.startup_hooks` that takes the partitions led here at start-up.
- `ownership` — which internal partitions this broker coordinates (`plan(image, owned, node_id)`: the
  pure diff against the metadata image → load / unload / epoch moves), and reading a partition's log.
- `markers` — `append_markers` (WriteTxnMarkers on a partition leader: control batches with the
  coordinator epoch, acks=all, transactional offsets completed) and `MarkerSender` (the transaction
  core's marker writer: per destination broker, local or WriteTxnMarkers, retried until every marker
  is in, then CompleteCommit/CompleteAbort).
- `verification.refused_batches(ctx, transactional_id, [(key, partition, batch_header)])` — Produce's
  KIP-890 check that a transactional batch's partition is in its producer's ongoing transaction
  (only a transaction's first batch per partition asks the coordinator: the log's open transaction
  vouches for the rest); returns {key: (error, message)} in Produce v11's error codes. A coordinator
  on another broker is asked with AddPartitionsToTxn (verify only): `verify_with_coordinator`, also
  used by TxnOffsetCommit.
- Other brokers are reached through `broker.interbroker.client.BrokerClient` (the inter-broker listener).
- Handlers: `broker/handlers/consumer_groups.py` (ConsumerGroupHeartbeat, ConsumerGroupDescribe),
  `broker/handlers/groups.py` (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
  OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete) and
  `broker/handlers/transactions.py` (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit,
  EndTxn, WriteTxnMarkers, DescribeProducers, DescribeTransactions, ListTransactions).
"""
