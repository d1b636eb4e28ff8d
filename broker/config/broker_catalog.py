"""The server.properties keys this broker understands, with Kafka's types, defaults and validators."""

from __future__ import annotations

from dataclasses import replace

from .ip_overrides import check_ip_overrides
from .kafka_catalog import KAFKA_BROKER_CONFIGS
from .values import (INT_MAX, LONG_MAX, COMPRESSION_TYPES, TIMESTAMP_TYPES, ConfigDef, ConfigType, _defs,
                     at_least, between, gzip_level, one_of)

T = ConfigType
BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    # identity and roles (KRaft)
    ConfigDef("node.id", T.INT, -1, at_least(-1)),
    ConfigDef("broker.id", T.INT, -1, at_least(-1)),
    ConfigDef("process.roles", T.LIST, [], one_of("broker", "controller")),
    ConfigDef("controller.quorum.voters", T.LIST, []),
    ConfigDef("controller.quorum.bootstrap.servers", T.LIST, []),
    ConfigDef("controller.quorum.election.timeout.ms", T.INT, 1000),
    ConfigDef("controller.quorum.fetch.timeout.ms", T.INT, 2000),
    ConfigDef("controller.quorum.election.backoff.max.ms", T.INT, 1000),
    ConfigDef("controller.quorum.request.timeout.ms", T.INT, 2000),
    ConfigDef("controller.listener.names", T.STRING, None),
    ConfigDef("broker.heartbeat.interval.ms", T.INT, 2000),
    ConfigDef("broker.session.timeout.ms", T.INT, 9000),
    ConfigDef("broker.rack", T.STRING, None),
    ConfigDef("metadata.log.dir", T.STRING, None),
    ConfigDef("metadata.log.segment.bytes", T.INT, 1073741824, at_least(12)),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", T.LONG, 20971520, at_least(1)),
    ConfigDef("metadata.max.retention.ms", T.LONG, 604800000),
    # network
    ConfigDef("listeners", T.STRING, "PLAINTEXT://:9092"),
    ConfigDef("advertised.listeners", T.STRING, None),
    ConfigDef("listener.security.protocol.map", T.STRING,
              "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"),
    ConfigDef("inter.broker.listener.name", T.STRING, None),
    ConfigDef("security.inter.broker.protocol", T.STRING, "PLAINTEXT",
              one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    ConfigDef("socket.request.max.bytes", T.INT, 104857600, at_least(1)),
    ConfigDef("socket.send.buffer.bytes", T.INT, 102400),
    ConfigDef("socket.receive.buffer.bytes", T.INT, 102400),
    ConfigDef("socket.listen.backlog.size", T.INT, 50, at_least(1)),
    ConfigDef("connections.max.idle.ms", T.LONG, 600000),
    ConfigDef("max.connections", T.INT, INT_MAX, at_least(0), dynamic=True),
    ConfigDef("max.connections.per.ip", T.INT, INT_MAX, at_least(0), dynamic=True),
    ConfigDef("max.connections.per.ip.overrides", T.STRING, "", check_ip_overrides, dynamic=True),
    ConfigDef("num.network.threads", T.INT, 3, at_least(1), dynamic=True),
    ConfigDef("num.io.threads", T.INT, 8, at_least(1), dynamic=True),
    ConfigDef("queued.max.requests", T.INT, 500, at_least(1)),
    ConfigDef("queued.max.request.bytes", T.LONG, -1),
    ConfigDef("request.timeout.ms", T.INT, 30000, at_least(0)),
    ConfigDef("fetch.max.bytes", T.INT, 57671680, at_least(1024)),
    # topics
    ConfigDef("num.partitions", T.INT, 1, at_least(1)),
    ConfigDef("default.replication.factor", T.INT, 1, at_least(1)),
    ConfigDef("auto.create.topics.enable", T.BOOLEAN, True),
    ConfigDef("delete.topic.enable", T.BOOLEAN, True),
    ConfigDef("auto.leader.rebalance.enable", T.BOOLEAN, True),
    # controller: leader balance (the active controller checks every interval)
    ConfigDef("leader.imbalance.check.interval.seconds", T.LONG, 300, at_least(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", T.INT, 10, between(0, 100)),
    ConfigDef("message.max.bytes", T.INT, 1048588, at_least(0), dynamic=True),
    ConfigDef("compression.type", T.STRING, "producer", one_of(*COMPRESSION_TYPES), dynamic=True),
    ConfigDef("compression.gzip.level", T.INT, -1, gzip_level, dynamic=True),
    ConfigDef("compression.lz4.level", T.INT, 9, between(1, 17), dynamic=True),
    ConfigDef("compression.zstd.level", T.INT, 3, between(-131072, 22), dynamic=True),
    ConfigDef("min.insync.replicas", T.INT, 1, at_least(1), dynamic=True),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, False, dynamic=True),
    ConfigDef("replica.lag.time.max.ms", T.LONG, 30000),
    ConfigDef("replica.fetch.max.bytes", T.INT, 1048576, at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", T.INT, 10485760, at_least(0)),
    ConfigDef("replica.fetch.wait.max.ms", T.INT, 500),
    ConfigDef("num.replica.fetchers", T.INT, 1, dynamic=True),
    # replication (issue 13): follower fetch tuning and fetch-from-follower (KIP-392)
    ConfigDef("replica.fetch.min.bytes", T.INT, 1),
    ConfigDef("replica.fetch.backoff.ms", T.INT, 1000, at_least(0)),
    ConfigDef("replica.selector.class", T.STRING, None,
              one_of("org.apache.kafka.common.replica.RackAwareReplicaSelector",
                     "org.apache.kafka.common.replica.LeaderSelector")),
    # log
    ConfigDef("log.dir", T.STRING, "/tmp/kafka-logs"),
    ConfigDef("log.dirs", T.STRING, None),
    ConfigDef("log.segment.bytes", T.INT, 1073741824, at_least(1048576), dynamic=True),
    ConfigDef("log.roll.ms", T.LONG, None, at_least(1), dynamic=True),
    ConfigDef("log.roll.hours", T.INT, 168, at_least(1)),
    ConfigDef("log.roll.jitter.ms", T.LONG, None, dynamic=True),
    ConfigDef("log.roll.jitter.hours", T.INT, 0, at_least(0)),
    ConfigDef("log.retention.ms", T.LONG, None, dynamic=True),
    ConfigDef("log.retention.minutes", T.INT, None),
    ConfigDef("log.retention.hours", T.INT, 168),
    ConfigDef("log.retention.bytes", T.LONG, -1, dynamic=True),
    ConfigDef("log.retention.check.interval.ms", T.LONG, 300000, at_least(1)),
    ConfigDef("log.local.retention.ms", T.LONG, -2, at_least(-2), dynamic=True),
    ConfigDef("log.local.retention.bytes", T.LONG, -2, at_least(-2), dynamic=True),
    ConfigDef("log.cleanup.policy", T.LIST, ["delete"], one_of("compact", "delete"), dynamic=True),
    ConfigDef("log.cleaner.enable", T.BOOLEAN, True),
    ConfigDef("log.cleaner.threads", T.INT, 1, at_least(0), dynamic=True),
    ConfigDef("log.cleaner.backoff.ms", T.LONG, 15000, at_least(0), dynamic=True),
    ConfigDef("log.cleaner.dedupe.buffer.size", T.LONG, 134217728, dynamic=True),
    ConfigDef("log.cleaner.delete.retention.ms", T.LONG, 86400000, at_least(0), dynamic=True),
    ConfigDef("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, between(0, 1), dynamic=True),
    ConfigDef("log.cleaner.min.compaction.lag.ms", T.LONG, 0, at_least(0), dynamic=True),
    ConfigDef("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX, at_least(1), dynamic=True),
    ConfigDef("log.index.interval.bytes", T.INT, 4096, at_least(0), dynamic=True),
    ConfigDef("log.index.size.max.bytes", T.INT, 10485760, at_least(4), dynamic=True),
    ConfigDef("log.flush.interval.messages", T.LONG, LONG_MAX, at_least(1), dynamic=True),
    ConfigDef("log.flush.interval.ms", T.LONG, None, dynamic=True),
    ConfigDef("log.flush.scheduler.interval.ms", T.LONG, LONG_MAX),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", T.INT, 60000, at_least(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", T.INT, 60000, at_least(0)),
    ConfigDef("log.flush.recovery.point.checkpoint.interval.ms", T.INT, 60000, at_least(0)),
    ConfigDef("log.segment.delete.delay.ms", T.LONG, 60000, at_least(0), dynamic=True),
    ConfigDef("log.preallocate", T.BOOLEAN, False, dynamic=True),
    ConfigDef("log.message.timestamp.type", T.STRING, "CreateTime", one_of(*TIMESTAMP_TYPES),
              dynamic=True),
    ConfigDef("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX, at_least(0), dynamic=True),
    ConfigDef("log.message.timestamp.after.max.ms", T.LONG, 3600000, at_least(0), dynamic=True),
    ConfigDef("num.recovery.threads.per.data.dir", T.INT, 2, at_least(1), dynamic=True),   # Kafka 4.x: 2
    # Odradek: fsync appended batches before acknowledging them (group commit); Kafka leaves it to the OS.
    ConfigDef("metrics.port", T.INT, -1, between(-1, 65535)),   # Odradek: /metrics, /healthz; -1 off
    ConfigDef("log.flush.before.acknowledge", T.BOOLEAN, False),
    # client quotas (broker.quotas): Kafka's sampled windows and connection creation rate limits
    ConfigDef("quota.window.num", T.INT, 11, at_least(1)),
    ConfigDef("quota.window.size.seconds", T.INT, 1, at_least(1)),
    ConfigDef("controller.quota.window.num", T.INT, 11, at_least(1)),
    ConfigDef("controller.quota.window.size.seconds", T.INT, 1, at_least(1)),
    ConfigDef("max.connection.creation.rate", T.INT, INT_MAX, at_least(0), dynamic=True),
    # security (authentication): TLS and SASL, Kafka's names and defaults; each may also be set
    # per listener as listener.name.<listener>.<key> (SASL ones also .<mechanism>.<key>)
    ConfigDef("ssl.keystore.type", T.STRING, "JKS", one_of("JKS", "PKCS12", "PEM", case_sensitive=False)),
    ConfigDef("ssl.keystore.location", T.STRING, None),
    ConfigDef("ssl.keystore.password", T.PASSWORD, None, sensitive=True),
    ConfigDef("ssl.key.password", T.PASSWORD, None, sensitive=True),
    ConfigDef("ssl.keystore.certificate.chain", T.PASSWORD, None, sensitive=True),
    ConfigDef("ssl.keystore.key", T.PASSWORD, None, sensitive=True),
    ConfigDef("ssl.truststore.type", T.STRING, "JKS", one_of("JKS", "PKCS12", "PEM", case_sensitive=False)),
    ConfigDef("ssl.truststore.location", T.STRING, None),
    ConfigDef("ssl.truststore.password", T.PASSWORD, None, sensitive=True),
    ConfigDef("ssl.truststore.certificates", T.PASSWORD, None, sensitive=True),
    ConfigDef("ssl.client.auth", T.STRING, "none", one_of("required", "requested", "none")),
    ConfigDef("ssl.protocol", T.STRING, "TLSv1.3"),
    ConfigDef("ssl.enabled.protocols", T.LIST, ["TLSv1.2", "TLSv1.3"],
              one_of("TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1")),
    ConfigDef("ssl.cipher.suites", T.LIST, []),
    ConfigDef("ssl.endpoint.identification.algorithm", T.STRING, "https"),
    ConfigDef("ssl.principal.mapping.rules", T.STRING, "DEFAULT"),
    ConfigDef("ssl.handshake.timeout.ms", T.LONG, 10000, at_least(1)),  # Odradek: TLS handshake bound
    ConfigDef("sasl.enabled.mechanisms", T.LIST, ["GSSAPI"]),
    ConfigDef("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI"),
    ConfigDef("sasl.mechanism.controller.protocol", T.STRING, "GSSAPI"),
    ConfigDef("sasl.jaas.config", T.PASSWORD, None, sensitive=True),
    ConfigDef("sasl.server.callback.handler.class", T.STRING, None),
    ConfigDef("sasl.server.max.receive.size", T.INT, 524288, at_least(1)),
    ConfigDef("connections.max.reauth.ms", T.LONG, 0, at_least(0)),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.url", T.STRING, None),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", T.LONG, 3600000, at_least(1)),
    ConfigDef("sasl.oauthbearer.expected.audience", T.LIST, []),
    ConfigDef("sasl.oauthbearer.expected.issuer", T.STRING, None),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", T.INT, 30, at_least(0)),
    ConfigDef("sasl.oauthbearer.sub.claim.name", T.STRING, "sub"),
    ConfigDef("sasl.oauthbearer.scope.claim.name", T.STRING, "scope"),
    # internal topics and coordinators
    ConfigDef("offsets.topic.num.partitions", T.INT, 50, at_least(1)),
    ConfigDef("offsets.topic.replication.factor", T.SHORT, 3, at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", T.INT, 104857600, at_least(1)),
    ConfigDef("offsets.topic.compression.codec", T.INT, 0),
    ConfigDef("offsets.load.buffer.size", T.INT, 5242880, at_least(1)),
    ConfigDef("offsets.retention.minutes", T.INT, 10080, at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", T.LONG, 600000, at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", T.INT, 5000, at_least(1)),
    ConfigDef("offset.metadata.max.bytes", T.INT, 4096),
    ConfigDef("group.initial.rebalance.delay.ms", T.INT, 3000),
    ConfigDef("group.min.session.timeout.ms", T.INT, 6000),
    ConfigDef("group.max.session.timeout.ms", T.INT, 1800000),
    ConfigDef("group.max.size", T.INT, INT_MAX, at_least(1)),
    ConfigDef("group.coordinator.rebalance.protocols", T.LIST, ["classic", "consumer"]),
    # KIP-848 consumer groups (broker/coordinator/consumer_group), Kafka 4's names and defaults
    ConfigDef("group.consumer.session.timeout.ms", T.INT, 45000, at_least(1)),
    ConfigDef("group.consumer.min.session.timeout.ms", T.INT, 45000, at_least(1)),
    ConfigDef("group.consumer.max.session.timeout.ms", T.INT, 60000, at_least(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", T.INT, 5000, at_least(1)),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", T.INT, 5000, at_least(1)),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", T.INT, 15000, at_least(1)),
    ConfigDef("group.consumer.max.size", T.INT, INT_MAX, at_least(1)),
    ConfigDef("group.consumer.assignors", T.LIST, ["uniform", "range"]),
    # KIP-848 online migration between classic and consumer groups (consumer_group/migration.py)
    ConfigDef("group.consumer.migration.policy", T.STRING, "bidirectional",
              one_of("disabled", "upgrade", "downgrade", "bidirectional", case_sensitive=False)),
    ConfigDef("transaction.state.log.num.partitions", T.INT, 50, at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", T.SHORT, 3, at_least(1)),
    ConfigDef("transaction.state.log.min.isr", T.INT, 2, at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", T.INT, 104857600, at_least(1)),
    ConfigDef("transaction.state.log.load.buffer.size", T.INT, 5242880, at_least(1)),
    ConfigDef("transaction.max.timeout.ms", T.INT, 900000, at_least(1)),
    ConfigDef("transactional.id.expiration.ms", T.INT, 604800000, at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000,
              at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000,
              at_least(1)),
    ConfigDef("transaction.partition.verification.enable", T.BOOLEAN, True, dynamic=True),
    ConfigDef("producer.id.expiration.ms", T.INT, 86400000, at_least(1), dynamic=True),
    ConfigDef("producer.id.expiration.check.interval.ms", T.INT, 600000, at_least(1)),
    ConfigDef("share.coordinator.state.topic.num.partitions", T.INT, 50, at_least(1)),
    ConfigDef("share.coordinator.state.topic.replication.factor", T.SHORT, 3, at_least(1)),
    ConfigDef("share.coordinator.state.topic.min.isr", T.SHORT, 2, at_least(1)),
    # KIP-932 share groups (broker/share, broker/coordinator/share_group): Kafka 4.x's names and defaults
    ConfigDef("share.coordinator.state.topic.segment.bytes", T.INT, 104857600, at_least(1)),
    ConfigDef("share.coordinator.write.timeout.ms", T.INT, 5000, at_least(1)),
    ConfigDef("group.share.enable", T.BOOLEAN, False),
    ConfigDef("group.share.partition.max.record.locks", T.INT, 2000, at_least(100)),
    # authorization (broker/security): Kafka's StandardAuthorizer; empty = everything allowed
    ConfigDef("authorizer.class.name", T.STRING, "",
              one_of("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                     "kafka.security.authorizer.AclAuthorizer")),
    ConfigDef("super.users", T.STRING, None),          # "User:admin;User:ops"
    # delegation tokens (KIP-48); delegation.token.master.key is read as the secret key (RENAMED)
    ConfigDef("delegation.token.secret.key", T.PASSWORD, None, sensitive=True),
    ConfigDef("delegation.token.max.lifetime.ms", T.LONG, 604800000, at_least(1)),
    ConfigDef("delegation.token.expiry.time.ms", T.LONG, 86400000, at_least(1)),
    ConfigDef("delegation.token.expiry.check.interval.ms", T.LONG, 3600000, at_least(1)),
    ConfigDef("allow.everyone.if.no.acl.found", T.BOOLEAN, False),
    ConfigDef("unstable.api.versions.enable", T.BOOLEAN, False),
    ConfigDef("unstable.feature.versions.enable", T.BOOLEAN, False),
)

# Every other key Kafka defines (known, described, not acted on yet): kafka_catalog.py.
BROKER_CONFIGS.update({name: d for name, d in KAFKA_BROKER_CONFIGS.items() if name not in BROKER_CONFIGS})
# Where Kafka updates a key dynamically (the TLS and SASL settings, per listener), it is described as
# Kafka describes it; a new value takes effect when the listener is next set up (restart).
for _name, _kafka in KAFKA_BROKER_CONFIGS.items():
    _ours = BROKER_CONFIGS[_name]
    if (_ours.dynamic, _ours.type) != (_kafka.dynamic, _kafka.type):
        BROKER_CONFIGS[_name] = replace(_ours, dynamic=_kafka.dynamic, type=_kafka.type)

# Kafka 3.x's deprecated names, read as the current key when that one is not set. Kafka 4.0 dropped
# them, so they are neither described nor alterable (Odradek is a 4.x broker).
RENAMED = {"delegation.token.master.key": "delegation.token.secret.key"}

BROKER_PREFIXES = ("listener.name.",)  # per-listener overrides (SSL/SASL settings)
