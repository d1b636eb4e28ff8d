"""Every other broker config Apache Kafka defines, known by name, type and default even where Odradek
does not act on it (README lists them): accepted in server.properties, by AlterConfigs and
IncrementalAlterConfigs when Kafka updates it dynamically, and described as Kafka describes it.

Two tables. `_KAFKA_BROKER_KEYS` is what Kafka 3.9's DescribeConfigs returns for a broker (every
key, its type, the DEFAULT_CONFIG synonym's value, and read-only = not dynamic), less ZooKeeper's
keys and those Kafka 4.0 removed (message format, timestamp difference, password encoder,
control-plane listener, generated broker ids); where Kafka 4.x changed the default, type or update
mode of one of these inert keys, the row follows Kafka 4.3. `_KAFKA_4_BROKER_KEYS` (and
`_KAFKA_4_SHARE_KEYS`, share groups' own block) add the keys only Kafka 4.x defines, from Kafka 4.3's
broker config documentation, with Kafka's validators.
tests/robustness/test_kafka4_config_catalog.py checks both against Kafka 4.3's list
(tests/robustness/kafka_4_3_broker_configs.tsv). Keys with behaviour live in broker_catalog.py
and win over these.
"""

from __future__ import annotations

from .values import INT_MAX, LONG_MAX, ConfigDef, ConfigType, at_least, between, one_of, parse_value

T = ConfigType

# (name, type, Kafka's default as DescribeConfigs renders it (None: no default), dynamic)
_KAFKA_BROKER_KEYS = (
    ('alter.config.policy.class.name', T.CLASS, None, False),
    ('alter.log.dirs.replication.quota.window.num', T.INT, '11', False),
    ('alter.log.dirs.replication.quota.window.size.seconds', T.INT, '1', False),
    ('authorizer.class.name', T.STRING, '', False),
    ('auto.include.jmx.reporter', T.BOOLEAN, 'true', False),
    ('background.threads', T.INT, '10', True),
    ('client.quota.callback.class', T.CLASS, None, False),
    ('connection.failed.authentication.delay.ms', T.INT, '100', False),
    ('connections.max.reauth.ms', T.LONG, '0', False),
    ('controlled.shutdown.enable', T.BOOLEAN, 'true', False),
    ('controlled.shutdown.max.retries', T.INT, '3', False),
    ('controlled.shutdown.retry.backoff.ms', T.LONG, '5000', False),
    ('controller.quorum.append.linger.ms', T.INT, '25', False),
    ('controller.quorum.retry.backoff.ms', T.INT, '20', False),
    ('controller.quota.window.num', T.INT, '11', False),
    ('controller.quota.window.size.seconds', T.INT, '1', False),
    ('controller.socket.timeout.ms', T.INT, '30000', False),
    ('create.topic.policy.class.name', T.CLASS, None, False),
    ('delegation.token.expiry.check.interval.ms', T.LONG, '3600000', False),
    ('delegation.token.expiry.time.ms', T.LONG, '86400000', False),
    ('delegation.token.max.lifetime.ms', T.LONG, '604800000', False),
    ('delegation.token.secret.key', T.PASSWORD, None, False),
    ('delete.records.purgatory.purge.interval.requests', T.INT, '1', False),
    ('early.start.listeners', T.STRING, None, False),
    ('eligible.leader.replicas.enable', T.BOOLEAN, 'false', False),
    ('fetch.purgatory.purge.interval.requests', T.INT, '1000', False),
    ('group.consumer.assignors', T.LIST, 'org.apache.kafka.coordinator.group.assignor.UniformAssignor,org.apache.kafka.coordinator.group.assignor.RangeAssignor', False),
    ('group.consumer.heartbeat.interval.ms', T.INT, '5000', False),
    ('group.consumer.max.heartbeat.interval.ms', T.INT, '15000', False),
    ('group.consumer.max.session.timeout.ms', T.INT, '60000', False),
    ('group.consumer.max.size', T.INT, '2147483647', False),
    ('group.consumer.min.heartbeat.interval.ms', T.INT, '5000', False),
    ('group.consumer.min.session.timeout.ms', T.INT, '45000', False),
    ('group.consumer.session.timeout.ms', T.INT, '45000', False),
    ('group.coordinator.append.linger.ms', T.INT, '-1', False),
    ('group.coordinator.threads', T.INT, '4', False),
    ('group.share.delivery.count.limit', T.INT, '5', False),
    ('group.share.heartbeat.interval.ms', T.INT, '5000', False),
    ('group.share.max.groups', T.SHORT, '10', False),
    ('group.share.max.heartbeat.interval.ms', T.INT, '15000', False),
    ('group.share.max.record.lock.duration.ms', T.INT, '60000', False),
    ('group.share.max.session.timeout.ms', T.INT, '60000', False),
    ('group.share.max.size', T.INT, '200', False),
    ('group.share.min.heartbeat.interval.ms', T.INT, '5000', False),
    ('group.share.min.record.lock.duration.ms', T.INT, '15000', False),
    ('group.share.min.session.timeout.ms', T.INT, '45000', False),
    ('group.share.partition.max.record.locks', T.INT, '2000', False),
    ('group.share.record.lock.duration.ms', T.INT, '30000', False),
    ('group.share.session.timeout.ms', T.INT, '45000', False),
    ('initial.broker.registration.timeout.ms', T.INT, '60000', False),
    ('kafka.metrics.polling.interval.secs', T.INT, '10', False),
    ('kafka.metrics.reporters', T.LIST, '', False),
    ('leader.imbalance.check.interval.seconds', T.LONG, '300', False),
    ('leader.imbalance.per.broker.percentage', T.INT, '10', False),
    ('log.cleaner.io.buffer.load.factor', T.DOUBLE, '0.9', True),
    ('log.cleaner.io.buffer.size', T.INT, '524288', True),
    ('log.cleaner.io.max.bytes.per.second', T.DOUBLE, '1.7976931348623157E308', True),
    ('log.dir.failure.timeout.ms', T.LONG, '30000', False),
    ('max.connection.creation.rate', T.INT, '2147483647', True),
    ('max.connections.per.ip.overrides', T.STRING, '', True),
    ('max.incremental.fetch.session.cache.slots', T.INT, '1000', False),
    ('max.request.partition.size.limit', T.INT, '2000', False),
    ('metadata.log.max.snapshot.interval.ms', T.LONG, '3600000', False),
    ('metadata.log.segment.ms', T.LONG, '604800000', False),
    ('metadata.max.idle.interval.ms', T.INT, '500', False),
    ('metadata.max.retention.bytes', T.LONG, '104857600', False),
    ('metric.reporters', T.LIST, '', True),
    ('metrics.num.samples', T.INT, '2', False),
    ('metrics.recording.level', T.STRING, 'INFO', False),
    ('metrics.sample.window.ms', T.LONG, '30000', False),
    ('num.replica.alter.log.dirs.threads', T.INT, None, False),
    ('principal.builder.class', T.CLASS, 'org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder', True),
    ('producer.purgatory.purge.interval.requests', T.INT, '1000', False),
    ('quota.window.num', T.INT, '11', False),
    ('quota.window.size.seconds', T.INT, '1', False),
    ('remote.fetch.max.wait.ms', T.INT, '500', True),
    ('remote.log.index.file.cache.total.size.bytes', T.LONG, '1073741824', True),
    ('remote.log.manager.copier.thread.pool.size', T.INT, '10', True),
    ('remote.log.manager.copy.max.bytes.per.second', T.LONG, '9223372036854775807', True),
    ('remote.log.manager.copy.quota.window.num', T.INT, '11', False),
    ('remote.log.manager.copy.quota.window.size.seconds', T.INT, '1', False),
    ('remote.log.manager.expiration.thread.pool.size', T.INT, '10', True),
    ('remote.log.manager.fetch.max.bytes.per.second', T.LONG, '9223372036854775807', True),
    ('remote.log.manager.fetch.quota.window.num', T.INT, '11', False),
    ('remote.log.manager.fetch.quota.window.size.seconds', T.INT, '1', False),
    ('remote.log.manager.task.interval.ms', T.LONG, '30000', False),
    ('remote.log.manager.thread.pool.size', T.INT, '2', False),
    ('remote.log.metadata.custom.metadata.max.bytes', T.INT, '128', False),
    ('remote.log.metadata.manager.class.name', T.STRING, 'org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager', False),
    ('remote.log.metadata.manager.class.path', T.STRING, None, False),
    ('remote.log.metadata.manager.impl.prefix', T.STRING, 'rlmm.config.', False),
    ('remote.log.metadata.manager.listener.name', T.STRING, None, False),
    ('remote.log.reader.max.pending.tasks', T.INT, '100', False),
    ('remote.log.reader.threads', T.INT, '10', True),
    ('remote.log.storage.manager.class.name', T.STRING, None, False),
    ('remote.log.storage.manager.class.path', T.STRING, None, False),
    ('remote.log.storage.manager.impl.prefix', T.STRING, 'rsm.config.', False),
    ('remote.log.storage.system.enable', T.BOOLEAN, 'false', False),
    ('replica.fetch.backoff.ms', T.INT, '1000', False),
    ('replica.fetch.min.bytes', T.INT, '1', False),
    ('replica.high.watermark.checkpoint.interval.ms', T.LONG, '5000', False),
    ('replica.selector.class', T.STRING, None, False),
    ('replica.socket.receive.buffer.bytes', T.INT, '65536', False),
    ('replica.socket.timeout.ms', T.INT, '30000', False),
    ('replication.quota.window.num', T.INT, '11', False),
    ('replication.quota.window.size.seconds', T.INT, '1', False),
    ('sasl.client.callback.handler.class', T.CLASS, None, False),
    ('sasl.enabled.mechanisms', T.LIST, 'GSSAPI', True),
    ('sasl.jaas.config', T.PASSWORD, None, True),
    ('sasl.kerberos.kinit.cmd', T.STRING, '/usr/bin/kinit', True),
    ('sasl.kerberos.min.time.before.relogin', T.LONG, '60000', True),
    ('sasl.kerberos.principal.to.local.rules', T.LIST, 'DEFAULT', True),
    ('sasl.kerberos.service.name', T.STRING, None, True),
    ('sasl.kerberos.ticket.renew.jitter', T.DOUBLE, '0.05', True),
    ('sasl.kerberos.ticket.renew.window.factor', T.DOUBLE, '0.8', True),
    ('sasl.login.callback.handler.class', T.CLASS, None, False),
    ('sasl.login.class', T.CLASS, None, False),
    ('sasl.login.connect.timeout.ms', T.INT, None, False),
    ('sasl.login.read.timeout.ms', T.INT, None, False),
    ('sasl.login.refresh.buffer.seconds', T.SHORT, '300', True),
    ('sasl.login.refresh.min.period.seconds', T.SHORT, '60', True),
    ('sasl.login.refresh.window.factor', T.DOUBLE, '0.8', True),
    ('sasl.login.refresh.window.jitter', T.DOUBLE, '0.05', True),
    ('sasl.login.retry.backoff.max.ms', T.LONG, '10000', False),
    ('sasl.login.retry.backoff.ms', T.LONG, '100', False),
    ('sasl.mechanism.controller.protocol', T.STRING, 'GSSAPI', False),
    ('sasl.mechanism.inter.broker.protocol', T.STRING, 'GSSAPI', True),
    ('sasl.oauthbearer.clock.skew.seconds', T.INT, '30', False),
    ('sasl.oauthbearer.expected.audience', T.LIST, None, False),
    ('sasl.oauthbearer.expected.issuer', T.STRING, None, False),
    ('sasl.oauthbearer.jwks.endpoint.refresh.ms', T.LONG, '3600000', False),
    ('sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms', T.LONG, '10000', False),
    ('sasl.oauthbearer.jwks.endpoint.retry.backoff.ms', T.LONG, '100', False),
    ('sasl.oauthbearer.jwks.endpoint.url', T.STRING, None, False),
    ('sasl.oauthbearer.scope.claim.name', T.STRING, 'scope', False),
    ('sasl.oauthbearer.sub.claim.name', T.STRING, 'sub', False),
    ('sasl.oauthbearer.token.endpoint.url', T.STRING, None, False),
    ('sasl.server.callback.handler.class', T.CLASS, None, False),
    ('sasl.server.max.receive.size', T.INT, '524288', False),
    ('security.providers', T.STRING, None, False),
    ('socket.connection.setup.timeout.max.ms', T.LONG, '30000', False),
    ('socket.connection.setup.timeout.ms', T.LONG, '10000', False),
    ('ssl.allow.dn.changes', T.BOOLEAN, 'false', False),
    ('ssl.allow.san.changes', T.BOOLEAN, 'false', False),
    ('ssl.cipher.suites', T.LIST, '', True),
    ('ssl.client.auth', T.STRING, 'none', True),
    ('ssl.enabled.protocols', T.LIST, 'TLSv1.2,TLSv1.3', True),
    ('ssl.endpoint.identification.algorithm', T.STRING, 'https', True),
    ('ssl.engine.factory.class', T.CLASS, None, True),
    ('ssl.key.password', T.PASSWORD, None, True),
    ('ssl.keymanager.algorithm', T.STRING, 'SunX509', True),
    ('ssl.keystore.certificate.chain', T.PASSWORD, None, True),
    ('ssl.keystore.key', T.PASSWORD, None, True),
    ('ssl.keystore.location', T.STRING, None, True),
    ('ssl.keystore.password', T.PASSWORD, None, True),
    ('ssl.keystore.type', T.STRING, 'JKS', True),
    ('ssl.principal.mapping.rules', T.STRING, 'DEFAULT', False),
    ('ssl.protocol', T.STRING, 'TLSv1.3', True),
    ('ssl.provider', T.STRING, None, True),
    ('ssl.secure.random.implementation', T.STRING, None, True),
    ('ssl.trustmanager.algorithm', T.STRING, 'PKIX', True),
    ('ssl.truststore.certificates', T.PASSWORD, None, True),
    ('ssl.truststore.location', T.STRING, None, True),
    ('ssl.truststore.password', T.PASSWORD, None, True),
    ('ssl.truststore.type', T.STRING, 'JKS', True),
    ('telemetry.max.bytes', T.INT, '1048576', False),)


# ---- Kafka 4.x only: keys Kafka 3.9 does not define (Kafka 4.3's names, types, defaults, update modes
# and valid values). Known and described; Odradek does not act on them (README).
# (name, type, default, dynamic, validator)
_KAFKA_4_BROKER_KEYS = (
    # transactions (KIP-890, KIP-939)
    ('add.partitions.to.txn.retry.backoff.max.ms', T.INT, '100', False, at_least(0)),
    ('add.partitions.to.txn.retry.backoff.ms', T.INT, '20', False, at_least(1)),
    ('transaction.two.phase.commit.enable', T.BOOLEAN, 'false', False, None),
    # group coordinator (KIP-848 consumer groups)
    ('group.coordinator.background.threads', T.INT, '2', False, at_least(1)),
    ('group.coordinator.cached.buffer.max.bytes', T.INT, '1048588', True, at_least(524288)),
    ('group.consumer.assignment.interval.ms', T.INT, '1000', True, at_least(0)),
    ('group.consumer.max.assignment.interval.ms', T.INT, '15000', False, at_least(0)),
    ('group.consumer.min.assignment.interval.ms', T.INT, '0', False, at_least(0)),
    ('group.consumer.migration.policy', T.STRING, 'bidirectional', False,
     one_of('DISABLED', 'DOWNGRADE', 'UPGRADE', 'BIDIRECTIONAL', case_sensitive=False)),
    # streams groups (KIP-1071)
    ('group.streams.assignment.interval.ms', T.INT, '1000', True, at_least(0)),
    ('group.streams.heartbeat.interval.ms', T.INT, '5000', False, at_least(1)),
    ('group.streams.initial.rebalance.delay.ms', T.INT, '3000', False, at_least(0)),
    ('group.streams.max.assignment.interval.ms', T.INT, '15000', False, at_least(0)),
    ('group.streams.max.heartbeat.interval.ms', T.INT, '15000', False, at_least(1)),
    ('group.streams.max.session.timeout.ms', T.INT, '60000', False, at_least(1)),
    ('group.streams.max.size', T.INT, str(INT_MAX), False, at_least(1)),
    ('group.streams.max.standby.replicas', T.INT, '2', False, at_least(0)),
    ('group.streams.min.assignment.interval.ms', T.INT, '0', False, at_least(0)),
    ('group.streams.min.heartbeat.interval.ms', T.INT, '5000', False, at_least(1)),
    ('group.streams.min.session.timeout.ms', T.INT, '45000', False, at_least(1)),
    ('group.streams.num.standby.replicas', T.INT, '0', False, at_least(0)),
    ('group.streams.session.timeout.ms', T.INT, '45000', False, at_least(1)),
    # KRaft quorum (KIP-853 auto-join) and log dirs (KIP-1066 cordoning)
    ('controller.quorum.auto.join.enable', T.BOOLEAN, 'false', False, None),
    ('controller.quorum.fetch.max.bytes', T.INT, '1048576', False, at_least(1)),
    ('controller.quorum.fetch.snapshot.max.bytes', T.INT, '1048576', False, at_least(1)),
    ('cordoned.log.dirs', T.LIST, '', True, None),
    # replication throttles, now broker configs of their own
    ('follower.replication.throttled.rate', T.LONG, str(LONG_MAX), True, at_least(0)),
    ('leader.replication.throttled.rate', T.LONG, str(LONG_MAX), True, at_least(0)),
    ('replica.alter.log.dirs.io.max.bytes.per.second', T.LONG, str(LONG_MAX), True, at_least(0)),
    # tiered storage
    ('follower.fetch.last.tiered.offset.enable', T.BOOLEAN, 'false', True, None),
    ('remote.list.offsets.request.timeout.ms', T.LONG, '30000', True, at_least(1)),
    ('remote.log.manager.follower.thread.pool.size', T.INT, '2', True, at_least(1)),
    # config providers (KIP-297 on the broker) and SASL/OAUTHBEARER JWT assertions (KIP-1139)
    ('config.providers', T.LIST, '', True, None),
    ('sasl.oauthbearer.assertion.algorithm', T.STRING, 'RS256', False,
     one_of('ES256', 'RS256', case_sensitive=False)),
    ('sasl.oauthbearer.assertion.claim.aud', T.STRING, None, False, None),
    ('sasl.oauthbearer.assertion.claim.exp.seconds', T.INT, '300', False, between(0, 86400)),
    ('sasl.oauthbearer.assertion.claim.iss', T.STRING, None, False, None),
    ('sasl.oauthbearer.assertion.claim.jti.include', T.BOOLEAN, 'false', False, None),
    ('sasl.oauthbearer.assertion.claim.nbf.seconds', T.INT, '60', False, between(0, 3600)),
    ('sasl.oauthbearer.assertion.claim.sub', T.STRING, None, False, None),
    ('sasl.oauthbearer.assertion.file', T.STRING, None, False, None),
    ('sasl.oauthbearer.assertion.private.key.file', T.STRING, None, False, None),
    ('sasl.oauthbearer.assertion.private.key.passphrase', T.PASSWORD, None, False, None),
    ('sasl.oauthbearer.assertion.template.file', T.STRING, None, False, None),
    ('sasl.oauthbearer.client.credentials.client.id', T.STRING, None, False, None),
    ('sasl.oauthbearer.client.credentials.client.secret', T.PASSWORD, None, False, None),
    ('sasl.oauthbearer.jwt.retriever.class', T.CLASS,
     'org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever', False, None),
    ('sasl.oauthbearer.jwt.validator.class', T.CLASS,
     'org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator', False, None),
    ('sasl.oauthbearer.scope', T.STRING, None, False, None),
)

# ---- Kafka 4.x only, share groups (KIP-932). Described, not acted on here: the share-group work
# (broker/coordinator/share*) owns their behaviour and may move keys to broker_catalog.py.
_KAFKA_4_SHARE_KEYS = (
    ('group.share.assignment.interval.ms', T.INT, '1000', True, at_least(0)),
    ('group.share.assignors', T.LIST, 'simple', False, None),
    ('group.share.max.assignment.interval.ms', T.INT, '15000', False, at_least(0)),
    ('group.share.max.delivery.count.limit', T.INT, '10', False, between(5, 25)),
    ('group.share.max.partition.max.record.locks', T.INT, '4000', False, between(2000, 10000)),
    ('group.share.max.share.sessions', T.INT, '2000', False, at_least(1)),
    ('group.share.min.assignment.interval.ms', T.INT, '0', False, at_least(0)),
    ('group.share.min.delivery.count.limit', T.INT, '2', False, between(2, 5)),
    ('group.share.min.partition.max.record.locks', T.INT, '100', False, between(100, 2000)),
    ('share.coordinator.append.linger.ms', T.INT, '-1', False, at_least(-1)),
    ('share.coordinator.cached.buffer.max.bytes', T.INT, '1048588', True, at_least(524288)),
    ('share.coordinator.load.buffer.size', T.INT, '5242880', False, at_least(1)),
    ('share.coordinator.snapshot.update.records.per.snapshot', T.INT, '500', False, between(0, 500)),
    ('share.coordinator.state.topic.compression.codec', T.INT, '0', False, None),
    ('share.coordinator.state.topic.segment.bytes', T.INT, '104857600', False, at_least(1)),
    ('share.coordinator.threads', T.INT, '1', False, at_least(1)),
    ('share.coordinator.write.timeout.ms', T.INT, '5000', False, at_least(1)),
    ('share.fetch.purgatory.purge.interval.requests', T.INT, '1000', False, None),
)


def _definition(name: str, ctype: ConfigType, default: str | None, dynamic: bool,
                validator=None) -> ConfigDef:
    value = None if default is None or ctype == T.PASSWORD else parse_value(ctype, default)
    return ConfigDef(name, ctype, value, validator, dynamic=dynamic, sensitive=ctype == T.PASSWORD)


KAFKA_BROKER_CONFIGS: dict[str, ConfigDef] = {
    row[0]: _definition(*row) for row in _KAFKA_BROKER_KEYS + _KAFKA_4_BROKER_KEYS + _KAFKA_4_SHARE_KEYS}

# Dynamic only per broker (resource name = a broker id), never at the cluster-wide default:
# Kafka answers INVALID_REQUEST "Cannot update these configs at default cluster level, broker id
# must be specified" for them.
PER_BROKER_ONLY = frozenset({
    "listeners", "advertised.listeners", "listener.security.protocol.map",
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.mechanism.inter.broker.protocol",
    "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class", "ssl.keymanager.algorithm",
    "ssl.protocol", "ssl.provider", "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
    "principal.builder.class", "cordoned.log.dirs",
})

# TLS stores: dynamic only with a listener prefix (listener.name.NAME.ssl.keystore.location);
# Kafka answers INVALID_REQUEST "These security configs can be dynamically updated only
# per-listener using the listener prefix" for the bare names.
LISTENER_PREFIX_ONLY = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
})
