"""The cluster: several ``odradek serve`` processes forming one KRaft-style cluster.

Modules: ``metadata`` (``open_metadata``: this node's replica of the metadata log from Kafka's quorum
settings: a voter, an observer, or the single-node quorum of one), ``router`` (``ClusterController``:
reads from the local image, mutations to the active controller), ``client`` (requests to the active
controller over the controller listener, retried on NOT_CONTROLLER), ``controller_api`` (what a
controller answers brokers on that listener), ``liveness`` (registration, heartbeats, controlled
shutdown), ``discovery`` (KIP-853 bootstrap servers), ``controller_node`` (``process.roles=controller``).
"""
