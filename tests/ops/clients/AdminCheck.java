import java.util.*;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.StringSerializer;

/** Admin client calls against one broker, printed as key=value facts for tests/ops/test_admin_java.py. */
public class AdminCheck {
    static void print(String key, Object value) { System.out.println(key + "=" + value); }

    static String outcome(KafkaFuture<?> future) {
        try {
            future.get();
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    static void describeFeatures(Admin admin, String prefix) throws Exception {
        FeatureMetadata meta = admin.describeFeatures().featureMetadata().get();
        StringBuilder finalized = new StringBuilder();
        for (Map.Entry<String, FinalizedVersionRange> e : new TreeMap<>(meta.finalizedFeatures()).entrySet())
            finalized.append(e.getKey()).append(':').append(e.getValue().minVersionLevel()).append('-')
                     .append(e.getValue().maxVersionLevel()).append(' ');
        StringBuilder supported = new StringBuilder();
        for (Map.Entry<String, SupportedVersionRange> e : new TreeMap<>(meta.supportedFeatures()).entrySet())
            supported.append(e.getKey()).append(':').append(e.getValue().minVersion()).append('-')
                     .append(e.getValue().maxVersion()).append(' ');
        print(prefix + ".finalized", finalized.toString().trim());
        print(prefix + ".supported", supported.toString().trim());
        print(prefix + ".epoch", meta.finalizedFeaturesEpoch().map(e -> e >= 0 ? "set" : "negative").orElse("none"));
    }

    static String update(Admin admin, String feature, int level, FeatureUpdate.UpgradeType type, boolean validateOnly) {
        UpdateFeaturesResult result = admin.updateFeatures(
            Map.of(feature, new FeatureUpdate((short) level, type)),
            new UpdateFeaturesOptions().validateOnly(validateOnly));
        return outcome(result.values().get(feature));
    }

    static void features(Admin admin) throws Exception {
        describeFeatures(admin, "before");
        FeatureUpdate.UpgradeType up = FeatureUpdate.UpgradeType.UPGRADE;
        FeatureUpdate.UpgradeType safe = FeatureUpdate.UpgradeType.SAFE_DOWNGRADE;
        FeatureUpdate.UpgradeType unsafe = FeatureUpdate.UpgradeType.UNSAFE_DOWNGRADE;
        print("update.same", update(admin, "metadata.version", 21, up, false));
        print("update.down_as_upgrade", update(admin, "metadata.version", 20, up, false));
        print("update.safe_validate", update(admin, "metadata.version", 17, safe, true));
        print("update.safe_too_far", update(admin, "metadata.version", 16, safe, true));
        print("update.unsafe_too_far", update(admin, "metadata.version", 16, unsafe, true));
        print("update.unknown", update(admin, "no.such.feature", 1, up, false));
        print("update.unknown_zero", update(admin, "no.such.feature", 0, safe, false));
        print("update.newer_as_down", update(admin, "metadata.version", 21, safe, true));
        describeFeatures(admin, "validated");
        print("update.safe", update(admin, "metadata.version", 20, safe, false));
        describeFeatures(admin, "after");
    }


    static String bootstrap;
    static long base = System.currentTimeMillis() - 60_000;

    static KafkaProducer<String, String> producer(String transactionalId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "0");
        if (transactionalId != null) p.put("transactional.id", transactionalId);
        return new KafkaProducer<>(p);
    }

    static String tryGet(KafkaFuture<?> future, java.util.function.Function<Object, String> show) {
        try {
            return show.apply(future.get());
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    static String offsets(Admin admin, TopicPartition tp, OffsetSpec spec) {
        return tryGet(admin.listOffsets(Map.of(tp, spec)).partitionResult(tp),
                      o -> { ListOffsetsResult.ListOffsetsResultInfo i = (ListOffsetsResult.ListOffsetsResultInfo) o;
                             return i.offset() + "@" + (i.timestamp() < 0 ? i.timestamp() : i.timestamp() - base) + "/" + i.leaderEpoch().map(e -> "epoch").orElse("none"); });
    }

    static String txn(Admin admin, String id) {
        return tryGet(admin.describeTransactions(List.of(id)).description(id), o -> {
            TransactionDescription d = (TransactionDescription) o;
            List<String> parts = new ArrayList<>();
            for (TopicPartition tp : d.topicPartitions()) parts.add(tp.toString());
            Collections.sort(parts);
            return d.state() + " coordinator=" + d.coordinatorId() + " timeout=" + d.transactionTimeoutMs()
                + " start=" + (d.transactionStartTimeMs().isPresent() ? "set" : "none") + " parts=" + parts
                + " epoch=" + d.producerEpoch();
        });
    }

    static String producers(Admin admin, TopicPartition tp) {
        return tryGet(admin.describeProducers(List.of(tp)).partitionResult(tp), o -> {
            List<String> out = new ArrayList<>();
            for (ProducerState s : ((DescribeProducersResult.PartitionProducerState) o).activeProducers())
                out.add("epoch=" + s.producerEpoch() + " seq=" + s.lastSequence() + " ts=" + (s.lastTimestamp() > 0 ? "set" : s.lastTimestamp())
                        + " coordEpoch=" + (s.coordinatorEpoch().isPresent() ? "set" : "none")
                        + " txnStart=" + s.currentTransactionStartOffset());
            return out.toString();
        });
    }

    static String groups(Collection<? extends Object> listings) {
        List<String> out = new ArrayList<>();
        for (Object o : listings) {
            if (o instanceof GroupListing) {
                GroupListing g = (GroupListing) o;
                if (!g.groupId().startsWith("sweep-")) continue;
                out.add(g.groupId() + ":" + g.type().map(Object::toString).orElse("?") + ":" + g.protocol()
                        + ":" + g.groupState().map(Object::toString).orElse("?"));
            } else {
                ConsumerGroupListing g = (ConsumerGroupListing) o;
                if (!g.groupId().startsWith("sweep-")) continue;
                out.add(g.groupId() + ":" + g.type().map(Object::toString).orElse("?") + ":" + g.isSimpleConsumerGroup()
                        + ":" + g.groupState().map(Object::toString).orElse("?"));
            }
        }
        Collections.sort(out);
        return out.toString();
    }

    static void sweep(Admin admin) throws Exception {
        String topic = "sweep-t";
        admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        TopicPartition empty = new TopicPartition(topic, 1);
        print("offsets.empty.max", offsets(admin, empty, OffsetSpec.maxTimestamp()));
        print("offsets.empty.ts", offsets(admin, empty, OffsetSpec.forTimestamp(0)));
        try (KafkaProducer<String, String> prod = producer(null)) {
            long[] stamps = {1000, 5000, 3000, 2000, 4000};   // after base: recent, within retention
            for (int i = 0; i < stamps.length; i++)
                prod.send(new ProducerRecord<>(topic, 0, base + stamps[i], "k" + i, "v" + i)).get();
        }
        print("offsets.earliest", offsets(admin, p0, OffsetSpec.earliest()));
        print("offsets.latest", offsets(admin, p0, OffsetSpec.latest()));
        print("offsets.max", offsets(admin, p0, OffsetSpec.maxTimestamp()));
        print("offsets.ts2500", offsets(admin, p0, OffsetSpec.forTimestamp(base + 2500)));
        print("offsets.ts9999", offsets(admin, p0, OffsetSpec.forTimestamp(base + 9999)));
        print("offsets.earliest_local", offsets(admin, p0, OffsetSpec.earliestLocal()));
        print("offsets.latest_tiered", offsets(admin, p0, OffsetSpec.latestTiered()));
        print("producers.p0", producers(admin, p0));

        KafkaProducer<String, String> tx = producer("sweep-txn");
        tx.initTransactions();
        tx.beginTransaction();
        tx.send(new ProducerRecord<>(topic, 1, "tk", "tv")).get();
        print("txn.ongoing", txn(admin, "sweep-txn"));
        print("producers.p1.ongoing", producers(admin, p1));
        print("txn.list", tryGet(admin.listTransactions().all(), o -> {
            List<String> out = new ArrayList<>();
            for (TransactionListing l : (Collection<TransactionListing>) o)
                if (l.transactionalId().startsWith("sweep-")) out.add(l.transactionalId() + ":" + l.state());
            return out.toString(); }));
        print("txn.list.ongoing", tryGet(admin.listTransactions(new ListTransactionsOptions().filterStates(
            List.of(TransactionState.ONGOING))).all(), o -> String.valueOf(((Collection<?>) o).size())));
        print("txn.list.empty", tryGet(admin.listTransactions(new ListTransactionsOptions().filterStates(
            List.of(TransactionState.EMPTY))).all(), o -> String.valueOf(((Collection<?>) o).size())));
        tx.commitTransaction();
        for (int i = 0; i < 100 && !txn(admin, "sweep-txn").startsWith("CompleteCommit"); i++) Thread.sleep(100);
        print("txn.committed", txn(admin, "sweep-txn"));
        print("producers.p1.committed", producers(admin, p1));
        print("offsets.p1.latest", offsets(admin, p1, OffsetSpec.latest()));
        print("fence", tryGet(admin.fenceProducers(List.of("sweep-txn")).producerId("sweep-txn"), o -> "pid"));
        print("fence.epoch", tryGet(admin.fenceProducers(List.of("sweep-txn")).epochId("sweep-txn"), o -> String.valueOf(o)));
        print("txn.fenced", txn(admin, "sweep-txn"));
        print("txn.unknown", txn(admin, "sweep-nope"));
        try { tx.close(Duration.ofSeconds(5)); } catch (Exception e) { }

        print("delete.2", tryGet(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(2))).lowWatermarks().get(p0),
                                 o -> String.valueOf(((DeletedRecords) o).lowWatermark())));
        print("delete.100", tryGet(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(100))).lowWatermarks().get(p0),
                                   o -> String.valueOf(((DeletedRecords) o).lowWatermark())));
        print("delete.hw", tryGet(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(p0),
                                  o -> String.valueOf(((DeletedRecords) o).lowWatermark())));
        print("offsets.after_delete.earliest", offsets(admin, p0, OffsetSpec.earliest()));
        print("offsets.after_delete.earliest_local", offsets(admin, p0, OffsetSpec.earliestLocal()));
        print("offsets.after_delete.max", offsets(admin, p0, OffsetSpec.maxTimestamp()));

        admin.alterConsumerGroupOffsets("sweep-g", Map.of(p0, new OffsetAndMetadata(3))).all().get();
        print("groups.all", groups(admin.listConsumerGroups().all().get()));
        print("groups.empty", groups(admin.listConsumerGroups(new ListConsumerGroupsOptions().inGroupStates(Set.of(GroupState.EMPTY))).all().get()));
        print("groups.stable", groups(admin.listConsumerGroups(new ListConsumerGroupsOptions().inGroupStates(Set.of(GroupState.STABLE))).all().get()));
        print("groups.classic", groups(admin.listConsumerGroups(new ListConsumerGroupsOptions().withTypes(Set.of(GroupType.CLASSIC))).all().get()));
        print("groups.consumer_type", groups(admin.listConsumerGroups(new ListConsumerGroupsOptions().withTypes(Set.of(GroupType.CONSUMER))).all().get()));
        print("listgroups.all", tryGet(admin.listGroups().all(), o -> groups((Collection<?>) o)));
        print("listgroups.consumer", tryGet(admin.listGroups(ListGroupsOptions.forConsumerGroups()).all(), o -> groups((Collection<?>) o)));
        print("listgroups.share", tryGet(admin.listGroups(ListGroupsOptions.forShareGroups()).all(), o -> groups((Collection<?>) o)));
        print("listgroups.classic", tryGet(admin.listGroups(new ListGroupsOptions().withTypes(Set.of(GroupType.CLASSIC))).all(), o -> groups((Collection<?>) o)));
        print("listgroups.protocol", tryGet(admin.listGroups(new ListGroupsOptions().withProtocolTypes(Set.of("consumer"))).all(), o -> groups((Collection<?>) o)));
        print("listgroups.empty_state", tryGet(admin.listGroups(new ListGroupsOptions().inGroupStates(Set.of(GroupState.EMPTY))).all(), o -> groups((Collection<?>) o)));

        Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(List.of(1)).allDescriptions().get();
        for (LogDirDescription d : dirs.get(1).values()) {
            ReplicaInfo r0 = d.replicaInfos().get(p0), r1 = d.replicaInfos().get(p1);
            if (r0 == null) continue;
            print("logdirs.error", d.error() == null ? "none" : d.error().getClass().getSimpleName());
            print("logdirs.p0", (r0.size() > 0) + " lag=" + r0.offsetLag() + " future=" + r0.isFuture());
            print("logdirs.p1", (r1.size() > 0) + " lag=" + r1.offsetLag() + " future=" + r1.isFuture());
            print("logdirs.bytes", (d.totalBytes().isPresent() ? "total" : "-") + (d.usableBytes().isPresent() ? "usable" : "-"));
        }
        TopicPartitionReplica replica = new TopicPartitionReplica(topic, 0, 1);
        print("replicalogdirs", tryGet(admin.describeReplicaLogDirs(List.of(replica)).all(), o -> {
            DescribeReplicaLogDirsResult.ReplicaLogDirInfo i = ((Map<TopicPartitionReplica, DescribeReplicaLogDirsResult.ReplicaLogDirInfo>) o).get(replica);
            return (i.getCurrentReplicaLogDir() != null) + " future=" + i.getFutureReplicaLogDir() + " lag=" + i.getCurrentReplicaOffsetLag() + "/" + i.getFutureReplicaOffsetLag(); }));
        TopicPartitionReplica missing = new TopicPartitionReplica("sweep-none", 0, 1);
        print("replicalogdirs.missing", tryGet(admin.describeReplicaLogDirs(List.of(missing)).all(), o -> {
            DescribeReplicaLogDirsResult.ReplicaLogDirInfo i = ((Map<TopicPartitionReplica, DescribeReplicaLogDirsResult.ReplicaLogDirInfo>) o).get(missing);
            return i.getCurrentReplicaLogDir() + " " + i.getCurrentReplicaOffsetLag(); }));

        print("elect.preferred", tryGet(admin.electLeaders(ElectionType.PREFERRED, Set.of(p0)).partitions(), o -> {
            Map<TopicPartition, Optional<Throwable>> m = (Map<TopicPartition, Optional<Throwable>>) o;
            return m.get(p0).map(t -> t.getClass().getSimpleName()).orElse("elected"); }));
        print("elect.unclean", tryGet(admin.electLeaders(ElectionType.UNCLEAN, Set.of(p0)).partitions(), o -> {
            Map<TopicPartition, Optional<Throwable>> m = (Map<TopicPartition, Optional<Throwable>>) o;
            return m.get(p0).map(t -> t.getClass().getSimpleName()).orElse("elected"); }));
        print("elect.unknown", tryGet(admin.electLeaders(ElectionType.PREFERRED, Set.of(new TopicPartition("sweep-none", 0))).partitions(), o -> {
            Map<TopicPartition, Optional<Throwable>> m = (Map<TopicPartition, Optional<Throwable>>) o;
            return m.values().iterator().next().map(t -> t.getClass().getSimpleName()).orElse("elected"); }));
        print("elect.all", tryGet(admin.electLeaders(ElectionType.PREFERRED, null).partitions(), o -> {
            Map<TopicPartition, Optional<Throwable>> m = (Map<TopicPartition, Optional<Throwable>>) o;
            List<String> out = new ArrayList<>();
            for (Map.Entry<TopicPartition, Optional<Throwable>> e : m.entrySet())
                if (e.getKey().topic().startsWith("sweep-")) out.add(e.getKey() + ":" + e.getValue().map(t -> t.getClass().getSimpleName()).orElse("elected"));
            Collections.sort(out);
            return out.toString(); }));
        print("reassignments", tryGet(admin.listPartitionReassignments().reassignments(), o -> String.valueOf(((Map<?, ?>) o).size())));
        print("reassignments.unknown", tryGet(admin.listPartitionReassignments(Set.of(new TopicPartition("sweep-none", 0))).reassignments(), o -> String.valueOf(((Map<?, ?>) o).size())));

        print("quorum", tryGet(admin.describeMetadataQuorum().quorumInfo(), o -> {
            QuorumInfo q = (QuorumInfo) o;
            StringBuilder b = new StringBuilder("leader=" + q.leaderId() + " epochPositive=" + (q.leaderEpoch() > 0) + " hwPositive=" + (q.highWatermark() > 0));
            for (QuorumInfo.ReplicaState v : q.voters())
                b.append(" voter=" + v.replicaId() + " dir=" + (v.replicaDirectoryId() != null) + " leoAtHw=" + (v.logEndOffset() >= q.highWatermark())
                         + " fetch=" + v.lastFetchTimestamp().isPresent() + " caughtUp=" + v.lastCaughtUpTimestamp().isPresent());
            b.append(" observers=" + q.observers().size());
            return b.toString(); }));
        print("quorum.nodes", tryGet(admin.describeMetadataQuorum().quorumInfo(), o -> ((QuorumInfo) o).nodes().keySet().toString()));
        DescribeClusterResult cluster = admin.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true));
        print("cluster.controller", cluster.controller().get().id());
        print("cluster.nodes", cluster.nodes().get().size());
        print("cluster.ops", tryGet(cluster.authorizedOperations(), o -> o == null ? "null" : new TreeSet<>((Set<?>) o).toString()));
        DescribeClusterResult plain = admin.describeCluster();
        print("cluster.ops.plain", tryGet(plain.authorizedOperations(), o -> o == null ? "null" : new TreeSet<>((Set<?>) o).toString()));
        print("scram.all", tryGet(admin.describeUserScramCredentials().all(), o -> String.valueOf(((Map<?, ?>) o).size())));
        print("scram.users", tryGet(admin.describeUserScramCredentials().users(), o -> o.toString()));
        print("scram.unknown", tryGet(admin.describeUserScramCredentials(List.of("nobody")).description("nobody"), o -> "found"));
        print("client_metrics", tryGet(admin.listClientMetricsResources().all(), o -> String.valueOf(((Collection<?>) o).size())));
        print("config_resources", tryGet(admin.listConfigResources().all(), o -> {
            List<String> out = new ArrayList<>();
            for (Object r : (Collection<?>) o) out.add(r.toString());
            Collections.sort(out);
            return out.toString(); }));
    }

    static String txnIds(Admin admin, ListTransactionsOptions options) {
        return tryGet(admin.listTransactions(options).all(), o -> {
            List<String> out = new ArrayList<>();
            for (TransactionListing l : (Collection<TransactionListing>) o)
                if (l.transactionalId().startsWith("edge-")) out.add(l.transactionalId() + ":" + l.state());
            Collections.sort(out);
            return out.toString(); });
    }

    /** Edge cases: empty partitions, unknown ids, transaction filters, SCRAM credentials. */
    static void edges(Admin admin) throws Exception {
        String topic = "edge-t";
        admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        TopicPartition p0 = new TopicPartition(topic, 0);
        print("edge.producers.empty", producers(admin, p0));
        print("edge.delete.empty.0", tryGet(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(0))).lowWatermarks().get(p0),
                                       o -> String.valueOf(((DeletedRecords) o).lowWatermark())));
        print("edge.offsets.empty.earliest_local", offsets(admin, p0, OffsetSpec.earliestLocal()));
        print("edge.offsets.empty.latest_tiered", offsets(admin, p0, OffsetSpec.latestTiered()));

        print("edge.fence.unknown", tryGet(admin.fenceProducers(List.of("edge-fresh")).epochId("edge-fresh"), o -> String.valueOf(o)));
        print("edge.txn.after_fence_unknown", txn(admin, "edge-fresh"));
        KafkaProducer<String, String> tx = producer("edge-a");
        tx.initTransactions();
        tx.beginTransaction();
        tx.send(new ProducerRecord<>(topic, 0, "k", "v")).get();
        Thread.sleep(1500);
        long pid = -1;
        for (TransactionListing l : admin.listTransactions().all().get())
            if (l.transactionalId().equals("edge-a")) pid = l.producerId();
        print("edge.txnlist.by_pid", txnIds(admin, new ListTransactionsOptions().filterProducerIds(List.of(pid))));
        print("edge.txnlist.by_other_pid", txnIds(admin, new ListTransactionsOptions().filterProducerIds(List.of(pid + 12345))));
        print("edge.txnlist.duration_short", txnIds(admin, new ListTransactionsOptions().filterOnDuration(500)));
        print("edge.txnlist.duration_long", txnIds(admin, new ListTransactionsOptions().filterOnDuration(600_000)));
        print("edge.txnlist.pattern", txnIds(admin, new ListTransactionsOptions().filterOnTransactionalIdPattern("edge-.*")));
        print("edge.producers.ongoing_state", tryGet(admin.describeTransactions(List.of("edge-a")).all(), o -> "ok"));
        tx.abortTransaction();
        for (int i = 0; i < 100 && !txn(admin, "edge-a").startsWith("CompleteAbort"); i++) Thread.sleep(100);
        print("edge.txn.aborted", txn(admin, "edge-a"));
        print("edge.txnlist.aborted", txnIds(admin, new ListTransactionsOptions().filterStates(List.of(TransactionState.COMPLETE_ABORT))));
        tx.close(Duration.ofSeconds(5));

        ScramCredentialInfo info = new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192);
        print("edge.scram.upsert", tryGet(admin.alterUserScramCredentials(List.of(
            new UserScramCredentialUpsertion("edge-user", info, "secret"))).all(), o -> "ok"));
        print("edge.scram.upsert_bad", tryGet(admin.alterUserScramCredentials(List.of(
            new UserScramCredentialUpsertion("edge-user2", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 100), "secret"))).all(), o -> "ok"));
        print("edge.scram.describe", tryGet(admin.describeUserScramCredentials(List.of("edge-user")).description("edge-user"),
                                       o -> ((UserScramCredentialsDescription) o).credentialInfos().toString()));
        print("edge.scram.users", tryGet(admin.describeUserScramCredentials().users(), o -> o.toString()));
        print("edge.scram.delete_missing", tryGet(admin.alterUserScramCredentials(List.of(
            new UserScramCredentialDeletion("edge-user", ScramMechanism.SCRAM_SHA_512))).all(), o -> "ok"));
        print("edge.scram.delete", tryGet(admin.alterUserScramCredentials(List.of(
            new UserScramCredentialDeletion("edge-user", ScramMechanism.SCRAM_SHA_256))).all(), o -> "ok"));
        print("edge.scram.after_delete", tryGet(admin.describeUserScramCredentials().users(), o -> o.toString()));
        print("edge.logdirs.all_brokers", tryGet(admin.describeLogDirs(List.of(1)).allDescriptions(), o -> ((Map<?, ?>) o).keySet().toString()));
        print("edge.replicalogdirs.wrong_broker", tryGet(admin.describeReplicaLogDirs(List.of(new TopicPartitionReplica(topic, 0, 1))).all(), o -> "ok"));
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("request.timeout.ms", "20000");
        props.put("default.api.timeout.ms", "40000");
        try (Admin admin = Admin.create(props)) {
            switch (args[1]) {
                case "features": features(admin); break;
                case "describe_features": describeFeatures(admin, "described"); break;
                case "sweep": sweep(admin); edges(admin); break;
                case "sweep_cleanup":
                    admin.deleteConsumerGroups(List.of("sweep-g")).all().get();
                    admin.deleteTopics(List.of("sweep-t", "edge-t")).all().get();
                    break;
                case "restore_features":
                    print("restored", update(admin, "metadata.version", 21, FeatureUpdate.UpgradeType.UPGRADE, false));
                    break;
                default: throw new IllegalArgumentException(args[1]);
            }
        }
        print("done", true);
    }
}
