// A stateful Kafka Streams application for the ecosystem tests (tests/ecosystem/test_kafka_streams.py):
// orders ("customer,amount", keyed by order id) are re-keyed by customer (a repartition topic), summed per
// customer (a state store and its compacted changelog), joined with the customers table (customer -> region)
// and written to the output topic as "region:total". Under exactly_once_v2 the last value per customer in the
// output equals the sum of every order, whatever was killed on the way.
//
//   java -cp <kafka libs>:<streams libs> StreamsApp <bootstrap> <application.id> <state dir> <prefix> [<group protocol>]
//
// The optional group protocol is "classic" (the default) or "streams" (KIP-1071's rebalance protocol: the
// broker assigns the tasks, and num.standby.replicas is the broker's group setting, not this client's).
//
// Topics: <prefix>-orders and <prefix>-customers (same partition count), output <prefix>-totals.
// Prints "STATE <new state>" on every state change, so the test can wait for RUNNING, and at RUNNING
// "TASKS active=[..] standby=[..]".

import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamsApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String applicationId = args[1];
        String stateDir = args[2];
        String prefix = args[3];
        String groupProtocol = args.length > 4 ? args[4] : "classic";

        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put("group.protocol", groupProtocol);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // quick failure detection: instances are killed with SIGKILL on purpose
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10000);

        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table(prefix + "-customers");
        KTable<String, Long> totals = builder.<String, String>stream(prefix + "-orders")
            .map((orderId, order) -> {
                String[] parts = order.split(",");
                return KeyValue.pair(parts[0], Long.parseLong(parts[1]));
            })
            .groupByKey(Grouped.with("by-customer", Serdes.String(), Serdes.Long()))
            .aggregate(() -> 0L, (customer, amount, sum) -> sum + amount,
                       Materialized.<String, Long, org.apache.kafka.streams.state.KeyValueStore<org.apache.kafka.common.utils.Bytes, byte[]>>as("totals-store")
                           .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()));
        totals.join(customers, (sum, region) -> region + ":" + sum)
            .toStream()
            .to(prefix + "-totals", Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            if (now == KafkaStreams.State.RUNNING) {
                // which tasks this instance runs, active and standby (the test checks both kinds exist)
                java.util.List<String> active = new java.util.ArrayList<>();
                java.util.List<String> standby = new java.util.ArrayList<>();
                for (var thread : streams.metadataForLocalThreads()) {
                    thread.activeTasks().forEach(t -> active.add(t.taskId().toString()));
                    thread.standbyTasks().forEach(t -> standby.add(t.taskId().toString()));
                }
                System.out.println("TASKS active=" + active + " standby=" + standby);
            }
            System.out.flush();
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) stopped.countDown();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("UNCAUGHT " + e);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        stopped.await();
    }
}
