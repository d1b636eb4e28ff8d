"""KIP-932 share groups' membership (Kafka's share-group half of the GroupMetadataManager).

- `model` — `ShareGroup` / `ShareMember`, `ShareGroupConfig` (group.share.*), and the `simple`
  assignor: every subscribed partition goes to some member, and when there are more members than
  partitions a partition is shared by several (cooperative consumption).
- `records` — Kafka's ShareGroup* records of `__consumer_offsets` (key versions 9-15) and their replay.
- `coordinator.ShareGroupCoordinator` — ShareGroupHeartbeat (member epochs, joining, leaving,
  session expiry on the injected `Timers`) and the ShareGroupDescribe / ListGroups views.

Share members own nothing exclusively, so there is no revocation step: a member moves straight to its
target assignment at the group's assignment epoch. Which member may hold which record is the
share-partition's business (`broker/share/`), not the group's.
"""
