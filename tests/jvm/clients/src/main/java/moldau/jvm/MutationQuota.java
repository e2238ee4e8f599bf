package moldau.jvm;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

/**
 * KIP-599 as Kafka's Java Admin client meets it: sets controller_mutation_rate=--quota on its own client id
 * (AlterClientQuotas, then waits until DescribeClientQuotas shows it), creates one topic per request,
 * --partitions (comma-separated
 * counts) named --prefix-0, --prefix-1 ..., with retryOnQuotaViolation(false), and prints per topic a
 * "create" line (ok, or the error and the throttle time of a ThrottlingQuotaExceededException); then one more
 * topic (--prefix-retried, 1 partition) with the client's default retries, and a "retried" line with the
 * milliseconds it took.
 */
public final class MutationQuota {
    public static void main(String[] args) throws Exception {
        Cli cli = new Cli(args);
        String prefix = cli.get("prefix");
        Properties p = cli.config();
        p.put("client.id", cli.get("client-id"));
        try (Admin admin = Admin.create(p)) {
            String clientId = cli.get("client-id");
            ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, clientId));
            double quota = Double.parseDouble(cli.get("quota"));
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("controller_mutation_rate", quota))))).all().get();
            ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, clientId)));
            for (int tries = 0; tries < 100; tries++) {
                Map<String, Double> seen = admin.describeClientQuotas(filter).entities().get().get(entity);
                if (seen != null && Double.valueOf(quota).equals(seen.get("controller_mutation_rate"))) {
                    break;
                }
                Thread.sleep(100);
            }
            Thread.sleep(1000);  // a Kafka broker applies a quota change shortly after it is described
            int i = 0;
            for (String count : cli.get("partitions").split(",")) {
                String name = prefix + "-" + i++;
                NewTopic t = new NewTopic(name, Integer.parseInt(count), (short) 1);
                try {
                    admin.createTopics(List.of(t), new CreateTopicsOptions().retryOnQuotaViolation(false))
                        .all().get();
                    Cli.emit("step", "create", "topic", name, "ok", true);
                } catch (ExecutionException e) {
                    Throwable c = e.getCause();
                    int throttle = c instanceof ThrottlingQuotaExceededException q ? q.throttleTimeMs() : -1;
                    Cli.emit("step", "create", "topic", name, "ok", false, "error", Cli.error(e),
                             "throttle_time_ms", throttle);
                }
            }
            long t0 = System.nanoTime();
            String name = prefix + "-retried";
            try {
                admin.createTopics(List.of(new NewTopic(name, 1, (short) 1))).all().get();
                long ms = (System.nanoTime() - t0) / 1000000;
                Cli.emit("step", "retried", "topic", name, "ok", true, "ms", ms);
            } catch (ExecutionException e) {
                Cli.emit("step", "retried", "topic", name, "ok", false, "error", Cli.error(e));
            }
        }
    }
}
