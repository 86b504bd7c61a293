"""A consume-transform-produce worker, run as its own process so tests can `kill -9` it at any point.

    python -m tests.integration.txn_worker CLIENT BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID PARTITIONS [BATCH]

CLIENT is confluent-kafka or kafka-python. It reads INPUT (read_committed, from the group's committed
offsets), writes each value prefixed with "out:" to the same partition of OUTPUT, and commits the consumed
offsets in the same transaction (`send_offsets_to_transaction`): the standard exactly-once loop of the
clients' examples. It exits 0 once its position has reached the end of every input partition and
everything is committed; on any Kafka error it exits 3 at once, as a crashed process would, and the test
starts it again (the new instance's `init_transactions` fences the old one and aborts what it left open).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

TIMEOUT_S = 60.0
IDLE_EXIT_S = 1.0
PAUSE_S = 0.03  # between transactions: at most ~33 a second, so the input outlasts every kill round
FAILED = 3


def _idle_loop(poll: Callable[[], bool], caught_up: Callable[[], bool]) -> int:
    """Run `poll` (one transaction, or False when nothing came) until the input is read and committed."""
    idle_since = time.monotonic()
    while True:
        if poll():
            idle_since = time.monotonic()
            time.sleep(PAUSE_S)
        elif time.monotonic() - idle_since > IDLE_EXIT_S and caught_up():
            print("done", flush=True)
            return 0


def run_confluent(bootstrap: str, source: str, sink: str, group: str, transactional_id: str, partitions: int,
                  batch: int) -> int:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    common = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 10_000, "reconnect.backoff.max.ms": 500}
    producer = Producer({**common, "transactional.id": transactional_id, "transaction.timeout.ms": 15_000,
                         "linger.ms": 2, "message.timeout.ms": 15_000})
    consumer = Consumer({**common, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    tps = [TopicPartition(source, p) for p in range(partitions)]

    def caught_up() -> bool:
        """Every input partition read to its end: by position, or (nothing consumed by this instance) by
        the group's committed offset, or (nothing committed either) because the partition is empty."""
        committed = {tp.partition: tp.offset for tp in consumer.committed(tps, TIMEOUT_S)}
        for position in consumer.position(tps):
            low, high = consumer.get_watermark_offsets(TopicPartition(source, position.partition), TIMEOUT_S)
            reached = position.offset if position.offset >= 0 else committed.get(position.partition, -1)
            if (reached if reached >= 0 else low) < high:
                return False
        return True

    def poll() -> bool:
        messages = [m for m in consumer.consume(batch, 0.3) if m.error() is None]
        if not messages:
            return False
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, value=b"out:" + message.value(), partition=message.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
        print(f"committed {len(messages)}", flush=True)
        return True

    try:
        producer.init_transactions(TIMEOUT_S)
        consumer.assign(tps)  # no offsets given: the group's committed ones (stable), else earliest
        return _idle_loop(poll, caught_up)
    except KafkaException as exc:
        print(f"kafka error: {exc}", flush=True)
        return FAILED
    finally:
        consumer.close()


def run_kafka_python(bootstrap: str, source: str, sink: str, group: str, transactional_id: str, partitions: int,
                     batch: int) -> int:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    common = {"bootstrap_servers": bootstrap, "request_timeout_ms": 10_000, "reconnect_backoff_max_ms": 500}
    producer = KafkaProducer(**common, transactional_id=transactional_id, transaction_timeout_ms=15_000,
                             linger_ms=2, max_block_ms=int(TIMEOUT_S * 1000))
    consumer = KafkaConsumer(**common, group_id=group, isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100, max_poll_records=batch)
    tps = [TopicPartition(source, p) for p in range(partitions)]

    def caught_up() -> bool:
        ends = consumer.end_offsets(tps)  # read_committed: the last stable offsets
        return all(consumer.position(tp) >= ends[tp] for tp in tps)

    def poll() -> bool:
        records = [r for rs in consumer.poll(timeout_ms=300).values() for r in rs]
        if not records:
            return False
        producer.begin_transaction()
        for record in records:
            producer.send(sink, value=b"out:" + record.value, partition=record.partition)
        offsets = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in tps}
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        producer.commit_transaction()
        print(f"committed {len(records)}", flush=True)
        return True

    try:
        producer.init_transactions()
        consumer.assign(tps)
        return _idle_loop(poll, caught_up)
    except KafkaError as exc:
        print(f"kafka error: {exc!r}", flush=True)
        return FAILED
    finally:
        consumer.close()
        producer.close(timeout=1)


WORKERS = {"confluent-kafka": run_confluent, "kafka-python": run_kafka_python}

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(WORKERS[args[0]](args[1], args[2], args[3], args[4], args[5], int(args[6]),
                              int(args[7]) if len(args) > 7 else 50))
