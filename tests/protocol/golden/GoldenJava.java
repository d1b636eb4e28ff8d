// Drives the Java Kafka client (admin, idempotent producer, group consumer) for record.py.
// Run: java -cp <kafka-clients and its dependency jars> GoldenJava.java <bootstrap>

import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class GoldenJava {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = "golden-java";
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            admin.describeTopics(List.of(topic)).allTopicNames().get();
            admin.listOffsets(Map.of(new TopicPartition(topic, 0), OffsetSpec.latest())).all().get();
        }
        Properties p = (Properties) common.clone();
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (Producer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(topic, "k" + i, "java-" + i)).get();
        }
        Properties c = (Properties) common.clone();
        c.put("group.id", "golden-java-group");
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        int got = 0;
        try (Consumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            while (got < 5 && System.currentTimeMillis() < deadline) got += consumer.poll(Duration.ofMillis(500)).count();
            if (got > 0) consumer.commitSync();
        }
        // Transactions and more admin calls: whatever the broker supports gets recorded.
        Properties t = (Properties) p.clone();
        t.put("transactional.id", "golden-java-tx");
        t.put("max.block.ms", "10000");
        try (Producer<String, String> producer = new KafkaProducer<>(t)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "tx", "in-transaction")).get();
            producer.commitTransaction();
        } catch (Exception e) {
            System.err.println("transactions: " + e);
        }
        try (Admin admin = Admin.create(common)) {
            admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, topic))).all().get();
            admin.listConsumerGroups().all().get();
            admin.describeConsumerGroups(List.of("golden-java-group")).all().get();
            admin.deleteTopics(List.of(topic)).all().get();
        } catch (Exception e) {
            System.err.println("admin: " + e);
        }
        System.out.println("consumed " + got);
    }
}
