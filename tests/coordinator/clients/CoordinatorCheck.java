// Drives the Java client (kafka-clients 4.x) through the coordinator scenarios; prints one
// "key=value" line per fact for tests/coordinator/test_clients_java.py to check.
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.*;

public class CoordinatorCheck {
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        try (Admin admin = Admin.create(props())) {
            admin.createTopics(List.of(new NewTopic("idem", 4, (short) 1), new NewTopic("txn", 1, (short) 1))).all().get();
        }
        // the default producer is idempotent: 10,000 records, each exactly once
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
            for (int i = 0; i < 10_000; i++) producer.send(new ProducerRecord<>("idem", i % 4, null, "r" + i));
            producer.flush();
        }
        for (String assignor : List.of("RangeAssignor", "RoundRobinAssignor", "StickyAssignor", "CooperativeStickyAssignor")) {
            Properties p = consumerProps("group-" + assignor, "read_uncommitted");
            p.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer." + assignor);
            List<String> values = new ArrayList<>();
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
                consumer.subscribe(List.of("idem"));
                long end = System.currentTimeMillis() + 30_000;
                while (values.size() < 10_000 && System.currentTimeMillis() < end)
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) values.add(r.value());
                consumer.commitSync(Map.of(new TopicPartition("idem", 0), new OffsetAndMetadata(42, "java-meta")));
                OffsetAndMetadata committed = consumer.committed(Set.of(new TopicPartition("idem", 0))).get(new TopicPartition("idem", 0));
                System.out.println(assignor + ".records=" + values.size());
                System.out.println(assignor + ".distinct=" + new HashSet<>(values).size());
                System.out.println(assignor + ".assigned=" + consumer.assignment().size());
                System.out.println(assignor + ".committed=" + committed.offset() + "/" + committed.metadata());
            }
        }
        // static membership: a restarted member with the same group.instance.id gets its partitions back
        // in the same generation (JoinGroup v9's skipAssignment for the leader, KIP-814)
        int generation = -1;
        for (int round = 0; round < 2; round++) {
            Properties p = consumerProps("java-static", "read_uncommitted");
            p.put("group.instance.id", "static-1");
            p.put("session.timeout.ms", "30000");
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
                consumer.subscribe(List.of("idem"));
                long end = System.currentTimeMillis() + 30_000;
                while (consumer.assignment().size() < 4 && System.currentTimeMillis() < end) consumer.poll(Duration.ofMillis(100));
                int now = consumer.groupMetadata().generationId();
                System.out.println("static.round" + round + "=" + consumer.assignment().size() + "/" + (round == 0 || now == generation));
                generation = now;
            }
        }
        Properties tp = producerProps();
        tp.put("transactional.id", "java-tx");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(tp)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>("txn", 0, null, "c1"));
            producer.commitTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>("txn", 0, null, "a1"));
            producer.flush();
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>("txn", 0, null, "c2"));
            producer.sendOffsetsToTransaction(Map.of(new TopicPartition("idem", 1), new OffsetAndMetadata(77)),
                                              new ConsumerGroupMetadata("java-ctp"));
            producer.commitTransaction();
        }
        for (String isolation : List.of("read_committed", "read_uncommitted")) {
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps("java-ctp", isolation))) {
                consumer.assign(List.of(new TopicPartition("txn", 0)));
                consumer.seekToBeginning(consumer.assignment());
                List<String> values = new ArrayList<>();
                long end = System.currentTimeMillis() + 3_000;
                while (System.currentTimeMillis() < end)
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) values.add(r.value());
                System.out.println(isolation + "=" + String.join(",", values));
                if (isolation.equals("read_committed"))
                    System.out.println("txn.offset=" + consumer.committed(Set.of(new TopicPartition("idem", 1)))
                                                              .get(new TopicPartition("idem", 1)).offset());
            }
        }
        try (Admin admin = Admin.create(props())) {
            System.out.println("txn.state=" + admin.describeTransactions(List.of("java-tx")).all().get().get("java-tx").state());
            System.out.println("group.state=" + admin.describeConsumerGroups(List.of("java-ctp")).all().get().get("java-ctp").groupState());
        }
        System.out.println("done=true");
    }

    static Properties props() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return p;
    }

    static Properties producerProps() {
        Properties p = props();
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return p;
    }

    static Properties consumerProps(String group, String isolation) {
        Properties p = props();
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("isolation.level", isolation);
        return p;
    }
}
