import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.KafkaFuture;

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

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("request.timeout.ms", "20000");
        props.put("default.api.timeout.ms", "40000");
        try (Admin admin = Admin.create(props)) {
            switch (args[1]) {
                case "features": features(admin); break;
                case "describe_features": describeFeatures(admin, "described"); break;
                case "restore_features":
                    print("restored", update(admin, "metadata.version", 21, FeatureUpdate.UpgradeType.UPGRADE, false));
                    break;
                default: throw new IllegalArgumentException(args[1]);
            }
        }
        print("done", true);
    }
}
