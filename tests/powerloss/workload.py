"""What a power-loss campaign runs against the broker, and the ledger of what the broker acknowledged.

The campaign (`tests/powerloss/campaign.py`) keeps one broker on the lazy file system busy with every
kind of write whose durability the broker promises, each in a thread of its own, and records in a
`Ledger` exactly what was acknowledged:

- `IdempotentStream`: one idempotent acks=all librdkafka producer, kept across power cuts (so it resends
  its in-flight batches to the restarted broker, whose producer state must recognise them), writing
  `pl-idem` (several partitions, spread over two log dirs), `pl-compact` (a compacted topic with few keys,
  tiny segments and a low `min.cleanable.dirty.ratio`, so the cleaner swaps segments all the time) and
  `pl-retain` (tiny segments and `retention.bytes`, so retention deletes all the time);
- `Acks1Stream`: a plain acks=1 producer on `pl-acks1`, with the acks=1 window off: its losses are the proof
  the harness bites;
- `Transactions`: a transactional producer committing small transactions to `pl-txn`;
- `Committer`: a consumer group committing offsets (`__consumer_offsets` appends);
- `Churn`: topics created and deleted (`pl-churn-N`);
- `Mover`: `pl-idem` partitions moved between the two log dirs (AlterReplicaLogDirs).

Threads: each stream runs its own thread between `start()` and `stop()`; the ledger is shared and
guarded by its lock. The campaign's thread starts and stops them, never while a check reads the ledger.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pybroker.clients.admin import cluster as cluster_ops
from pybroker.clients.wire import WireClient
from tests.integration.clients import CK_COMMON, ck_consumer

IDEM, COMPACT, RETAIN, ACKS1, TXN = "pl-idem", "pl-compact", "pl-retain", "pl-acks1", "pl-txn"
CHURN_PREFIX = "pl-churn-"
GROUP = "pl-group"
TRANSACTIONAL_ID = "pl-txn-producer"
PARTITIONS = {IDEM: 4, COMPACT: 2, RETAIN: 2, ACKS1: 2, TXN: 2}
TOPIC_CONFIGS: dict[str, dict[str, str]] = {
    IDEM: {"segment.bytes": str(24 * 1024)},
    COMPACT: {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
              "min.compaction.lag.ms": "0", "delete.retention.ms": "1000", "segment.ms": "2000"},
    RETAIN: {"segment.bytes": "4096", "retention.bytes": str(12 * 1024)},
    # the acks=1 window off (Kafka's default): nothing fsyncs these records, so a cut must lose some
    ACKS1: {"segment.bytes": str(24 * 1024), "flush.ms": str(2**63 - 1)},
    TXN: {"segment.bytes": str(16 * 1024)},
}
COMPACT_KEYS = 16
#: records a second per stream: enough to roll and clean every few seconds, little enough that a full
#: read-back after each of a hundred cuts stays fast
RATE = 300
VALUE_PAD = b"." * 40
#: librdkafka logs every refused connection while the broker is down: only its critical lines
CK = {**CK_COMMON, "log_level": 2}


@dataclass
class Ledger:
    """Everything the broker acknowledged (or may have applied), across all cuts of a campaign."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    #: topic -> (partition, offset) -> (key, value): acks=all records, acknowledged at that offset
    acked: dict[str, dict[tuple[int, int], tuple[bytes | None, bytes]]] = field(
        default_factory=lambda: defaultdict(dict))
    #: acks=all records acknowledged without an offset (librdkafka reports a resent batch the broker
    #: recognised as a duplicate that way when it cannot say where): topic -> values, each must be there
    acked_without_offset: dict[str, set[bytes]] = field(default_factory=lambda: defaultdict(set))
    #: acks=1 records acknowledged
    acks1: dict[tuple[int, int], bytes] = field(default_factory=dict)
    #: transaction number -> its values: committed (acknowledged) and all ever begun
    txn_committed: dict[int, set[bytes]] = field(default_factory=dict)
    txn_begun: dict[int, set[bytes]] = field(default_factory=dict)
    #: partition of pl-idem -> the last acknowledged committed offset, and every offset ever sent
    commits: dict[int, int] = field(default_factory=dict)
    commits_sent: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    commit_acks: int = 0
    #: topic creations and deletions: acknowledged, and asked for
    created: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    delete_asked: set[str] = field(default_factory=set)
    moves: int = 0
    #: per kind, acknowledged entries found lost and taken out of the ledger (so each loss counts once)
    dropped: Counter[str] = field(default_factory=Counter)
    #: stream problems a check must report (a fatal producer error, an unexpected delivery failure)
    problems: list[str] = field(default_factory=list)


def create_topics(bootstrap: str) -> None:
    """The campaign's topics, created once before the first cut (acknowledged, so durable)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CK})
    futures = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=1, config=TOPIC_CONFIGS[t])
                                   for t, n in PARTITIONS.items()])
    for future in futures.values():
        future.result(20)


class Stream:
    """A thread that runs `run()` until stopped; an exception while the broker is down is expected."""

    name = "stream"

    def __init__(self, bootstrap: str, ledger: Ledger, seed: int) -> None:
        self.bootstrap, self.ledger = bootstrap, ledger
        self.random = random.Random(seed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._local = threading.local()
        #: what ended the last run (the broker goes away at every cut: any client error may)
        self.last_error: str | None = None

    def start(self) -> None:
        """Run in a new thread; a thread of the last run still finishing its call ends on its own (its
        acknowledgements are real ones: they count)."""
        self._stop = threading.Event()
        self.last_error = None
        self._thread = threading.Thread(target=self._run, args=(self._stop,), name=f"powerloss-{self.name}",
                                        daemon=True)
        self._thread.start()

    def signal_stop(self) -> None:
        self._stop.set()

    def join(self, deadline: float) -> None:
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
            self._thread = None

    def _run(self, stop: threading.Event) -> None:
        self._local.stop = stop  # each run's own: a new run must not revive an old one
        try:
            self.run()
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"[:300]

    def run(self) -> None:
        raise NotImplementedError

    def pause(self, seconds: float) -> bool:
        """Sleep unless stopped; False once stopped."""
        return not self._local.stop.wait(seconds)


def stop_all(streams: list[Stream], timeout: float) -> None:
    """Stop every stream, waiting at most `timeout` in all (a client call may block until its timeout)."""
    for stream in streams:
        stream.signal_stop()
    deadline = time.monotonic() + timeout
    for stream in streams:
        stream.join(deadline)


class IdempotentStream(Stream):
    """acks=all idempotent records to pl-idem, pl-compact and pl-retain; one producer for the campaign."""

    name = "idempotent"

    def __init__(self, bootstrap: str, ledger: Ledger, seed: int) -> None:
        super().__init__(bootstrap, ledger, seed)
        self.producer = self._producer()
        self.counter = itertools.count()
        self.fatal: str | None = None

    def _producer(self) -> Producer:
        return Producer({
            "bootstrap.servers": self.bootstrap, **CK, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 120_000, "retry.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500, "error_cb": self._error})

    def _error(self, err: KafkaError) -> None:
        """librdkafka's error callback (its own thread): a fatal error is a finding."""
        if err.fatal() and self.fatal is None:
            self.fatal = str(err)
            with self.ledger.lock:
                self.ledger.problems.append(f"idempotent producer: fatal {err}")

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            if err.fatal():
                self._error(err)
            return
        offset = msg.offset()
        with self.ledger.lock:
            if offset is None or offset < 0:  # acknowledged as a duplicate of a batch it no longer has
                self.ledger.acked_without_offset[msg.topic()].add(msg.value())
                return
            self.ledger.acked[msg.topic()][(msg.partition(), offset)] = (msg.key(), msg.value())

    def run(self) -> None:
        if self.fatal is not None:  # a new producer id, and a new session of sequences
            self.producer = self._producer()
            self.fatal = None
        while self.pause(1 / RATE):
            n = next(self.counter)
            topic = (IDEM, IDEM, COMPACT, RETAIN)[n % 4]
            key = f"k{self.random.randrange(COMPACT_KEYS)}".encode() if topic == COMPACT else None
            with contextlib.suppress(BufferError):
                self.producer.produce(topic, value=f"{topic}:{n}:".encode() + VALUE_PAD, key=key,
                                      partition=n % PARTITIONS[topic], on_delivery=self._delivered)
            self.producer.poll(0)

    def settle(self, timeout: float) -> int:
        """Wait for every record in flight to be acknowledged (after a restart); how many are still not
        (a fatal error is the ledger's problem already, and the next run starts a new producer)."""
        try:
            return int(self.producer.flush(timeout))
        except Exception as exc:  # a fatal error surfaces here (wrapped in a SystemError by the callback)
            cause = exc.__cause__ or exc.__context__ or exc
            if self.fatal is None:
                self.fatal = str(cause)[:300]
                with self.ledger.lock:
                    self.ledger.problems.append(f"idempotent producer: fatal {self.fatal}")
            return len(self.producer)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.producer.purge()
            self.producer.flush(0)


class Acks1Stream(Stream):
    """Plain acks=1 records to pl-acks1, a producer per run (they are not retried across a cut)."""

    name = "acks1"

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, **CK, "acks": 1,
                             "enable.idempotence": False, "linger.ms": 5, "message.timeout.ms": 10_000})
        acked: dict[tuple[int, int], bytes] = {}

        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is None and msg.offset() is not None and msg.offset() >= 0:
                acked[(msg.partition(), msg.offset())] = msg.value()

        try:
            for n in itertools.count():
                if not self.pause(1 / RATE):
                    break
                with contextlib.suppress(BufferError):
                    producer.produce(ACKS1, value=f"a1:{time.time_ns()}:{n}".encode() + VALUE_PAD,
                                     partition=n % PARTITIONS[ACKS1], on_delivery=delivered)
                producer.poll(0)
            producer.poll(0.2)
        finally:
            with self.ledger.lock:
                self.ledger.acks1.update(acked)  # deliveries after the kill never come: nothing after
            producer.purge()
            producer.flush(0)


class Transactions(Stream):
    """Small transactions to pl-txn, committed one after another; a producer per run, same id (fenced)."""

    name = "transactions"
    numbers = itertools.count()

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, **CK, "transactional.id": TRANSACTIONAL_ID,
                             "transaction.timeout.ms": 10_000, "linger.ms": 5, "message.timeout.ms": 10_000})
        try:
            producer.init_transactions(15)
            while self.pause(0.05):
                number = next(self.numbers)
                values = {f"txn:{number}:{i}".encode() for i in range(3)}
                with self.ledger.lock:
                    self.ledger.txn_begun[number] = values
                producer.begin_transaction()
                for i, value in enumerate(sorted(values)):
                    producer.produce(TXN, value=value, partition=(number + i) % PARTITIONS[TXN])
                producer.commit_transaction(10)
                with self.ledger.lock:
                    self.ledger.txn_committed[number] = values
        finally:
            with contextlib.suppress(Exception):
                producer.purge()
                producer.flush(0)


class Committer(Stream):
    """A consumer group committing growing offsets of pl-idem's partitions, synchronously."""

    name = "committer"
    offsets = itertools.count(1)

    def run(self) -> None:
        with ck_consumer(self.bootstrap, **{"group.id": GROUP, "log_level": 2}) as consumer:
            while self.pause(0.05):
                offset = next(self.offsets)
                partitions = range(PARTITIONS[IDEM])
                with self.ledger.lock:
                    for p in partitions:
                        self.ledger.commits_sent[p].add(offset)
                consumer.commit(offsets=[CkTopicPartition(IDEM, p, offset) for p in partitions], asynchronous=False)
                with self.ledger.lock:
                    self.ledger.commit_acks += 1
                    for p in partitions:
                        self.ledger.commits[p] = offset


class Churn(Stream):
    """Topics created and deleted: each creation acknowledged, the previous topic deleted."""

    name = "churn"
    numbers = itertools.count()

    def run(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **CK})
        while self.pause(0.3):
            name = f"{CHURN_PREFIX}{next(self.numbers)}"
            admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(10)
            with self.ledger.lock:
                self.ledger.created.add(name)
                doomed = sorted(self.ledger.created - self.ledger.delete_asked)[:-1]
            for old in doomed[:1]:
                with self.ledger.lock:
                    self.ledger.delete_asked.add(old)
                admin.delete_topics([old])[old].result(10)
                with self.ledger.lock:
                    self.ledger.deleted.add(old)


class Mover(Stream):
    """pl-idem's partitions moved to the other log dir, one at a time."""

    name = "mover"

    def run(self) -> None:
        while self.pause(1.0):
            with WireClient(self.bootstrap, 10) as client:
                where = {(p["partition"], p["future"]): d["log_dir"] for d in cluster_ops.log_dirs(client, [IDEM])
                         for p in d["partitions"]}
                dirs = sorted({d["log_dir"] for d in cluster_ops.log_dirs(client)})
                idle = [p for p in range(PARTITIONS[IDEM]) if (p, True) not in where and (p, False) in where]
                if len(dirs) < 2 or not idle:
                    continue
                partition = self.random.choice(idle)
                target = next(d for d in dirs if d != where[(partition, False)])
                cluster_ops.move_partition(client, IDEM, partition, target)
                with self.ledger.lock:
                    self.ledger.moves += 1
