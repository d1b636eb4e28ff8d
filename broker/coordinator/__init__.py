"""Consumer groups, producer ids and transactions: the coordinators inside the broker.

Cores (no I/O, no trio; time from an injected clock, deadlines in a `Timers` queue):
- `GroupCoordinator(clock, timers, group_log, GroupConfig())` — the classic group protocol:
  `join_group(...) -> Pending[JoinResult]`, `sync_group(...) -> Pending[SyncResult]`, `heartbeat(...)`,
  `leave_group(group, [(member_id, instance_id)])`, `commit_offsets(...)` (also transactional with a
  producer id), `complete_transaction(group, producer_id, commit)`, `fetch_offsets(group, partitions|None,
  require_stable)`, `delete_offsets`, `list_groups`, `describe_group`, `delete_groups`; rebuilt with
  `replay(record, producer_id)` + `loaded()`.
- `TransactionCoordinator(clock, timers, txn_log, producer_ids, marker_writer, TxnConfig())` —
  `init_producer_id`, `add_partitions`, `verify_partitions`, `add_offsets`, `end_txn`, `describe`, `list`;
  rebuilt with `replay(record)` + `loaded()` (which finishes decided commits/aborts).
- `log_records` — the typed records both cores write (`GroupLog` / `TransactionLog` protocols, in-memory
  versions for tests).
- `clock` — `SystemClock`, `FakeClock`, `Timers`; `pending.Pending` — results that arrive later.
"""
