"""The metadata image: the cluster's state as of one offset of the metadata log.

An image is never mutated: `image.apply(records, offset)` returns a new image that shares every untouched
topic and broker with the old one. The same records applied in the same order always give the same image,
which is what lets every node rebuild identical metadata from the log.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from broker.security.acls import AclBinding, binding_from_record, record_fields
from broker.security.delegation_tokens import TokenInfo, record_fields as token_record_fields, \
    token_from_record
from broker.security.sasl.scram import MECHANISM_BY_TYPE, MECHANISMS as SCRAM_MECHANISMS, ScramCredential

from . import records as r

# ConfigRecord.resource_type values (Kafka's ConfigResource.Type).
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
CLIENT_METRICS_RESOURCE = 16   # KIP-714 client metrics subscriptions
GROUP_RESOURCE = 32        # KIP-848 / KIP-932 group configs (share.auto.offset.reset, ...)


class ImageError(Exception):
    """A record does not fit the image it is applied to (a corrupt or out-of-order log)."""


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True)
class BrokerImage:
    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False


@dataclass(frozen=True)
class ControllerImage:
    """A controller's registration (ControllerRegistration): where its controller listener is."""
    controller_id: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]


@dataclass(frozen=True)
class PartitionImage:
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionImage] = field(default_factory=lambda: MappingProxyType({}))


def _empty():
    return MappingProxyType({})


@dataclass(frozen=True)
class MetadataImage:
    """Cluster metadata as of `offset` (the metadata log offset of the last applied entry, -1 if none)."""

    cluster_id: str = ""
    offset: int = -1
    brokers: Mapping[int, BrokerImage] = field(default_factory=_empty)
    topics: Mapping[str, TopicImage] = field(default_factory=_empty)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=_empty)
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)   # key "" = cluster-wide default
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)
    client_metrics_configs: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)
    next_producer_id: int = 0
    features: Mapping[str, int] = field(default_factory=_empty)
    # client quotas: entity (sorted (type, name-or-None) pairs) -> {quota key: value}
    client_quotas: Mapping[tuple, Mapping[str, float]] = field(default_factory=_empty)
    # (user, mechanism name) -> ScramCredential, from UserScramCredentialRecords
    scram_credentials: Mapping[tuple[str, str], ScramCredential] = field(default_factory=_empty)
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=_empty)   # by ACL id
    delegation_tokens: Mapping[str, TokenInfo] = field(default_factory=_empty)   # by token id
    controllers: Mapping[int, ControllerImage] = field(default_factory=_empty)

    def apply(self, records, offset: int | None = None) -> "MetadataImage":
        """Return the image after `records` (an atomic batch); `offset` becomes the image's offset."""
        builder = _Builder(self)
        for record in records:
            builder.replay(record)
        return builder.build(self.offset if offset is None else offset)

    # -- queries ---------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicImage | None:
        return self.topics.get(name)

    def partition(self, topic: str, partition: int) -> PartitionImage | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)

    def unfenced_brokers(self) -> list[BrokerImage]:
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def to_records(self) -> list:
        """Records that rebuild this image from an empty one (the content of a snapshot)."""
        out: list = [r.FeatureLevelRecord(name=k, feature_level=v) for k, v in sorted(self.features.items())]
        for b in (b for _, b in sorted(self.brokers.items())):
            out.append(r.RegisterBrokerRecord(
                broker_id=b.broker_id, incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
                end_points=[r.BrokerEndpoint(name=e.name, host=e.host, port=e.port,
                                              security_protocol=e.security_protocol)
                            for e in b.endpoints],
                rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown))
        for c in (c for _, c in sorted(self.controllers.items())):
            out.append(r.RegisterControllerRecord(
                controller_id=c.controller_id, incarnation_id=c.incarnation_id,
                end_points=[r.RegisterControllerRecord.ControllerEndpoint(
                    name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
                    for e in c.endpoints]))
        for name, configs in sorted(self.broker_configs.items()):
            out += [r.ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=name, name=k, value=v)
                    for k, v in sorted(configs.items())]
        for name, configs in sorted(self.group_configs.items()):
            out += [r.ConfigRecord(resource_type=GROUP_RESOURCE, resource_name=name, name=k, value=v)
                    for k, v in sorted(configs.items())]
        for name, configs in sorted(self.client_metrics_configs.items()):
            out += [r.ConfigRecord(resource_type=CLIENT_METRICS_RESOURCE, resource_name=name, name=k,
                                   value=v) for k, v in sorted(configs.items())]
        for t in (t for _, t in sorted(self.topics.items())):
            out.append(r.TopicRecord(name=t.name, topic_id=t.topic_id))
            for p in (p for _, p in sorted(t.partitions.items())):
                out.append(r.PartitionRecord(
                    partition_id=p.partition_id, topic_id=t.topic_id, replicas=list(p.replicas),
                    isr=list(p.isr), removing_replicas=list(p.removing_replicas),
                    adding_replicas=list(p.adding_replicas), leader=p.leader,
                    leader_recovery_state=p.leader_recovery_state, leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch))
            out += [r.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=t.name, name=k, value=v)
                    for k, v in sorted(self.topic_configs.get(t.name, {}).items())]
        for entity, values in sorted(self.client_quotas.items(), key=lambda item: repr(item[0])):
            data = [r.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity]
            out += [r.ClientQuotaRecord(entity=data, key=k, value=v) for k, v in sorted(values.items())]
        for (user, mechanism), c in sorted(self.scram_credentials.items()):
            out.append(r.UserScramCredentialRecord(
                name=user, mechanism=SCRAM_MECHANISMS[mechanism][1], salt=c.salt,
                stored_key=c.stored_key, server_key=c.server_key, iterations=c.iterations))
        if self.next_producer_id:
            out.append(r.ProducerIdsRecord(broker_id=-1, next_producer_id=self.next_producer_id))
        out += [r.AccessControlEntryRecord(id=acl_id, **record_fields(acl))
                for acl_id, acl in sorted(self.acls.items())]
        out += [r.DelegationTokenRecord(**token_record_fields(token))
                for _, token in sorted(self.delegation_tokens.items())]
        return out


class _Builder:
    """Copy-on-write application of records onto an image."""

    def __init__(self, base: MetadataImage):
        self.base = base
        self.brokers = dict(base.brokers)
        self.topics = dict(base.topics)
        self.topics_by_id = dict(base.topics_by_id)
        self.topic_configs = dict(base.topic_configs)
        self.broker_configs = dict(base.broker_configs)
        self.group_configs = dict(base.group_configs)
        self.client_metrics_configs = dict(base.client_metrics_configs)
        self.features = dict(base.features)
        self.next_producer_id = base.next_producer_id
        self.client_quotas = dict(base.client_quotas)
        self.scram_credentials = dict(base.scram_credentials)
        self.acls = None   # copied on the first ACL change, so listeners can skip by identity
        self.controllers = dict(base.controllers)
        self.delegation_tokens = dict(base.delegation_tokens)
        self._owned_partitions: dict = {}   # topic id -> (its TopicImage made here, its partitions)

    def build(self, offset: int) -> MetadataImage:
        ro = MappingProxyType
        return MetadataImage(
            cluster_id=self.base.cluster_id, offset=offset, brokers=ro(self.brokers), topics=ro(self.topics),
            topics_by_id=ro(self.topics_by_id), topic_configs=ro(self.topic_configs),
            broker_configs=ro(self.broker_configs), group_configs=ro(self.group_configs),
            client_metrics_configs=ro(self.client_metrics_configs),
            next_producer_id=self.next_producer_id,
            features=ro(self.features), client_quotas=ro(self.client_quotas),
            scram_credentials=ro(self.scram_credentials),
            acls=self.base.acls if self.acls is None else ro(self.acls),
            controllers=ro(self.controllers), delegation_tokens=ro(self.delegation_tokens))

    def replay(self, record) -> None:
        handler = getattr(self, "_" + type(record).__name__, None)
        if handler is None:
            raise ImageError(f"unsupported metadata record {type(record).__name__}")
        handler(record)

    # -- brokers ---------------------------------------------------------------------------------

    def _RegisterBrokerRecord(self, rec) -> None:
        endpoints = tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in rec.end_points)
        self.brokers[rec.broker_id] = BrokerImage(
            broker_id=rec.broker_id, epoch=rec.broker_epoch, incarnation_id=rec.incarnation_id,
            endpoints=endpoints, rack=rec.rack, fenced=rec.fenced,
            in_controlled_shutdown=rec.in_controlled_shutdown)

    def _UnregisterBrokerRecord(self, rec) -> None:
        broker = self.brokers.get(rec.broker_id)
        if broker is None or broker.epoch != rec.broker_epoch:
            raise ImageError(f"unregister of unknown broker {rec.broker_id} epoch {rec.broker_epoch}")
        del self.brokers[rec.broker_id]

    def _set_fenced(self, broker_id: int, epoch: int, fenced: bool) -> None:
        broker = self.brokers.get(broker_id)
        if broker is None or broker.epoch != epoch:
            raise ImageError(f"fence change for unknown broker {broker_id} epoch {epoch}")
        self.brokers[broker_id] = replace(broker, fenced=fenced)

    def _FenceBrokerRecord(self, rec) -> None:
        self._set_fenced(rec.id, rec.epoch, True)

    def _UnfenceBrokerRecord(self, rec) -> None:
        self._set_fenced(rec.id, rec.epoch, False)

    def _BrokerRegistrationChangeRecord(self, rec) -> None:
        # fenced: 1 fence, -1 unfence, 0 no change; in_controlled_shutdown: 1 enter, 0 no change.
        if rec.fenced:
            self._set_fenced(rec.broker_id, rec.broker_epoch, rec.fenced == 1)
        if rec.in_controlled_shutdown:
            broker = self.brokers.get(rec.broker_id)
            if broker is None or broker.epoch != rec.broker_epoch:
                raise ImageError(f"controlled shutdown of unknown broker {rec.broker_id} epoch {rec.broker_epoch}")
            self.brokers[rec.broker_id] = replace(broker, in_controlled_shutdown=True)

    # -- topics and partitions -------------------------------------------------------------------

    def _TopicRecord(self, rec) -> None:
        if rec.name in self.topics or rec.topic_id in self.topics_by_id:
            raise ImageError(f"topic {rec.name} ({rec.topic_id}) already exists")
        self._put_topic(TopicImage(name=rec.name, topic_id=rec.topic_id))

    def _put_topic(self, topic: TopicImage) -> None:
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def _topic(self, topic_id) -> TopicImage:
        topic = self.topics_by_id.get(topic_id)
        if topic is None:
            raise ImageError(f"unknown topic id {topic_id}")
        return topic

    def _put_partition(self, topic: TopicImage, partition: PartitionImage) -> None:
        # The first change of a topic in this batch copies it; later ones (a CreateTopics of 200
        # partitions is 200 records) write into that copy, which no one else sees before build():
        # a copy per record made replaying 9,000 records quadratic, ~300 ms on the event loop.
        owned = self._owned_partitions.get(topic.topic_id)
        if owned is None or self.topics_by_id.get(topic.topic_id) is not owned[0]:
            partitions = dict(topic.partitions)
            topic = replace(topic, partitions=MappingProxyType(partitions))
            self._put_topic(topic)
            self._owned_partitions[topic.topic_id] = (topic, partitions)
        else:
            partitions = owned[1]
        partitions[partition.partition_id] = partition

    def _PartitionRecord(self, rec) -> None:
        topic = self._topic(rec.topic_id)
        self._put_partition(topic, PartitionImage(
            partition_id=rec.partition_id, replicas=tuple(rec.replicas), isr=tuple(rec.isr),
            leader=rec.leader, leader_epoch=rec.leader_epoch, partition_epoch=rec.partition_epoch,
            removing_replicas=tuple(rec.removing_replicas), adding_replicas=tuple(rec.adding_replicas),
            leader_recovery_state=rec.leader_recovery_state))

    def _PartitionChangeRecord(self, rec) -> None:
        topic = self._topic(rec.topic_id)
        old = topic.partitions.get(rec.partition_id)
        if old is None:
            raise ImageError(f"unknown partition {topic.name}-{rec.partition_id}")
        changes: dict = {"partition_epoch": old.partition_epoch + 1}
        if rec.leader != -2:
            changes.update(leader=rec.leader, leader_epoch=old.leader_epoch + 1)
        for name in ("isr", "replicas", "removing_replicas", "adding_replicas"):
            value = getattr(rec, name)
            if value is not None:
                changes[name] = tuple(value)
        if rec.leader_recovery_state != -1:
            changes["leader_recovery_state"] = rec.leader_recovery_state
        self._put_partition(topic, replace(old, **changes))

    def _RemoveTopicRecord(self, rec) -> None:
        topic = self._topic(rec.topic_id)
        del self.topics[topic.name]
        del self.topics_by_id[topic.topic_id]
        self.topic_configs.pop(topic.name, None)

    # -- configs, producer ids, features ---------------------------------------------------------

    def _ConfigRecord(self, rec) -> None:
        if rec.resource_type == TOPIC_RESOURCE:
            table = self.topic_configs
        elif rec.resource_type == BROKER_RESOURCE:
            table = self.broker_configs
        elif rec.resource_type == GROUP_RESOURCE:
            table = self.group_configs
        elif rec.resource_type == CLIENT_METRICS_RESOURCE:
            table = self.client_metrics_configs
        else:
            return  # a type this image does not keep
        configs = dict(table.get(rec.resource_name, {}))
        if rec.value is None:
            configs.pop(rec.name, None)
        else:
            configs[rec.name] = rec.value
        if configs:
            table[rec.resource_name] = MappingProxyType(configs)
        else:
            table.pop(rec.resource_name, None)

    def _ClientQuotaRecord(self, rec) -> None:
        entity = tuple(sorted((e.entity_type, e.entity_name) for e in rec.entity))
        values = dict(self.client_quotas.get(entity, {}))
        if rec.remove:
            values.pop(rec.key, None)
        else:
            values[rec.key] = rec.value
        if values:
            self.client_quotas[entity] = MappingProxyType(values)
        else:
            self.client_quotas.pop(entity, None)

    def _ProducerIdsRecord(self, rec) -> None:
        if rec.next_producer_id < self.next_producer_id:
            raise ImageError("producer id block moved backwards")
        self.next_producer_id = rec.next_producer_id

    def _FeatureLevelRecord(self, rec) -> None:
        if rec.feature_level:
            self.features[rec.name] = rec.feature_level
        else:                      # level 0: the feature is no longer finalized
            self.features.pop(rec.name, None)

    # -- SCRAM credentials -----------------------------------------------------------------------

    def _UserScramCredentialRecord(self, rec) -> None:
        mechanism = MECHANISM_BY_TYPE.get(rec.mechanism)
        if mechanism is None:
            raise ImageError(f"unknown SCRAM mechanism {rec.mechanism}")
        self.scram_credentials[(rec.name, mechanism)] = ScramCredential(
            mechanism, bytes(rec.salt), bytes(rec.stored_key), bytes(rec.server_key), rec.iterations)

    def _RemoveUserScramCredentialRecord(self, rec) -> None:
        self.scram_credentials.pop((rec.name, MECHANISM_BY_TYPE.get(rec.mechanism)), None)

    # -- delegation tokens -----------------------------------------------------------------------

    def _DelegationTokenRecord(self, rec) -> None:
        self.delegation_tokens[rec.token_id] = token_from_record(rec)

    def _RemoveDelegationTokenRecord(self, rec) -> None:
        self.delegation_tokens.pop(rec.token_id, None)

    def _NoOpRecord(self, rec) -> None:
        pass

    # -- ACLs --------------------------------------------------------------------------------------

    def _changing_acls(self) -> dict:
        if self.acls is None:
            self.acls = dict(self.base.acls)
        return self.acls

    def _AccessControlEntryRecord(self, rec) -> None:
        self._changing_acls()[rec.id] = binding_from_record(rec)

    def _RemoveAccessControlEntryRecord(self, rec) -> None:
        if self._changing_acls().pop(rec.id, None) is None:
            raise ImageError(f"removal of unknown ACL {rec.id}")

    def _RegisterControllerRecord(self, rec) -> None:
        self.controllers[rec.controller_id] = ControllerImage(
            controller_id=rec.controller_id, incarnation_id=rec.incarnation_id,
            endpoints=tuple(Endpoint(e.name, e.host, e.port, e.security_protocol)
                            for e in rec.end_points))


@dataclass(frozen=True)
class ImageChange:
    """What one committed batch changed; handed to image listeners."""

    old: MetadataImage
    new: MetadataImage

    @property
    def created_topics(self) -> list[TopicImage]:
        return [t for tid, t in self.new.topics_by_id.items() if tid not in self.old.topics_by_id]

    @property
    def deleted_topics(self) -> list[TopicImage]:
        return [t for tid, t in self.old.topics_by_id.items() if tid not in self.new.topics_by_id]

    @property
    def changed_partitions(self) -> list[tuple[TopicImage, PartitionImage]]:
        """Partitions that are new or whose state changed (in topics that still exist)."""
        out = []
        for tid, topic in self.new.topics_by_id.items():
            before = self.old.topics_by_id.get(tid)
            if before is topic:
                continue
            for pid, part in topic.partitions.items():
                if before is None or before.partitions.get(pid) != part:
                    out.append((topic, part))
        return out

    @property
    def changed_topic_configs(self) -> list[str]:
        names = set(self.old.topic_configs) | set(self.new.topic_configs)
        return sorted(n for n in names if self.old.topic_configs.get(n) != self.new.topic_configs.get(n))
