import java.util.*;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.security.token.delegation.TokenInformation;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Delegation tokens through the Java Admin, then a producer and a consumer that log in with the
 * token (SCRAM, tokenauth=true); key=value facts for tests/security/test_delegation_tokens_java.py.
 * Arguments: SASL_PLAINTEXT bootstrap, user, password, topic. */
public class TokenCheck {
    static void print(String key, Object value) { System.out.println(key + "=" + value); }

    static String outcome(KafkaFuture<?> future) {
        try {
            future.get();
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    static Properties scram(String bootstrap, String user, String password, boolean token) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "SCRAM-SHA-256");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
              + user + "\" password=\"" + password + "\"" + (token ? " tokenauth=\"true\"" : "") + ";");
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "20000");
        return p;
    }

    static String produce(Properties props, String topic, int count) {
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("max.block.ms", "15000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++)
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
            return "ok";
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            return cause.getClass().getSimpleName();
        }
    }

    static String consume(Properties props, String topic) {
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("group.id", "token-check");
        props.put("auto.offset.reset", "earliest");
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 20000;
            while (values.size() < 5 && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500)))
                    values.add(r.value());
            consumer.commitSync();
        }
        return String.join(",", values);
    }

    /** describe(), after waiting up to 10 s for the token to be there (or gone): Kafka's brokers
     * learn of a change from the metadata log a moment after the controller answered. */
    static String awaitDescribe(Admin admin, String tokenId, boolean present) throws Exception {
        String seen = describe(admin, tokenId);
        for (long end = System.currentTimeMillis() + 10000;
             seen.equals("absent") == present && System.currentTimeMillis() < end; ) {
            Thread.sleep(100);
            seen = describe(admin, tokenId);
        }
        return seen;
    }

    static String describe(Admin admin, String tokenId) throws Exception {
        for (DelegationToken t : admin.describeDelegationToken().delegationTokens().get())
            if (t.tokenInfo().tokenId().equals(tokenId)) {
                TokenInformation info = t.tokenInfo();
                return "owner=" + info.owner() + " requester=" + info.tokenRequester() + " renewers=" + info.renewers();
            }
        return "absent";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], user = args[1], password = args[2], topic = args[3];
        try (Admin admin = Admin.create(scram(bootstrap, user, password, false))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            DelegationToken token = admin.createDelegationToken(new CreateDelegationTokenOptions()
                .renewers(List.of(new KafkaPrincipal("User", "renewer")))).delegationToken().get();
            TokenInformation info = token.tokenInfo();
            print("create.owner", info.owner());
            print("create.requester", info.tokenRequester());
            print("create.renewers", info.renewers());
            print("create.expiry_after_issue", info.expiryTimestamp() - info.issueTimestamp());
            print("create.max_after_issue", info.maxTimestamp() - info.issueTimestamp());
            print("create.hmac_bytes", token.hmac().length);
            print("describe.created", awaitDescribe(admin, info.tokenId(), true));

            long before = System.currentTimeMillis();
            long renewed = admin.renewDelegationToken(token.hmac(), new RenewDelegationTokenOptions()
                .renewTimePeriodMs(60000)).expiryTimestamp().get();
            print("renew.in_a_minute", Math.abs(renewed - before - 60000) < 10000);
            print("renew.unknown", outcome(admin.renewDelegationToken("nope".getBytes()).expiryTimestamp()));

            Properties asToken = scram(bootstrap, info.tokenId(), token.hmacAsBase64String(), true);
            print("token.produce", produce((Properties) asToken.clone(), topic, 5));
            print("token.consume", consume((Properties) asToken.clone(), topic));
            try (Admin tokenAdmin = Admin.create((Properties) asToken.clone())) {
                print("token.create_token", outcome(tokenAdmin.createDelegationToken().delegationToken()));
                print("token.describe_topic", outcome(tokenAdmin.describeTopics(List.of(topic)).allTopicNames()));
            }
            Properties wrong = scram(bootstrap, info.tokenId(), "d3Jvbmc=", true);
            print("token.wrong_hmac_produce", produce(wrong, topic, 1));

            print("expire.now", outcome(admin.expireDelegationToken(token.hmac(), new ExpireDelegationTokenOptions()
                .expiryTimePeriodMs(-1)).expiryTimestamp()));
            print("describe.expired", awaitDescribe(admin, info.tokenId(), false));
            print("token.after_expiry_produce", produce((Properties) asToken.clone(), topic, 1));
        }
    }
}
