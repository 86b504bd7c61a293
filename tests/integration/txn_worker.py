"""A consume-transform-produce worker, run as its own process so tests can `kill -9` it at any point.

    python -m tests.integration.txn_worker BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID PARTITIONS [BATCH]

It reads INPUT (read_committed, from the group's committed offsets), writes each value prefixed with
"out:" to the same partition of OUTPUT, and commits the consumed offsets in the same transaction
(`send_offsets_to_transaction`): the standard exactly-once loop of confluent-kafka's examples. It exits 0
once its position has reached the end of every input partition and everything is committed; on any
Kafka error it exits 3 at once, as a crashed process would, and the test starts it again (the new
instance's `init_transactions` fences the old one and aborts what it left open).
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

TIMEOUT_S = 20.0
IDLE_EXIT_S = 1.0
PAUSE_S = 0.01  # between transactions, so a kill has many transaction boundaries to land between


def caught_up(consumer: Consumer, partitions: list[TopicPartition]) -> bool:
    """Every input partition read to its end: by position, or (nothing consumed by this instance) by the
    group's committed offset, or (nothing committed either) because the partition is empty."""
    committed = {tp.partition: tp.offset for tp in consumer.committed(partitions, TIMEOUT_S)}
    for position in consumer.position(partitions):
        low, high = consumer.get_watermark_offsets(TopicPartition(position.topic, position.partition), TIMEOUT_S)
        reached = position.offset if position.offset >= 0 else committed.get(position.partition, -1)
        if reached < 0:
            reached = low
        if reached < high:
            return False
    return True


def run(bootstrap: str, source: str, sink: str, group: str, transactional_id: str, partitions: int,
        batch: int) -> int:
    common = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 10_000, "reconnect.backoff.max.ms": 500}
    producer = Producer({**common, "transactional.id": transactional_id, "transaction.timeout.ms": 15_000,
                         "linger.ms": 2, "message.timeout.ms": 15_000})
    consumer = Consumer({**common, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 100})
    tps = [TopicPartition(source, p) for p in range(partitions)]
    try:
        producer.init_transactions(TIMEOUT_S)
        consumer.assign(tps)  # no offsets given: the group's committed ones (stable), else earliest
        idle_since = time.monotonic()
        while True:
            messages = [m for m in consumer.consume(batch, 0.3) if m.error() is None]
            if not messages:
                if time.monotonic() - idle_since > IDLE_EXIT_S and caught_up(consumer, tps):
                    print("done", flush=True)
                    return 0
                continue
            idle_since = time.monotonic()
            producer.begin_transaction()
            for message in messages:
                producer.produce(sink, value=b"out:" + message.value(), partition=message.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), TIMEOUT_S)
            producer.commit_transaction(TIMEOUT_S)
            print(f"committed {len(messages)}", flush=True)
            time.sleep(PAUSE_S)
    except KafkaException as exc:
        print(f"kafka error: {exc}", flush=True)
        return 3
    finally:
        consumer.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(run(args[0], args[1], args[2], args[3], args[4], int(args[5]),
                 int(args[6]) if len(args) > 6 else 50))
