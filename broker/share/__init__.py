"""KIP-932 share groups' data path and state (the group membership lives in
`broker/coordinator/share_group/`).

- `partition` — one share-partition's record states (acquire, acknowledge, lock expiry, delivery
  count limit, snapshot/restore), sans-IO with time passed in.
- `session` — share sessions and their epochs (ShareFetch / ShareAcknowledge).
- `state_store` — the share coordinator's core: share-partition state as ShareSnapshot records in
  `__share_group_state` (Initialize/Read/Write/Delete), replayed on load.
- `persister` — where a share-partition's state goes: this broker's store or the share coordinator
  of its key on another broker (the share-state RPCs).
- `manager` — the share-partitions this broker leads: loading, persisting, lock timers, wake-ups.
- `glue` — `__share_group_state` inside the coordinator service (topic spec, appends, replay).
Handlers: `broker/handlers/share_groups.py`, `share_fetch.py`, `share_state.py`.
"""
