// Java 4.x's Admin share-group offset APIs, a crashed share consumer's records, and read_committed
// share groups against Odradek; prints "key=value" facts for tests/share/test_share_admin_java.py.
//   ShareAdminCheck BOOTSTRAP offsets    - alterShareGroupOffsets / deleteShareGroupOffsets
//   ShareAdminCheck BOOTSTRAP committed  - share.isolation.level with a transactional producer
//   ShareAdminCheck BOOTSTRAP hold       - acquires records, prints them, then waits to be killed
//   ShareAdminCheck BOOTSTRAP take       - another member of the holder's group: what it gets, how soon
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;

public class ShareAdminCheck {
    static String bootstrap;
    static Admin admin;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        try (Admin a = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin = a;
            switch (args[1]) {
                case "offsets" -> offsets();
                case "committed" -> committed();
                case "hold" -> hold();
                case "take" -> take();
                default -> throw new IllegalArgumentException(args[1]);
            }
        }
        System.out.println("done=true");
        System.out.flush();
    }

    static void topic(String name) throws Exception {
        if (!admin.listTopics().names().get().contains(name))
            admin.createTopics(List.of(new NewTopic(name, 1, (short) 1))).all().get();
    }

    static void groupConfig(String group, String name, String value) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(new ConfigEntry(name, value),
                AlterConfigOp.OpType.SET)))).all().get();
    }

    static KafkaShareConsumer<String, String> consumer(String group, int maxPollRecords) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("max.poll.records", String.valueOf(maxPollRecords));
        return new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static void produce(String topic, List<String> values) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (String v : values) producer.send(new ProducerRecord<>(topic, 0, null, v));
            producer.flush();
        }
    }

    static List<String> values(String prefix, int from, int to) {
        List<String> out = new ArrayList<>();
        for (int i = from; i < to; i++) out.add(prefix + i);
        return out;
    }

    // consume (accepting everything) until `want` records came or `ms` passed; the values in order
    static List<String> consume(KafkaShareConsumer<String, String> c, int want, long ms) {
        List<String> got = new ArrayList<>();
        long end = System.currentTimeMillis() + ms;
        while (got.size() < want && System.currentTimeMillis() < end) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                got.add(r.value());
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync();
        }
        return got;
    }

    static String error(Runnable call) {
        try {
            call.run();
            return "none";
        } catch (RuntimeException e) {
            Throwable cause = e.getCause() instanceof ExecutionException ? e.getCause().getCause() : e.getCause();
            return cause == null ? e.getClass().getSimpleName() : cause.getClass().getSimpleName();
        }
    }

    static <T> T get(org.apache.kafka.common.KafkaFuture<T> future) {
        try {
            return future.get();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static String startOffset(String group, TopicPartition tp) {
        Map<TopicPartition, SharePartitionOffsetInfo> infos = get(admin.listShareGroupOffsets(
                Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group));
        SharePartitionOffsetInfo info = infos.get(tp);
        return info == null ? "none" : String.valueOf(info.startOffset());
    }

    static void awaitEmpty(String group) throws Exception {
        long end = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < end) {
            String state = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get().groupState().toString();
            if (state.equalsIgnoreCase("Empty")) return;
            Thread.sleep(200);
        }
        throw new IllegalStateException(group + " never became empty");
    }

    // Admin.alterShareGroupOffsets / deleteShareGroupOffsets: consumption starts where they say
    static void offsets() throws Exception {
        String group = "g-offsets";
        TopicPartition tp = new TopicPartition("q-offsets", 0);
        topic("q-offsets");
        produce("q-offsets", values("o", 0, 20));
        // the group does not exist yet: altering creates it (as Kafka 4.2+), so it starts where set
        get(admin.alterShareGroupOffsets(group, Map.of(tp, 12L)).all());
        System.out.println("offsets.listed=" + startOffset(group, tp));
        KafkaShareConsumer<String, String> c = consumer(group, 100);
        c.subscribe(List.of("q-offsets"));
        System.out.println("offsets.first=" + consume(c, 8, 30_000));
        // a group with a member: NON_EMPTY_GROUP
        System.out.println("offsets.busy_alter=" + error(() -> get(admin.alterShareGroupOffsets(group, Map.of(tp, 0L)).all())));
        System.out.println("offsets.busy_delete=" + error(() -> get(admin.deleteShareGroupOffsets(group, Set.of("q-offsets")).all())));
        c.close();
        awaitEmpty(group);
        // back to offset 5: records 5..19 come again, as first deliveries of the new state
        get(admin.alterShareGroupOffsets(group, Map.of(tp, 5L)).all());
        c = consumer(group, 100);
        c.subscribe(List.of("q-offsets"));
        List<String> again = consume(c, 15, 30_000);
        System.out.println("offsets.after_alter=" + again.size() + "/" + (again.isEmpty() ? "" : again.get(0)));
        c.close();
        awaitEmpty(group);
        // deleted: the share-partition starts afresh at share.auto.offset.reset (earliest here)
        get(admin.deleteShareGroupOffsets(group, Set.of("q-offsets")).all());
        System.out.println("offsets.after_delete_listed=" + startOffset(group, tp));
        groupConfig(group, "share.auto.offset.reset", "earliest");
        c = consumer(group, 100);
        c.subscribe(List.of("q-offsets"));
        List<String> fresh = consume(c, 20, 30_000);
        System.out.println("offsets.after_delete=" + fresh.size() + "/" + (fresh.isEmpty() ? "" : fresh.get(0)));
        c.close();
        awaitEmpty(group);
        // Kafka's errors
        System.out.println("offsets.unknown_partition=" + error(() -> get(admin.alterShareGroupOffsets(group,
                Map.of(new TopicPartition("q-offsets", 7), 1L)).partitionResult(new TopicPartition("q-offsets", 7)))));
        System.out.println("offsets.unknown_topic=" + error(() -> get(admin.deleteShareGroupOffsets(group,
                Set.of("q-nope")).topicResult("q-nope"))));
        System.out.println("offsets.unknown_group=" + error(() -> get(admin.deleteShareGroupOffsets("g-missing",
                Set.of("q-offsets")).all())));
        // a consumer group's id is not a share group's
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", "g-classic");
        try (org.apache.kafka.clients.consumer.KafkaConsumer<String, String> classic =
                     new org.apache.kafka.clients.consumer.KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            classic.commitSync(Map.of(tp, new org.apache.kafka.clients.consumer.OffsetAndMetadata(3)));
        }
        System.out.println("offsets.other_type=" + error(() -> get(admin.alterShareGroupOffsets("g-classic",
                Map.of(tp, 1L)).all())));
    }

    // share.isolation.level: read_committed never delivers aborted records nor any past the LSO
    static void committed() throws Exception {
        topic("q-txn");
        for (String g : List.of("g-rc", "g-ru")) groupConfig(g, "share.auto.offset.reset", "earliest");
        groupConfig("g-rc", "share.isolation.level", "read_committed");
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", "share-txn");
        KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        producer.initTransactions();
        for (List<String> txn : List.of(values("t", 0, 5), values("a", 0, 5), values("t", 5, 10))) {
            producer.beginTransaction();
            for (String v : txn) producer.send(new ProducerRecord<>("q-txn", 0, null, v));
            producer.flush();
            if (txn.get(0).startsWith("a")) producer.abortTransaction(); else producer.commitTransaction();
        }
        producer.beginTransaction();            // left open: past the last stable offset
        for (String v : values("p", 0, 3)) producer.send(new ProducerRecord<>("q-txn", 0, null, v));
        producer.flush();
        KafkaShareConsumer<String, String> rc = consumer("g-rc", 100);
        rc.subscribe(List.of("q-txn"));
        List<String> got = consume(rc, 10, 30_000);
        got.addAll(consume(rc, 100, 2_000));          // and nothing more while the transaction is open
        System.out.println("committed.before_commit=" + got);
        producer.commitTransaction();
        got = consume(rc, 3, 20_000);
        System.out.println("committed.after_commit=" + got);
        producer.close();
        rc.close();
        KafkaShareConsumer<String, String> ru = consumer("g-ru", 100);
        ru.subscribe(List.of("q-txn"));
        got = consume(ru, 18, 30_000);
        got.addAll(consume(ru, 100, 1_000));
        Collections.sort(got);
        System.out.println("committed.uncommitted=" + got.size() + "/" + got.stream().filter(v -> v.startsWith("a")).count());
        ru.close();
    }

    // a member acquires records and is then killed (no close): prints what it holds
    static void hold() throws Exception {
        topic("q-crash");
        groupConfig("g-crash", "share.auto.offset.reset", "earliest");
        produce("q-crash", values("c", 0, 10));
        KafkaShareConsumer<String, String> c = consumer("g-crash", 10);
        c.subscribe(List.of("q-crash"));
        List<String> held = new ArrayList<>();
        long end = System.currentTimeMillis() + 60_000;
        while (held.isEmpty() && System.currentTimeMillis() < end)
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) held.add(r.value());
        System.out.println("hold.held=" + held);
        System.out.flush();
        Thread.sleep(600_000);          // never acknowledges: the test kills this process
    }

    static void take() throws Exception {
        long start = System.currentTimeMillis();
        KafkaShareConsumer<String, String> c = consumer("g-crash", 100);
        c.subscribe(List.of("q-crash"));
        Map<String, Short> got = new TreeMap<>();
        long end = System.currentTimeMillis() + 60_000;
        while (got.size() < 10 && System.currentTimeMillis() < end) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                got.put(r.value(), r.deliveryCount().orElse((short) -1));
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync();
        }
        System.out.println("take.ms=" + (System.currentTimeMillis() - start));
        System.out.println("take.got=" + got);
        c.close();
    }
}
