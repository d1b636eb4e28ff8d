"""Partition replication, as Kafka does it (issue 13).

- ``leader``: a leader's view of its followers: their log end offsets, the high watermark, which
  ISR change to propose (sans-IO).
- ``divergence``: DivergingEpoch on the leader, the truncation offset on the follower (sans-IO).
- ``acks``: when an acks=all Produce may be answered (sans-IO).
- ``simulate``: the deterministic replication simulation over the three above.
"""
