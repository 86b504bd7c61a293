// Apache Kafka's Java clients against a broker: the producer, the consumer (classic and KIP-848) and the
// admin client, each run as a "tour" that prints one JSON object per line on stdout for the Python test
// (tests/ecosystem/test_java_clients.py) to check. One JVM runs one tour; the tour drives many calls.
//
//   java -cp <kafka libs> ClientTour <tour> <bootstrap> [args...]
//
// Every call's outcome is printed, never thrown: {"step": ..., "ok": true, ...} or
// {"step": ..., "ok": false, "error": "<exception class>", "message": "..."}, so one failing call does not
// hide the others. Nothing here is specific to pybroker: pointed at Apache Kafka it prints the same steps.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.*;
import org.apache.kafka.common.resource.*;
import org.apache.kafka.common.serialization.*;

public final class ClientTour {
    private static final long CALL_TIMEOUT_S = 30;

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: ClientTour <produce|transact|consume|admin> <bootstrap> [args...]");
            System.exit(2);
        }
        String tour = args[0];
        String bootstrap = args[1];
        String[] rest = Arrays.copyOfRange(args, 2, args.length);
        switch (tour) {
            case "produce" -> produce(bootstrap, rest);
            case "transact" -> transact(bootstrap, rest);
            case "consume" -> consume(bootstrap, rest);
            case "admin" -> admin(bootstrap, rest);
            default -> { System.err.println("unknown tour " + tour); System.exit(2); }
        }
        System.out.flush();
        System.exit(0);
    }

    // ---- output -----------------------------------------------------------------------------------

    static String quote(Object value) {
        String s = String.valueOf(value);
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        return out.append('"').toString();
    }

    /** One JSON line: step name, then key/value pairs (values are numbers, booleans or strings). */
    static void emit(String step, Object... pairs) {
        StringBuilder out = new StringBuilder("{\"step\":").append(quote(step));
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            out.append(',').append(quote(pairs[i])).append(':');
            Object v = pairs[i + 1];
            if (v instanceof Number || v instanceof Boolean) out.append(v);
            else if (v instanceof List<?> list) {
                out.append('[');
                for (int j = 0; j < list.size(); j++) {
                    if (j > 0) out.append(',');
                    Object item = list.get(j);
                    out.append(item instanceof Number ? item.toString() : quote(item));
                }
                out.append(']');
            } else out.append(quote(v));
        }
        System.out.println(out.append('}'));
        System.out.flush();
    }

    static Throwable cause(Throwable t) {
        // unwrap the futures' and this file's wrappers down to the client's own exception
        while (t.getCause() != null && (t instanceof ExecutionException || t.getClass() == RuntimeException.class
                || t.getClass() == KafkaException.class)) t = t.getCause();
        return t;
    }

    /** Run one call and print its outcome; the value's summary goes in "detail". */
    static Object step(String name, Supplier<Object> call) {
        try {
            Object value = call.get();
            emit(name, "ok", true, "detail", summary(value));
            return value;
        } catch (Throwable t) {
            Throwable c = cause(t);
            emit(name, "ok", false, "error", c.getClass().getSimpleName(), "message", String.valueOf(c.getMessage()));
            return null;
        }
    }

    static String summary(Object value) {
        String s = String.valueOf(value);
        return s.length() > 400 ? s.substring(0, 400) + "..." : s;
    }

    interface Call<T> { T run() throws Exception; }

    static <T> Supplier<Object> wait(Call<KafkaFuture<T>> call) {
        return () -> {
            try {
                return call.run().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        };
    }

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "java-client-tour");
        return p;
    }

    // ---- producer ---------------------------------------------------------------------------------

    /** produce <topic> <count>: an idempotent acks=all producer; prints each record's partition and offset. */
    static void produce(String bootstrap, String[] args) throws Exception {
        String topic = args[0];
        int count = Integer.parseInt(args[1]);
        Properties p = common(bootstrap);
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("compression.type", args.length > 2 ? args[2] : "none");
        try (Producer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> record = new ProducerRecord<>(topic, null, "k" + i, "v" + i);
                record.headers().add("n", Integer.toString(i).getBytes());
                sent.add(producer.send(record));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                try {
                    RecordMetadata md = sent.get(i).get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
                    emit("sent", "ok", true, "key", "k" + i, "partition", md.partition(), "offset", md.offset());
                } catch (Exception e) {
                    Throwable c = cause(e);
                    emit("sent", "ok", false, "key", "k" + i, "error", c.getClass().getSimpleName());
                }
            }
        }
    }

    /**
     * transact <topic> <transactional.id> <group>: commit 10 records with an offset commit in the
     * transaction, abort 5, commit 10 more; prints the outcome of each step.
     */
    static void transact(String bootstrap, String[] args) throws Exception {
        String topic = args[0];
        String txnId = args[1];
        String group = args[2];
        Properties p = common(bootstrap);
        p.put("transactional.id", txnId);
        p.put("acks", "all");
        p.put("transaction.timeout.ms", "30000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            step("init", () -> { producer.initTransactions(); return "initialized"; });
            for (String[] round : new String[][] {{"commit", "10", "a"}, {"abort", "5", "x"}, {"commit", "10", "b"}}) {
                String outcome = round[0];
                int n = Integer.parseInt(round[1]);
                step(outcome + "-" + round[2], () -> {
                    producer.beginTransaction();
                    List<Long> offsets = new ArrayList<>();
                    try {
                        for (int i = 0; i < n; i++) {
                            offsets.add(producer.send(new ProducerRecord<>(topic, 0, round[2] + i, round[2] + i)).get().offset());
                        }
                        if (outcome.equals("commit")) {
                            producer.sendOffsetsToTransaction(
                                Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(offsets.get(offsets.size() - 1) + 1)),
                                new ConsumerGroupMetadata(group, -1, "", Optional.empty()));
                            producer.commitTransaction();
                        } else {
                            producer.abortTransaction();
                        }
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                    return offsets;
                });
            }
            // a second producer with the same transactional.id fences the first
            try (KafkaProducer<String, String> second = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                step("fence-init", () -> { second.initTransactions(); return "initialized"; });
                step("fenced-begin", () -> {
                    producer.beginTransaction();
                    try {
                        producer.send(new ProducerRecord<>(topic, 0, "z", "z")).get();
                        producer.commitTransaction();
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                    return "not fenced";
                });
            }
        }
    }

    // ---- consumer ---------------------------------------------------------------------------------

    /**
     * consume <topic|regex:PATTERN> <group> <classic|consumer> <expected> <isolation> [instance.id]: poll until
     * `expected` records arrived (or 60 s), commit, print the count, the partitions assigned and the group's
     * protocol as the client saw it.
     */
    static void consume(String bootstrap, String[] args) throws Exception {
        String what = args[0];
        String group = args[1];
        String protocol = args[2];
        int expected = Integer.parseInt(args[3]);
        String isolation = args[4];
        Properties p = common(bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("isolation.level", isolation);
        if (args.length > 5) p.put("group.instance.id", args[5]);
        if (protocol.equals("classic")) p.put("session.timeout.ms", "10000");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            if (what.startsWith("regex:")) {
                String pattern = what.substring("regex:".length());
                if (protocol.equals("consumer")) consumer.subscribe(new SubscriptionPattern(pattern));
                else consumer.subscribe(Pattern.compile(pattern));
            } else {
                consumer.subscribe(List.of(what));
            }
            int got = 0;
            List<String> keys = new ArrayList<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            // until the expected records came, and at least until the group assigned this member something
            while ((got < expected || consumer.assignment().isEmpty()) && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    got++;
                    keys.add(r.key());
                }
            }
            step("commit", () -> { consumer.commitSync(Duration.ofSeconds(CALL_TIMEOUT_S)); return "committed"; });
            List<String> assigned = new ArrayList<>();
            for (TopicPartition tp : consumer.assignment()) assigned.add(tp.toString());
            Collections.sort(assigned);
            emit("consumed", "ok", got >= expected, "count", got, "keys", keys, "assigned", assigned,
                 "member", String.valueOf(consumer.groupMetadata().memberId()),
                 "generation", consumer.groupMetadata().generationId());
        }
    }

    // ---- admin ------------------------------------------------------------------------------------

    /** admin <topic>: every admin call a Kafka user makes, on a topic of the test's own. */
    static void admin(String bootstrap, String[] args) throws Exception {
        String topic = args[0];
        String group = topic + "-group";
        TopicPartition tp0 = new TopicPartition(topic, 0);
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = Admin.create(common(bootstrap))) {
            step("describeCluster", () -> {
                DescribeClusterResult r = admin.describeCluster();
                try {
                    return r.clusterId().get() + " nodes=" + r.nodes().get().size() + " controller=" + r.controller().get();
                } catch (Exception e) { throw new RuntimeException(e); }
            });
            step("describeFeatures", wait(() -> admin.describeFeatures().featureMetadata()));
            step("createTopics", wait(() -> admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1)
                .configs(Map.of("retention.ms", "86400000")))).all()));
            step("createTopics-exists", wait(() -> admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all()));
            step("createTopics-validateOnly", wait(() -> admin.createTopics(List.of(new NewTopic(topic + "-v", 1, (short) 1)),
                new CreateTopicsOptions().validateOnly(true)).all()));
            step("listTopics", wait(() -> admin.listTopics().names()));
            step("describeTopics", wait(() -> admin.describeTopics(List.of(topic)).allTopicNames()));
            step("describeTopics-unknown", wait(() -> admin.describeTopics(List.of(topic + "-missing")).allTopicNames()));
            step("createPartitions", wait(() -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all()));
            step("describeConfigs-topic", wait(() -> admin.describeConfigs(List.of(topicResource)).all()));
            step("describeConfigs-broker", wait(() -> admin.describeConfigs(
                List.of(new ConfigResource(ConfigResource.Type.BROKER, "1"))).all()));
            step("incrementalAlterConfigs", wait(() -> admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET)))).all()));
            step("incrementalAlterConfigs-invalid", wait(() -> admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "abc"), AlterConfigOp.OpType.SET)))).all()));

            Properties pp = common(bootstrap);
            pp.put("acks", "all");
            try (Producer<String, String> producer = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
                step("produce", () -> {
                    try {
                        for (int i = 0; i < 20; i++) producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get();
                    } catch (Exception e) { throw new RuntimeException(e); }
                    return 20;
                });
            }
            step("listOffsets-latest", wait(() -> admin.listOffsets(Map.of(tp0, OffsetSpec.latest())).all()));
            step("listOffsets-earliest", wait(() -> admin.listOffsets(Map.of(tp0, OffsetSpec.earliest())).all()));
            step("listOffsets-maxTimestamp", wait(() -> admin.listOffsets(Map.of(tp0, OffsetSpec.maxTimestamp())).all()));
            step("deleteRecords", wait(() -> admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(5))).all()));
            step("listOffsets-afterDelete", wait(() -> admin.listOffsets(Map.of(tp0, OffsetSpec.earliest())).all()));
            step("describeProducers", wait(() -> admin.describeProducers(List.of(tp0)).all()));
            step("describeLogDirs", wait(() -> admin.describeLogDirs(List.of(1)).allDescriptions()));
            step("describeReplicaLogDirs", wait(() -> admin.describeReplicaLogDirs(
                List.of(new TopicPartitionReplica(topic, 0, 1))).all()));
            step("electLeaders", wait(() -> admin.electLeaders(ElectionType.PREFERRED, Set.of(tp0)).partitions()));
            step("listPartitionReassignments", wait(() -> admin.listPartitionReassignments().reassignments()));
            step("describeMetadataQuorum", wait(() -> admin.describeMetadataQuorum().quorumInfo()));

            step("alterConsumerGroupOffsets", wait(() -> admin.alterConsumerGroupOffsets(group,
                Map.of(tp0, new OffsetAndMetadata(7, "meta"))).all()));
            step("listConsumerGroupOffsets", wait(() -> admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()));
            step("listGroups", wait(() -> admin.listGroups().all()));
            step("describeConsumerGroups", wait(() -> admin.describeConsumerGroups(List.of(group)).all()));
            step("describeClassicGroups", wait(() -> admin.describeClassicGroups(List.of(group)).all()));
            step("deleteConsumerGroupOffsets", wait(() -> admin.deleteConsumerGroupOffsets(group, Set.of(tp0)).all()));
            step("deleteConsumerGroups", wait(() -> admin.deleteConsumerGroups(List.of(group)).all()));
            step("deleteConsumerGroups-unknown", wait(() -> admin.deleteConsumerGroups(List.of(group + "-missing")).all()));

            step("listTransactions", wait(() -> admin.listTransactions().all()));
            step("describeTransactions-unknown", wait(() -> admin.describeTransactions(List.of(topic + "-txn")).all()));
            step("fenceProducers", wait(() -> admin.fenceProducers(List.of(topic + "-fence")).all()));

            step("describeAcls", wait(() -> admin.describeAcls(AclBindingFilter.ANY).values()));
            step("createAcls", wait(() -> admin.createAcls(List.of(new AclBinding(
                new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)))).all()));
            step("deleteAcls", wait(() -> admin.deleteAcls(List.of(AclBindingFilter.ANY)).all()));

            step("describeUserScramCredentials", wait(() -> admin.describeUserScramCredentials().all()));
            step("alterUserScramCredentials", wait(() -> admin.alterUserScramCredentials(List.of(
                new UserScramCredentialUpsertion("tour-user", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                    "tour-secret"))).all()));
            step("describeUserScramCredentials-after", wait(() -> admin.describeUserScramCredentials(List.of("tour-user")).all()));
            step("alterUserScramCredentials-delete", wait(() -> admin.alterUserScramCredentials(List.of(
                new UserScramCredentialDeletion("tour-user", ScramMechanism.SCRAM_SHA_256))).all()));

            ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, topic + "-client"));
            step("alterClientQuotas", wait(() -> admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
                List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0))))).all()));
            step("describeClientQuotas", wait(() -> admin.describeClientQuotas(ClientQuotaFilter.all()).entities()));

            step("deleteTopics", wait(() -> admin.deleteTopics(List.of(topic)).all()));
            step("deleteTopics-unknown", wait(() -> admin.deleteTopics(List.of(topic + "-missing")).all()));
        }
    }
}
