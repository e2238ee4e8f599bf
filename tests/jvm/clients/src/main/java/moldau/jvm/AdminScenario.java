package moldau.jvm;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/**
 * Kafka's Admin client, one step after the other, one JSON line per step: {"step": name, "ok": true, ...}
 * with what the step read back, or {"step": name, "ok": false, "error": ...}. A step never stops the ones
 * after it. --topic: a new topic this scenario creates, changes and deletes; --data-topic: an existing topic
 * with records (offsets, DeleteRecords, DescribeProducers); --group: a consumer group with committed offsets
 * on --data-topic (listed, described, altered, deleted); --transactional-id: a producer that committed a
 * transaction to --data-topic; --rf: the replication factor of new topics; --user: a SCRAM user and quota
 * entity to create and remove.
 */
public final class AdminScenario {
    private final Admin admin;

    private AdminScenario(Admin admin) {
        this.admin = admin;
    }

    private void step(String name, Callable<Map<String, Object>> body) {
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        out.put("step", name);
        try {
            Map<String, Object> r = body.call();
            out.put("ok", true);
            out.putAll(r);
        } catch (Exception e) {
            out.put("ok", false);
            out.put("error", Cli.error(e));
        }
        StringBuilder sb = new StringBuilder();
        Cli.write(sb, out);
        System.out.println(sb);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        Cli cli = new Cli(args);
        String topic = cli.get("topic");
        String data = cli.get("data-topic");
        String group = cli.get("group");
        String txnId = cli.get("transactional-id");
        String user = cli.get("user", "alice");
        short rf = Short.parseShort(cli.get("rf", "1"));
        Properties p = cli.config();
        p.putIfAbsent("default.api.timeout.ms", "60000");
        try (Admin admin = Admin.create(p)) {
            new AdminScenario(admin).run(topic, data, group, txnId, user, rf);
        }
    }

    private void run(String topic, String data, String group, String txnId, String user, short rf) {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        TopicPartition data0 = new TopicPartition(data, 0);
        step("create_topics", () -> {
            admin.createTopics(List.of(new NewTopic(topic, 2, rf).configs(Map.of("retention.ms", "3600000"))))
                    .all().get();
            return Map.of();
        });
        step("list_topics", () -> Cli.obj("present", admin.listTopics().names().get().contains(topic)));
        step("describe_topics", () -> describe(topic));
        step("create_partitions", () -> {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
            return describe(topic);
        });
        step("describe_configs", () -> entry(admin.describeConfigs(List.of(res)).all().get().get(res), "retention.ms"));
        step("incremental_alter_configs", () -> {
            admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE))))
                    .all().get();
            Config c = admin.describeConfigs(List.of(res)).all().get().get(res);
            Map<String, Object> out = new HashMap<>();
            out.put("cleanup.policy", entry(c, "cleanup.policy"));
            out.put("retention.ms", entry(c, "retention.ms"));
            return out;
        });
        step("describe_cluster", () -> {
            DescribeClusterResult dc = admin.describeCluster();
            List<Integer> ids = new ArrayList<>();
            for (Node n : dc.nodes().get()) {
                ids.add(n.id());
            }
            ids.sort(null);
            Node controller = dc.controller().get();
            return Cli.obj("nodes", ids, "controller", controller == null ? null : controller.id(),
                    "cluster_id", dc.clusterId().get());
        });
        step("describe_broker_configs", () -> {
            int id = admin.describeCluster().nodes().get().iterator().next().id();
            ConfigResource b = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(id));
            Config c = admin.describeConfigs(List.of(b)).all().get().get(b);
            return Cli.obj("count", c.entries().size(), "num.partitions", entry(c, "num.partitions"));
        });
        step("describe_log_dirs", () -> {
            List<Integer> ids = new ArrayList<>();
            for (Node n : admin.describeCluster().nodes().get()) {
                ids.add(n.id());
            }
            Map<Integer, Map<String, LogDirDescription>> all = admin.describeLogDirs(ids).allDescriptions().get();
            Map<String, Object> replicas = new TreeMap<>();
            int dirs = 0;
            for (Map<String, LogDirDescription> byDir : all.values()) {
                for (LogDirDescription d : byDir.values()) {
                    dirs++;
                    d.replicaInfos().forEach((tp, info) -> {
                        if (tp.topic().equals(data)) {
                            replicas.merge(tp.toString(), info.size(), (a, b2) -> Math.max((Long) a, (Long) b2));
                        }
                    });
                }
            }
            return Cli.obj("brokers", all.size(), "dirs", dirs, "data_sizes", replicas);
        });
        step("list_offsets", () -> {
            ListOffsetsResult.ListOffsetsResultInfo e = admin.listOffsets(Map.of(data0, OffsetSpec.earliest()))
                    .all().get().get(data0);
            ListOffsetsResult.ListOffsetsResultInfo l = admin.listOffsets(Map.of(data0, OffsetSpec.latest()))
                    .all().get().get(data0);
            ListOffsetsResult.ListOffsetsResultInfo m = admin.listOffsets(Map.of(data0, OffsetSpec.maxTimestamp()))
                    .all().get().get(data0);
            return Cli.obj("earliest", e.offset(), "latest", l.offset(), "max_timestamp_offset", m.offset());
        });
        step("list_groups", () -> {
            List<String> ids = new ArrayList<>();
            for (GroupListing g : admin.listGroups().all().get()) {
                ids.add(g.groupId());
            }
            return Cli.obj("present", ids.contains(group));
        });
        step("describe_consumer_groups", () -> {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            return Cli.obj("state", d.groupState().toString(), "members", d.members().size(),
                    "type", d.type().toString());
        });
        step("list_consumer_group_offsets", () -> offsets(group, data));
        step("alter_consumer_group_offsets", () -> {
            admin.alterConsumerGroupOffsets(group, Map.of(data0, new OffsetAndMetadata(1, "java-admin"))).all().get();
            return offsets(group, data);
        });
        step("delete_consumer_group_offsets", () -> {
            admin.deleteConsumerGroupOffsets(group, Set.of(data0)).all().get();
            return offsets(group, data);
        });
        step("delete_records", () -> {
            long low = admin.deleteRecords(Map.of(data0, RecordsToDelete.beforeOffset(2))).lowWatermarks()
                    .get(data0).get().lowWatermark();
            long earliest = admin.listOffsets(Map.of(data0, OffsetSpec.earliest())).all().get().get(data0).offset();
            return Cli.obj("low_watermark", low, "earliest", earliest);
        });
        step("list_transactions", () -> {
            for (TransactionListing t : admin.listTransactions().all().get()) {
                if (t.transactionalId().equals(txnId)) {
                    return Cli.obj("present", true, "state", t.state().toString(), "producer_id", t.producerId());
                }
            }
            return Cli.obj("present", false);
        });
        step("describe_transactions", () -> transaction(txnId));
        step("describe_producers", () -> {
            List<Object> producers = new ArrayList<>();
            for (ProducerState s : admin.describeProducers(List.of(data0)).all().get().get(data0).activeProducers()) {
                producers.add(Cli.obj("producer_id", s.producerId(), "epoch", s.producerEpoch(),
                        "last_sequence", s.lastSequence()));
            }
            return Cli.obj("producers", producers);
        });
        step("fence_producers", () -> {
            admin.fenceProducers(List.of(txnId)).all().get();
            return transaction(txnId);
        });
        step("create_acls", () -> {
            admin.createAcls(List.of(acl(topic, user))).all().get();
            return await(() -> Cli.obj("bindings", admin.describeAcls(aclFilter(topic)).values().get().size()),
                    r -> (Integer) r.get("bindings") > 0);
        });
        step("delete_acls", () -> {
            Collection<AclBinding> gone = admin.deleteAcls(List.of(aclFilter(topic))).all().get();
            Map<String, Object> left = await(() -> Cli.obj("left",
                    admin.describeAcls(aclFilter(topic)).values().get().size()), r -> (Integer) r.get("left") == 0);
            return Cli.obj("deleted", gone.size(), "left", left.get("left"));
        });
        step("alter_scram_credentials", () -> {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "secret-" + user))).all().get();
            return await(() -> scram(user), r -> !((List<?>) r.get("credentials")).isEmpty());
        });
        step("delete_scram_credentials", () -> {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user,
                    ScramMechanism.SCRAM_SHA_256))).all().get();
            return await(() -> scram(user), r -> ((List<?>) r.get("credentials")).isEmpty());
        });
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user));
        ClientQuotaFilter qfilter = ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
        step("alter_client_quotas", () -> {
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
                    List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0))))).all().get();
            return await(() -> Cli.obj("quotas", admin.describeClientQuotas(qfilter).entities().get()
                    .getOrDefault(entity, Map.of())), r -> !((Map<?, ?>) r.get("quotas")).isEmpty());
        });
        step("remove_client_quotas", () -> {
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
                    List.of(new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get();
            return await(() -> Cli.obj("quotas", admin.describeClientQuotas(qfilter).entities().get()
                    .getOrDefault(entity, Map.of())), r -> ((Map<?, ?>) r.get("quotas")).isEmpty());
        });
        step("elect_leaders", () -> {
            Set<TopicPartition> parts = Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            Map<String, Object> out = new TreeMap<>();
            for (Map.Entry<TopicPartition, Optional<Throwable>> e
                    : admin.electLeaders(ElectionType.PREFERRED, parts).partitions().get().entrySet()) {
                Optional<Throwable> err = e.getValue();
                out.put(e.getKey().toString(), err.isEmpty() ? "elected"
                        : err.get() instanceof ElectionNotNeededException ? "not_needed" : Cli.error(err.get()));
            }
            return Cli.obj("partitions", out);
        });
        step("delete_consumer_groups", () -> {
            admin.deleteConsumerGroups(List.of(group)).all().get();
            List<String> ids = new ArrayList<>();
            for (GroupListing g : admin.listGroups().all().get()) {
                ids.add(g.groupId());
            }
            return Cli.obj("present", ids.contains(group));
        });
        step("delete_topics", () -> {
            admin.deleteTopics(List.of(topic)).all().get();
            long deadline = System.currentTimeMillis() + 30000;
            boolean present = true;
            while (present && System.currentTimeMillis() < deadline) {
                present = admin.listTopics().names().get().contains(topic);
                if (present) {
                    Thread.sleep(200);
                }
            }
            return Cli.obj("present", present);
        });
    }

    /**
     * Read until {@code done} holds or 15 s passed, then the last reading: on a cluster a change made
     * through one broker reaches the others a moment later (Kafka's own tests wait for it too).
     */
    private static Map<String, Object> await(Callable<Map<String, Object>> read,
                                             java.util.function.Predicate<Map<String, Object>> done)
            throws Exception {
        long deadline = System.currentTimeMillis() + 15000;
        Map<String, Object> last = read.call();
        while (!done.test(last) && System.currentTimeMillis() < deadline) {
            Thread.sleep(200);
            last = read.call();
        }
        return last;
    }

    private Map<String, Object> describe(String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        List<Object> parts = new ArrayList<>();
        for (TopicPartitionInfo pi : d.partitions()) {
            parts.add(Cli.obj("partition", pi.partition(), "leader", pi.leader() == null ? -1 : pi.leader().id(),
                    "replicas", pi.replicas().size(), "isr", pi.isr().size()));
        }
        return Cli.obj("partitions", parts, "topic_id", d.topicId().toString());
    }

    private static Map<String, Object> entry(Config c, String name) {
        ConfigEntry e = c.get(name);
        return e == null ? Cli.obj("value", null) : Cli.obj("value", e.value(), "source", e.source().toString());
    }

    private Map<String, Object> offsets(String group, String topic) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().forEach((tp, om) -> {
            if (tp.topic().equals(topic) && om != null) {
                out.put(Integer.toString(tp.partition()), om.offset());
            }
        });
        return Cli.obj("offsets", out);
    }

    private Map<String, Object> transaction(String txnId) throws Exception {
        TransactionDescription d = admin.describeTransactions(List.of(txnId)).all().get().get(txnId);
        return Cli.obj("state", d.state().toString(), "producer_id", d.producerId(), "epoch", d.producerEpoch(),
                "coordinator", d.coordinatorId());
    }

    private Map<String, Object> scram(String user) throws Exception {
        Map<String, UserScramCredentialsDescription> all = admin.describeUserScramCredentials().all().get();
        UserScramCredentialsDescription d = all.get(user);
        List<Object> creds = new ArrayList<>();
        if (d != null) {
            for (ScramCredentialInfo i : d.credentialInfos()) {
                creds.add(Cli.obj("mechanism", i.mechanism().toString(), "iterations", i.iterations()));
            }
        }
        return Cli.obj("credentials", creds);
    }

    private static AclBinding acl(String topic, String user) {
        return new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry("User:" + user, "*", AclOperation.READ, AclPermissionType.ALLOW));
    }

    private static AclBindingFilter aclFilter(String topic) {
        return new AclBindingFilter(new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL),
                AccessControlEntryFilter.ANY);
    }
}
