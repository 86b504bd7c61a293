// Apache Kafka's share consumer (KIP-932, KafkaShareConsumer) against a broker, run as tours that print one
// JSON object per line on stdout for the Python test (tests/ecosystem/test_java_share_consumer.py).
//
//   java -cp <kafka libs>:<ClientTour's classes> ShareTour <tour> <bootstrap> <topic> <group> [args...]
//
// Tours:
//   configure <topic> <group>                   the group starts at the earliest offset (a GROUP config)
//   produce <topic> <group> <count>             count records, values v0..v<count-1>
//   consume <topic> <group> <count> <explicit|implicit> [release]
//                                               reads until count distinct values were accepted; with
//                                               "release", the first record is released once and must come
//                                               back with delivery count 2
//   accept-then-halt <topic> <group> <k>        accepts k records (commitSync), then halts the JVM without
//                                               closing: the records it still held are left acquired
// Nothing here is specific to pybroker: pointed at Apache Kafka it prints the same steps.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public final class ShareTour {
    private static final long DEADLINE_S = 90;

    public static void main(String[] args) throws Exception {
        String tour = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        String group = args[3];
        String[] rest = Arrays.copyOfRange(args, 4, args.length);
        switch (tour) {
            case "configure" -> configure(bootstrap, group);
            case "produce" -> produce(bootstrap, topic, Integer.parseInt(rest[0]));
            case "consume" -> consume(bootstrap, topic, group, Integer.parseInt(rest[0]), rest[1],
                                      rest.length > 2 && rest[2].equals("release"));
            case "accept-then-halt" -> acceptThenHalt(bootstrap, topic, group, Integer.parseInt(rest[0]));
            default -> throw new IllegalArgumentException("unknown tour " + tour);
        }
    }

    static void configure(String bootstrap, String group) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
                .all().get(30, TimeUnit.SECONDS);
            Config described = admin.describeConfigs(List.of(resource)).all().get(30, TimeUnit.SECONDS).get(resource);
            ClientTour.emit("configure", "ok", true, "reset", described.get("share.auto.offset.reset").value());
        }
    }

    static void produce(String bootstrap, String topic, int count) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
        }
        ClientTour.emit("produce", "ok", true, "count", count);
    }

    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String mode) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", "java-share-tour");
        p.put("share.acknowledgement.mode", mode);
        return new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static void consume(String bootstrap, String topic, String group, int count, String mode, boolean release) {
        Set<String> accepted = new TreeSet<>();
        List<String> values = new ArrayList<>();
        int redeliveredCount = -1;
        String released = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(DEADLINE_S);
        try (KafkaShareConsumer<String, String> consumer = consumer(bootstrap, group, mode)) {
            consumer.subscribe(List.of(topic));
            while (accepted.size() < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(300))) {
                    values.add(r.value());
                    int delivery = r.deliveryCount().map(Short::intValue).orElse(-1);
                    if (mode.equals("explicit") && release && released == null) {
                        released = r.value();
                        consumer.acknowledge(r, AcknowledgeType.RELEASE);
                        continue;
                    }
                    if (r.value().equals(released)) redeliveredCount = delivery;
                    if (mode.equals("explicit")) consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    accepted.add(r.value());
                }
                if (mode.equals("explicit")) consumer.commitSync(Duration.ofSeconds(30));
            }
            if (mode.equals("implicit")) consumer.commitSync(Duration.ofSeconds(30));
        }
        ClientTour.emit("consume", "ok", accepted.size() >= count, "accepted", accepted.size(), "deliveries",
                        values.size(), "values", new ArrayList<>(accepted),
                        "released", String.valueOf(released), "redelivery_count", redeliveredCount);
    }

    static void acceptThenHalt(String bootstrap, String topic, String group, int k) {
        KafkaShareConsumer<String, String> consumer = consumer(bootstrap, group, "explicit");
        consumer.subscribe(List.of(topic));
        List<String> accepted = new ArrayList<>();
        List<String> held = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(DEADLINE_S);
        while (accepted.size() < k && System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(300))) {
                if (accepted.size() < k) {
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    accepted.add(r.value());
                } else {
                    held.add(r.value());  // acquired, never acknowledged
                }
            }
            consumer.commitSync(Duration.ofSeconds(30));
        }
        ClientTour.emit("accept-then-halt", "ok", accepted.size() == k, "values", accepted, "held", held);
        Runtime.getRuntime().halt(0);  // no close: what it held stays acquired
    }
}
