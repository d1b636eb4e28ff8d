// The Java client's side of the compatibility matrix: one JVM per kafka-clients version serves a whole
// pytest session. It reads one JSON command per line on stdin, runs it with the stock Kafka client and
// writes one JSON answer per line on stdout: {"ok": true, "result": ...} or {"ok": false, "error": ...}.
// Record keys, values and header values travel base64-encoded (null stays null). The Python side
// (clients/java.py) makes the assertions; this file only drives the client and reports what came back.
// Compiles against kafka-clients 3.9 and 4.x alike: only API present in both is used.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class Driver {
    private static final long API_TIMEOUT_MS = 30_000;
    private static String bootstrap;
    // extra client properties for every client (security.protocol, ssl.*, sasl.*): args[1], a file
    private static final Properties clientProperties = new Properties();
    private static Admin admin;
    private static final Map<String, GroupMember> members = new HashMap<>();
    private static int nextHandle = 1;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        if (args.length > 1)
            try (java.io.Reader r = new java.io.FileReader(args[1], StandardCharsets.UTF_8)) { clientProperties.load(r); }
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(new PrintStream(System.err, true, "UTF-8"));  // client chatter must not corrupt answers
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            Map<String, Object> answer = new LinkedHashMap<>();
            try {
                Map<String, Object> cmd = Json.object(Json.parse(line));
                answer.put("result", run(cmd));
                answer.put("ok", true);
            } catch (Throwable e) {
                Throwable cause = (e instanceof ExecutionException && e.getCause() != null) ? e.getCause() : e;
                answer.put("ok", false);
                answer.put("error_type", cause.getClass().getSimpleName());
                answer.put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
            }
            out.println(Json.write(answer));
        }
        for (GroupMember m : members.values()) m.consumer.close(Duration.ofSeconds(5));
        if (admin != null) admin.close(Duration.ofSeconds(5));
    }

    private static Object run(Map<String, Object> cmd) throws Exception {
        String op = (String) cmd.get("op");
        switch (op) {
            case "metadata": return metadata();
            case "create_topic": return createTopic(cmd);
            case "describe_topic": return describeTopic((String) cmd.get("topic"));
            case "describe_configs": return describeConfigs((String) cmd.get("topic"));
            case "create_partitions":
                admin().createPartitions(Map.of((String) cmd.get("topic"),
                        NewPartitions.increaseTo(Json.integer(cmd.get("total"))))).all().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                return null;
            case "delete_topic":
                admin().deleteTopics(List.of((String) cmd.get("topic"))).all().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                return null;
            case "produce": return produce(cmd);
            case "consume": return consume(cmd);
            case "offsets_for_times": return offsetsForTimes(cmd);
            case "list_offsets": return listOffsets(cmd);
            case "commit": return commit(cmd);
            case "committed": return committed(cmd);
            case "group_offsets": return groupOffsets((String) cmd.get("group"));
            case "group_open": return groupOpen(cmd);
            case "group_poll": return members.get((String) cmd.get("handle")).poll(Json.integer(cmd.get("timeout_ms")));
            case "group_commit": members.get((String) cmd.get("handle")).consumer.commitSync(Duration.ofMillis(API_TIMEOUT_MS)); return null;
            case "group_close": members.remove((String) cmd.get("handle")).consumer.close(Duration.ofSeconds(10)); return null;
            case "txn_produce": return txnProduce(cmd);
            case "txn_open": return txnOpen(cmd);
            case "txn_close": return txnClose(cmd);
            case "consume_transform_produce": return consumeTransformProduce(cmd);
            default: throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // ---- admin ----

    private static Admin admin() {
        if (admin == null) {
            Properties p = new Properties();
            p.putAll(clientProperties);
            p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) API_TIMEOUT_MS);
            admin = Admin.create(p);
        }
        return admin;
    }

    private static Object metadata() throws Exception {
        DescribeClusterResult cluster = admin().describeCluster();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("cluster_id", cluster.clusterId().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS));
        Node controller = cluster.controller().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        r.put("controller_id", controller == null ? null : controller.id());
        List<Object> brokers = new ArrayList<>();
        for (Node n : cluster.nodes().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS))
            brokers.add(Map.of("id", n.id(), "host", n.host(), "port", n.port()));
        r.put("brokers", brokers);
        r.put("topics", new ArrayList<>(admin().listTopics().names().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS)));
        return r;
    }

    private static Object createTopic(Map<String, Object> cmd) throws Exception {
        NewTopic t = new NewTopic((String) cmd.get("topic"), Json.integer(cmd.get("partitions")), (short) 1);
        Map<String, String> configs = new HashMap<>();
        for (Map.Entry<String, Object> e : Json.object(cmd.getOrDefault("configs", Map.of())).entrySet())
            configs.put(e.getKey(), String.valueOf(e.getValue()));
        t.configs(configs);
        admin().createTopics(List.of(t)).all().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        return null;
    }

    private static Object describeTopic(String topic) throws Exception {
        TopicDescription d = admin().describeTopics(List.of(topic)).allTopicNames()
                .get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topic);
        List<Object> parts = new ArrayList<>();
        for (TopicPartitionInfo p : d.partitions())
            parts.add(Map.of("partition", p.partition(), "leader", p.leader() == null ? -1 : p.leader().id()));
        return Map.of("name", d.name(), "partitions", parts);
    }

    private static Object describeConfigs(String topic) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = admin().describeConfigs(List.of(res)).all().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(res);
        Map<String, Object> r = new TreeMap<>();
        for (ConfigEntry e : config.entries()) r.put(e.name(), e.value());
        return r;
    }

    // ---- produce / consume ----

    private static Properties props(Map<String, Object> cmd, String key) {
        Properties p = new Properties();
        p.putAll(clientProperties);
        for (Map.Entry<String, Object> e : Json.object(cmd.getOrDefault(key, Map.of())).entrySet())
            p.put(e.getKey(), String.valueOf(e.getValue()));
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return p;
    }

    private static KafkaProducer<byte[], byte[]> producer(Properties p) {
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    private static KafkaConsumer<byte[], byte[]> consumer(Properties p) {
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    private static ProducerRecord<byte[], byte[]> toRecord(String topic, Map<String, Object> r) {
        List<Header> headers = new ArrayList<>();
        for (Object h : Json.array(r.getOrDefault("headers", List.of()))) {
            List<Object> kv = Json.array(h);
            headers.add(new RecordHeader((String) kv.get(0), Json.bytes(kv.get(1))));
        }
        Integer partition = r.get("partition") == null ? null : Json.integer(r.get("partition"));
        Long timestamp = r.get("timestamp") == null ? null : ((Number) r.get("timestamp")).longValue();
        return new ProducerRecord<>(topic, partition, timestamp, Json.bytes(r.get("key")), Json.bytes(r.get("value")), headers);
    }

    private static Object produce(Map<String, Object> cmd) throws Exception {
        String topic = (String) cmd.get("topic");
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        List<Object> results = new ArrayList<>();
        Map<String, Object> metricsOut = null;
        try (KafkaProducer<byte[], byte[]> producer = producer(props(cmd, "config"))) {
            for (Object r : Json.array(cmd.get("records"))) {
                try {
                    futures.add(producer.send(toRecord(topic, Json.object(r))));
                } catch (KafkaException e) {  // e.g. RecordTooLargeException raised before sending
                    futures.add(java.util.concurrent.CompletableFuture.failedFuture(e));
                }
            }
            producer.flush();
            if (cmd.get("metrics") != null) metricsOut = clientMetrics(producer.metrics(), cmd.get("metrics"));
            for (Future<RecordMetadata> f : futures) {
                Map<String, Object> res = new LinkedHashMap<>();
                try {
                    RecordMetadata md = f.get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    res.put("partition", md.partition());
                    res.put("offset", md.hasOffset() ? md.offset() : null);
                } catch (ExecutionException e) {
                    res.put("error", e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
                }
                results.add(res);
            }
        }
        // With "metrics": [names], the client's own metrics come back too (e.g. produce-throttle-time-max).
        return metricsOut == null ? results : Map.of("results", results, "metrics", metricsOut);
    }

    private static Map<String, Object> clientMetrics(Map<MetricName, ? extends Metric> metrics, Object names) {
        Set<Object> wanted = new HashSet<>(Json.array(names));
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            MetricName name = e.getKey();
            // client-wide values only: per-node/per-topic metrics carry more tags than client-id
            if (wanted.contains(name.name()) && name.tags().keySet().equals(Set.of("client-id")))
                out.put(name.name(), e.getValue().metricValue());
        }
        return out;
    }

    private static List<TopicPartition> partitionsOf(KafkaConsumer<?, ?> c, String topic, Map<String, Object> cmd) {
        List<TopicPartition> tps = new ArrayList<>();
        if (cmd.get("partitions") != null) {
            for (Object p : Json.array(cmd.get("partitions"))) tps.add(new TopicPartition(topic, Json.integer(p)));
        } else {
            for (PartitionInfo p : c.partitionsFor(topic, Duration.ofMillis(API_TIMEOUT_MS)))
                tps.add(new TopicPartition(topic, p.partition()));
        }
        tps.sort(Comparator.comparingInt(TopicPartition::partition));
        return tps;
    }

    private static Map<String, Object> recordJson(ConsumerRecord<byte[], byte[]> r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("partition", r.partition());
        m.put("offset", r.offset());
        m.put("timestamp", r.timestamp());
        m.put("key", Json.b64(r.key()));
        m.put("value", Json.b64(r.value()));
        List<Object> headers = new ArrayList<>();
        for (Header h : r.headers()) headers.add(Arrays.asList(h.key(), Json.b64(h.value())));
        m.put("headers", headers);
        return m;
    }

    /** Reads from the given start positions up to the end offsets seen at the start (bounded by timeout_ms). */
    private static Object consume(Map<String, Object> cmd) throws Exception {
        String topic = (String) cmd.get("topic");
        Properties p = props(cmd, "config");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        long deadline = System.currentTimeMillis() + Json.integer(cmd.getOrDefault("timeout_ms", 30000));
        List<Object> records = new ArrayList<>();
        Map<String, Object> ends = new TreeMap<>();
        Map<String, Object> metricsOut = null;
        try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
            List<TopicPartition> tps = partitionsOf(c, topic, cmd);
            c.assign(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofMillis(API_TIMEOUT_MS));
            Object start = cmd.getOrDefault("start", "earliest");
            if (start.equals("earliest")) c.seekToBeginning(tps);
            else for (TopicPartition tp : tps) c.seek(tp, ((Number) Json.object(start).get(String.valueOf(tp.partition()))).longValue());
            for (TopicPartition tp : tps) ends.put(String.valueOf(tp.partition()), end.get(tp));
            while (System.currentTimeMillis() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) if (c.position(tp, Duration.ofMillis(API_TIMEOUT_MS)) < end.get(tp)) done = false;
                if (done) break;
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    if (r.offset() < end.get(new TopicPartition(topic, r.partition()))) records.add(recordJson(r));
                }
            }
            if (cmd.get("metrics") != null) metricsOut = clientMetrics(c.metrics(), cmd.get("metrics"));
        }
        if (metricsOut != null) return Map.of("records", records, "end_offsets", ends, "metrics", metricsOut);
        return Map.of("records", records, "end_offsets", ends);
    }

    private static Object offsetsForTimes(Map<String, Object> cmd) throws Exception {
        TopicPartition tp = new TopicPartition((String) cmd.get("topic"), Json.integer(cmd.get("partition")));
        List<Object> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(props(cmd, "config"))) {
            for (Object ts : Json.array(cmd.get("timestamps"))) {
                Map<TopicPartition, OffsetAndTimestamp> r = c.offsetsForTimes(
                        Map.of(tp, ((Number) ts).longValue()), Duration.ofMillis(API_TIMEOUT_MS));
                OffsetAndTimestamp o = r.get(tp);
                out.add(o == null ? null : o.offset());
            }
        }
        return out;
    }

    private static Object listOffsets(Map<String, Object> cmd) throws Exception {
        String topic = (String) cmd.get("topic");
        Map<String, Object> r = new LinkedHashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(props(cmd, "config"))) {
            List<TopicPartition> tps = partitionsOf(c, topic, cmd);
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps, Duration.ofMillis(API_TIMEOUT_MS));
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofMillis(API_TIMEOUT_MS));
            for (TopicPartition tp : tps)
                r.put(String.valueOf(tp.partition()), Arrays.asList(begin.get(tp), end.get(tp)));
        }
        return r;
    }

    private static Object commit(Map<String, Object> cmd) throws Exception {
        String topic = (String) cmd.get("topic");
        Properties p = props(cmd, "config");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, cmd.get("group"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (Map.Entry<String, Object> e : Json.object(cmd.get("offsets")).entrySet()) {
            List<Object> om = Json.array(e.getValue());
            offsets.put(new TopicPartition(topic, Integer.parseInt(e.getKey())),
                    new OffsetAndMetadata(((Number) om.get(0)).longValue(), (String) om.get(1)));
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
            c.commitSync(offsets, Duration.ofMillis(API_TIMEOUT_MS));
        }
        return null;
    }

    private static Object committed(Map<String, Object> cmd) throws Exception {
        String topic = (String) cmd.get("topic");
        Properties p = props(cmd, "config");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, cmd.get("group"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        Map<String, Object> r = new TreeMap<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
            Set<TopicPartition> tps = new HashSet<>(partitionsOf(c, topic, cmd));
            Map<TopicPartition, OffsetAndMetadata> got = c.committed(tps, Duration.ofMillis(API_TIMEOUT_MS));
            for (TopicPartition tp : tps) {
                OffsetAndMetadata om = got.get(tp);
                r.put(String.valueOf(tp.partition()), om == null ? null : Arrays.asList(om.offset(), om.metadata()));
            }
        }
        return r;
    }

    /** All of a group's committed offsets through the admin client (OffsetFetch without a topic list). */
    private static Object groupOffsets(String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> got = admin().listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        List<Object> out = new ArrayList<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : got.entrySet())
            if (e.getValue() != null)
                out.add(Arrays.asList(e.getKey().topic(), e.getKey().partition(), e.getValue().offset()));
        return out;
    }

    // ---- consumer groups ----

    private static final class GroupMember implements ConsumerRebalanceListener {
        final KafkaConsumer<byte[], byte[]> consumer;
        int assignedEvents, revokedEvents;

        GroupMember(Properties p, String topic) {
            consumer = consumer(p);
            consumer.subscribe(List.of(topic), this);
        }

        @Override public void onPartitionsAssigned(Collection<TopicPartition> partitions) { assignedEvents++; }
        @Override public void onPartitionsRevoked(Collection<TopicPartition> partitions) { if (!partitions.isEmpty()) revokedEvents++; }

        Object poll(int timeoutMs) {
            List<Object> records = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(timeoutMs))) records.add(recordJson(r));
            List<Integer> assignment = new ArrayList<>();
            for (TopicPartition tp : consumer.assignment()) assignment.add(tp.partition());
            Collections.sort(assignment);
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("records", records);
            r.put("assignment", assignment);
            r.put("assigned_events", assignedEvents);
            r.put("revoked_events", revokedEvents);
            return r;
        }
    }

    private static Object groupOpen(Map<String, Object> cmd) {
        Properties p = props(cmd, "config");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, cmd.get("group"));
        p.putIfAbsent(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        String handle = "m" + nextHandle++;
        members.put(handle, new GroupMember(p, (String) cmd.get("topic")));
        return handle;
    }

    // ---- transactions ----

    private static Object txnProduce(Map<String, Object> cmd) throws Exception {
        String topic = (String) cmd.get("topic");
        Properties p = props(cmd, "config");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, cmd.get("transactional_id"));
        try (KafkaProducer<byte[], byte[]> producer = producer(p)) {
            producer.initTransactions();
            for (Object b : Json.array(cmd.get("batches"))) {
                Map<String, Object> batch = Json.object(b);
                producer.beginTransaction();
                for (Object r : Json.array(batch.get("records"))) producer.send(toRecord(topic, Json.object(r)));
                producer.flush();
                if (Boolean.TRUE.equals(batch.get("commit"))) producer.commitTransaction();
                else producer.abortTransaction();
            }
        }
        return null;
    }

    private static final Map<String, KafkaProducer<byte[], byte[]>> openTransactions = new HashMap<>();

    /** Begins a transaction, sends the records and flushes them, and leaves the transaction open. */
    private static Object txnOpen(Map<String, Object> cmd) {
        String topic = (String) cmd.get("topic");
        Properties p = props(cmd, "config");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, cmd.get("transactional_id"));
        KafkaProducer<byte[], byte[]> producer = producer(p);
        producer.initTransactions();
        producer.beginTransaction();
        for (Object r : Json.array(cmd.get("records"))) producer.send(toRecord(topic, Json.object(r)));
        producer.flush();
        String handle = "t" + nextHandle++;
        openTransactions.put(handle, producer);
        return handle;
    }

    private static Object txnClose(Map<String, Object> cmd) {
        try (KafkaProducer<byte[], byte[]> producer = openTransactions.remove((String) cmd.get("handle"))) {
            if (Boolean.TRUE.equals(cmd.get("commit"))) producer.commitTransaction();
            else producer.abortTransaction();
        }
        return null;
    }

    /** Reads `count` committed records of in_topic as group `group`, writes them upper-cased to out_topic
     *  and commits the consumed offsets inside the same transaction. */
    private static Object consumeTransformProduce(Map<String, Object> cmd) throws Exception {
        String in = (String) cmd.get("in_topic"), out = (String) cmd.get("out_topic");
        int count = Json.integer(cmd.get("count"));
        Properties cp = props(cmd, "consumer_config");
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, cmd.get("group"));
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        Properties pp = props(cmd, "config");
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, cmd.get("transactional_id"));
        long deadline = System.currentTimeMillis() + Json.integer(cmd.getOrDefault("timeout_ms", 30000));
        int done = 0;
        try (KafkaConsumer<byte[], byte[]> c = consumer(cp); KafkaProducer<byte[], byte[]> producer = producer(pp)) {
            producer.initTransactions();
            c.subscribe(List.of(in));
            while (done < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> polled = c.poll(Duration.ofMillis(200));
                if (polled.isEmpty()) continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : polled) {
                    byte[] v = r.value() == null ? null : new String(r.value(), StandardCharsets.UTF_8).toUpperCase(Locale.ROOT).getBytes(StandardCharsets.UTF_8);
                    producer.send(new ProducerRecord<>(out, r.key(), v));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    done++;
                }
                producer.sendOffsetsToTransaction(offsets, c.groupMetadata());
                producer.commitTransaction();
            }
        }
        return done;
    }

    // ---- a minimal JSON reader/writer (no dependencies beyond the client jars) ----

    static final class Json {
        private final String s;
        private int i;
        private Json(String s) { this.s = s; }

        static Object parse(String text) { Json j = new Json(text); Object v = j.value(); return v; }
        @SuppressWarnings("unchecked") static Map<String, Object> object(Object o) { return (Map<String, Object>) o; }
        @SuppressWarnings("unchecked") static List<Object> array(Object o) { return (List<Object>) o; }
        static int integer(Object o) { return ((Number) o).intValue(); }
        static byte[] bytes(Object o) { return o == null ? null : Base64.getDecoder().decode((String) o); }
        static String b64(byte[] b) { return b == null ? null : Base64.getEncoder().encodeToString(b); }

        private void ws() { while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++; }

        private Object value() {
            ws();
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++; ws();
                if (s.charAt(i) == '}') { i++; return m; }
                while (true) {
                    ws(); String k = string(); ws(); i++;  // ':'
                    m.put(k, value()); ws();
                    if (s.charAt(i++) == '}') return m;
                }
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++; ws();
                if (s.charAt(i) == ']') { i++; return l; }
                while (true) {
                    l.add(value()); ws();
                    if (s.charAt(i++) == ']') return l;
                }
            }
            if (c == '"') return string();
            if (s.startsWith("null", i)) { i += 4; return null; }
            if (s.startsWith("true", i)) { i += 4; return true; }
            if (s.startsWith("false", i)) { i += 5; return false; }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            String num = s.substring(start, i);
            if (num.contains(".") || num.contains("e") || num.contains("E")) return Double.parseDouble(num);
            return Long.parseLong(num);
        }

        private String string() {
            StringBuilder b = new StringBuilder();
            i++;  // opening quote
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') return b.toString();
                if (c != '\\') { b.append(c); continue; }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: b.append(e);
                }
            }
        }

        static String write(Object o) {
            StringBuilder b = new StringBuilder();
            write(b, o);
            return b.toString();
        }

        private static void write(StringBuilder b, Object o) {
            if (o == null) b.append("null");
            else if (o instanceof String) quote(b, (String) o);
            else if (o instanceof Number || o instanceof Boolean) b.append(o);
            else if (o instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                    if (!first) b.append(',');
                    first = false;
                    quote(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (o instanceof Collection) {
                b.append('[');
                boolean first = true;
                for (Object e : (Collection<?>) o) {
                    if (!first) b.append(',');
                    first = false;
                    write(b, e);
                }
                b.append(']');
            } else quote(b, o.toString());
        }

        private static void quote(StringBuilder b, String s) {
            b.append('"');
            for (char c : s.toCharArray()) {
                if (c == '"' || c == '\\') b.append('\\').append(c);
                else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                else b.append(c);
            }
            b.append('"');
        }
    }
}
