// Drives Java 4.x's KafkaShareConsumer (KIP-932) through share-group scenarios against one broker;
// prints one "key=value" line per fact for tests/share/test_share_java.py to check.
//   ShareCheck BOOTSTRAP main     - cooperative consumption, release, lock expiry, delivery limit,
//                                   and the first half of the restart scenario
//   ShareCheck BOOTSTRAP restart  - the restart scenario's second half (after a broker restart)
//   ShareCheck BOOTSTRAP main SCENARIO [GROUP-SUFFIX] - one scenario only
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.*;

public class ShareCheck {
    static String bootstrap;
    static String suffix = "";
    static Set<KafkaShareConsumer<String, String>> explicit = new HashSet<>();

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        if (args[1].equals("main")) {
            try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
                List<NewTopic> topics = new ArrayList<>();
                Set<String> existing = admin.listTopics().names().get();
                for (String t : List.of("q-accept", "q-release", "q-lock", "q-limit", "q-restart", "q-earliest", "q-implicit"))
                    if (!existing.contains(t)) topics.add(new NewTopic(t, 1, (short) 1));
                admin.createTopics(topics).all().get();
            }
            if (args.length > 3) suffix = args[3];
            if (args.length > 2) {          // one scenario (its groups' ids suffixed by args[3])
                timed(args[2], Map.<String, Scenario>of("accept", ShareCheck::accept, "release", ShareCheck::release,
                        "lock", ShareCheck::lockExpiry, "limit", ShareCheck::deliveryLimit).get(args[2]));
                System.out.println("done=true");
                return;
            }
            timed("accept", ShareCheck::accept);
            timed("release", ShareCheck::release);
            timed("lock", ShareCheck::lockExpiry);
            timed("limit", ShareCheck::deliveryLimit);
            timed("earliest", ShareCheck::earliest);
            timed("implicit", ShareCheck::implicit);
            timed("restart_before", ShareCheck::restartBefore);
        } else {
            timed("restart_after", ShareCheck::restartAfter);
        }
        System.out.println("done=true");
    }

    interface Scenario { void run() throws Exception; }

    static void timed(String name, Scenario scenario) throws Exception {
        long start = System.currentTimeMillis();
        scenario.run();
        System.out.println(name + ".ms=" + (System.currentTimeMillis() - start));
    }

    static KafkaShareConsumer<String, String> consumer(String group, String name, int maxPollRecords) {
        return consumer(group, name, maxPollRecords, "explicit");
    }

    static KafkaShareConsumer<String, String> consumer(String group, String name, int maxPollRecords, String mode) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group + suffix);
        p.put("client.id", name);
        p.put("share.acknowledgement.mode", mode);
        p.put("max.poll.records", String.valueOf(maxPollRecords));
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
        if (mode.equals("explicit")) explicit.add(c);
        return c;
    }

    // A share-partition starts at the high watermark of its group's first fetch (share.auto.offset.reset
    // is latest): probe records are produced until every consumer has received (and accepted) one, so
    // the group is fetching before a scenario's records go in.
    static void ready(String topic, List<KafkaShareConsumer<String, String>> consumers) throws Exception {
        Set<Integer> probed = new HashSet<>();
        long end = System.currentTimeMillis() + 60_000;
        int probe = 0;
        while (probed.size() < consumers.size() && System.currentTimeMillis() < end) {
            produce(topic, List.of("probe-" + probe++));
            long round = System.currentTimeMillis() + 1_000;
            while (probed.size() < consumers.size() && System.currentTimeMillis() < round) {
                for (int i = 0; i < consumers.size(); i++) {
                    KafkaShareConsumer<String, String> c = consumers.get(i);
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                        if (explicit.contains(c)) c.acknowledge(r, AcknowledgeType.ACCEPT);   // implicit: by the next poll
                        probed.add(i);
                    }
                    c.commitSync();
                }
            }
        }
        if (probed.size() < consumers.size()) throw new IllegalStateException("consumers never fetched");
    }

    static void produce(String topic, List<String> values) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("linger.ms", "20");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (String v : values) producer.send(new ProducerRecord<>(topic, 0, null, v));
            producer.flush();
        }
    }

    static short count(ConsumerRecord<String, String> r) {
        return r.deliveryCount().orElse((short) -1);
    }

    // two members of one share group over one partition: both get records, each record once
    static void accept() throws Exception {
        KafkaShareConsumer<String, String> a = consumer("g-accept", "accept-a", 5);
        KafkaShareConsumer<String, String> b = consumer("g-accept", "accept-b", 5);
        a.subscribe(List.of("q-accept"));
        b.subscribe(List.of("q-accept"));
        ready("q-accept", List.of(a, b));
        List<String> values = new ArrayList<>();
        for (int i = 0; i < 200; i++) values.add("v" + i);
        produce("q-accept", values);
        List<String> got = new ArrayList<>();
        int fromA = 0, fromB = 0, maxCount = 0;
        long end = System.currentTimeMillis() + 60_000;
        while (got.size() < 200 && System.currentTimeMillis() < end) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(50))) {
                got.add(r.value()); fromA++; maxCount = Math.max(maxCount, count(r));
                a.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            a.commitSync();
            for (ConsumerRecord<String, String> r : b.poll(Duration.ofMillis(50))) {
                got.add(r.value()); fromB++; maxCount = Math.max(maxCount, count(r));
                b.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            b.commitSync();
        }
        // nothing comes back once everything is accepted
        int extra = 0;
        long quiet = System.currentTimeMillis() + 2_000;
        while (System.currentTimeMillis() < quiet) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(100))) { extra++; a.acknowledge(r); }
            for (ConsumerRecord<String, String> r : b.poll(Duration.ofMillis(100))) { extra++; b.acknowledge(r); }
        }
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            org.apache.kafka.clients.admin.ShareGroupDescription d =
                    admin.describeShareGroups(List.of("g-accept" + suffix)).all().get().get("g-accept" + suffix);
            System.out.println("accept.described=" + d.groupState() + "/" + d.members().size());
        }
        a.close();
        b.close();
        System.out.println("accept.total=" + got.size());
        System.out.println("accept.distinct=" + new HashSet<>(got).size());
        System.out.println("accept.both=" + (fromA > 0 && fromB > 0));
        System.out.println("accept.split=" + fromA + "/" + fromB);
        System.out.println("accept.max_delivery_count=" + maxCount);
        System.out.println("accept.extra=" + extra);
    }

    // a released record comes back with delivery count 2
    static void release() throws Exception {
        KafkaShareConsumer<String, String> c = consumer("g-release", "release", 100);
        c.subscribe(List.of("q-release"));
        ready("q-release", List.of(c));
        produce("q-release", List.of("r0", "r1", "r2", "r3", "r4"));
        Map<String, List<Short>> deliveries = new TreeMap<>();
        long end = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < end && deliveries.getOrDefault("r2", List.of()).size() < 2) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                deliveries.computeIfAbsent(r.value(), k -> new ArrayList<>()).add(count(r));
                boolean first = r.value().equals("r2") && deliveries.get("r2").size() == 1;
                c.acknowledge(r, first ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
            }
            c.commitSync();
        }
        c.close();
        System.out.println("release.deliveries=" + deliveries);
    }

    // a member that never acknowledges loses its records when the acquisition lock times out; a
    // member that joins afterwards then gets them as a later delivery
    static void lockExpiry() throws Exception {
        KafkaShareConsumer<String, String> holder = consumer("g-lock", "lock-holder", 100);
        holder.subscribe(List.of("q-lock"));
        ready("q-lock", List.of(holder));
        produce("q-lock", List.of("l0", "l1", "l2"));
        List<String> held = new ArrayList<>();
        long end = System.currentTimeMillis() + 30_000;
        while (held.isEmpty() && System.currentTimeMillis() < end)
            for (ConsumerRecord<String, String> r : holder.poll(Duration.ofMillis(200))) held.add(r.value());
        long acquiredAt = System.currentTimeMillis();
        // the holder neither acknowledges nor polls again
        KafkaShareConsumer<String, String> other = consumer("g-lock", "lock-other", 100);
        other.subscribe(List.of("q-lock"));
        Map<String, Short> redelivered = new TreeMap<>();
        long firstAt = -1;
        end = System.currentTimeMillis() + 30_000;
        while (!redelivered.keySet().containsAll(held) && System.currentTimeMillis() < end) {
            for (ConsumerRecord<String, String> r : other.poll(Duration.ofMillis(200))) {
                if (firstAt < 0) firstAt = System.currentTimeMillis();
                redelivered.put(r.value(), count(r));
                other.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            other.commitSync();
        }
        long later = held.stream().filter(v -> redelivered.getOrDefault(v, (short) 0) >= 2).count();
        other.close();
        holder.close();
        System.out.println("lock.held=" + held);
        System.out.println("lock.redelivered=" + redelivered);
        System.out.println("lock.later_deliveries=" + later);
        System.out.println("lock.waited_ms=" + (firstAt - acquiredAt));
    }

    // a record released every time is archived after group.share.delivery.count.limit deliveries
    static void deliveryLimit() throws Exception {
        KafkaShareConsumer<String, String> c = consumer("g-limit", "limit", 100);
        c.subscribe(List.of("q-limit"));
        ready("q-limit", List.of(c));
        produce("q-limit", List.of("poison", "fine"));
        List<Short> poison = new ArrayList<>();
        List<String> fine = new ArrayList<>();
        long end = System.currentTimeMillis() + 30_000;
        long quietUntil = Long.MAX_VALUE;
        while (System.currentTimeMillis() < Math.min(end, quietUntil)) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                if (r.value().equals("poison")) {
                    poison.add(count(r));
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                } else {
                    fine.add(r.value());
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
            }
            c.commitSync();
            if (poison.size() >= 3 && quietUntil == Long.MAX_VALUE) quietUntil = System.currentTimeMillis() + 3_000;
        }
        c.close();
        System.out.println("limit.poison_deliveries=" + poison);
        System.out.println("limit.fine=" + fine);
    }

    // the share.auto.offset.reset group config (IncrementalAlterConfigs on a GROUP resource): a group
    // set to earliest gets the records produced before its first fetch
    static void earliest() throws Exception {
        produce("q-earliest", List.of("e0", "e1", "e2"));
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, "g-earliest");
            admin.incrementalAlterConfigs(Map.of(group, List.of(new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all().get();
            String bad = "refused";
            try {
                admin.incrementalAlterConfigs(Map.of(group, List.of(new AlterConfigOp(
                        new ConfigEntry("share.auto.offset.reset", "sometime"), AlterConfigOp.OpType.SET)))).all().get();
                bad = "accepted";
            } catch (Exception e) {
                if (!(e.getCause() instanceof org.apache.kafka.common.errors.InvalidConfigurationException)) throw e;
            }
            System.out.println("earliest.bad_value=" + bad);
            System.out.println("earliest.described=" + admin.describeConfigs(List.of(group)).all().get()
                    .get(group).get("share.auto.offset.reset").value());
        }
        KafkaShareConsumer<String, String> c = consumer("g-earliest", "earliest", 100);
        c.subscribe(List.of("q-earliest"));
        List<String> got = new ArrayList<>();
        long end = System.currentTimeMillis() + 30_000;
        while (got.size() < 3 && System.currentTimeMillis() < end) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                got.add(r.value());
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync();
        }
        c.close();
        System.out.println("earliest.got=" + got);
    }

    // the default, implicit acknowledgement: what a poll returned is accepted by the next poll (or
    // commitSync); a later member of the group then finds nothing left
    static void implicit() throws Exception {
        KafkaShareConsumer<String, String> c = consumer("g-implicit", "implicit", 20, "implicit");
        c.subscribe(List.of("q-implicit"));
        ready("q-implicit", List.of(c));
        List<String> values = new ArrayList<>();
        for (int i = 0; i < 50; i++) values.add("i" + i);
        produce("q-implicit", values);
        List<String> got = new ArrayList<>();
        long end = System.currentTimeMillis() + 30_000;
        while (got.size() < 50 && System.currentTimeMillis() < end)
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(r.value());
        c.commitSync();
        c.close();
        KafkaShareConsumer<String, String> later = consumer("g-implicit", "implicit-later", 20, "implicit");
        later.subscribe(List.of("q-implicit"));
        int again = 0;
        long quiet = System.currentTimeMillis() + 3_000;
        while (System.currentTimeMillis() < quiet) again += later.poll(Duration.ofMillis(200)).count();
        later.close();
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            org.apache.kafka.common.TopicPartition tp = new org.apache.kafka.common.TopicPartition("q-implicit", 0);
            long end2 = admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latest())).all().get()
                    .get(tp).offset();
            org.apache.kafka.clients.admin.SharePartitionOffsetInfo info = admin.listShareGroupOffsets(
                    Map.of("g-implicit" + suffix, new org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetInfo("g-implicit" + suffix).get().get(tp);
            System.out.println("implicit.start_at_end=" + (info.startOffset() == end2) + "/" + info.lag().orElse(-1L));
        }
        System.out.println("implicit.got=" + got.size() + "/" + new HashSet<>(got).size());
        System.out.println("implicit.again=" + again);
    }

    // state that must survive a broker restart: r0-r3 accepted, r4-r9 released once
    static void restartBefore() throws Exception {
        KafkaShareConsumer<String, String> c = consumer("g-restart", "restart-1", 100);
        c.subscribe(List.of("q-restart"));
        ready("q-restart", List.of(c));
        List<String> values = new ArrayList<>();
        for (int i = 0; i < 10; i++) values.add("s" + i);
        produce("q-restart", values);
        Set<String> seen = new TreeSet<>();
        long end = System.currentTimeMillis() + 30_000;
        while (seen.size() < 10 && System.currentTimeMillis() < end) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                seen.add(r.value());
                int n = Integer.parseInt(r.value().substring(1));
                c.acknowledge(r, n < 4 ? AcknowledgeType.ACCEPT : AcknowledgeType.RELEASE);
            }
            c.commitSync();
        }
        c.close();
        System.out.println("restart.before=" + seen.size());
    }

    static void restartAfter() throws Exception {
        KafkaShareConsumer<String, String> c = consumer("g-restart", "restart-2", 100);
        c.subscribe(List.of("q-restart"));
        Map<String, Short> got = new TreeMap<>();
        long end = System.currentTimeMillis() + 45_000;
        while (got.size() < 6 && System.currentTimeMillis() < end) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                got.put(r.value(), count(r));
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync();
        }
        long quiet = System.currentTimeMillis() + 1_500;
        while (System.currentTimeMillis() < quiet)
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) { got.put(r.value(), count(r)); c.acknowledge(r); }
        c.close();
        System.out.println("restart.after=" + got);
    }
}
