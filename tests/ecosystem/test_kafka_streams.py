"""Kafka Streams under exactly_once_v2 against pybroker, with the application and the broker killed on the way.

`java/StreamsApp.java` re-keys orders by customer (a repartition topic), sums them per customer (a state store
with its compacted changelog), joins the sums with the customers table and writes "region:total". Two
instances share the tasks with one standby replica each. Orders arrive in rounds; between rounds an instance
is killed with SIGKILL and restarted, the broker is killed with SIGKILL and restarted, and an instance loses its
state dir (its store comes back from the changelog). At the end the last value per customer in the output,
read with read_committed, must be the exact total: a record counted twice or lost would show.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.ecosystem.jvm import JVM_FLAGS, Tours, classpath
from tests.integration.brokers import BrokerProcess

pytestmark = pytest.mark.slow

CUSTOMERS = 10
ROUNDS = 4
ORDERS_PER_ROUND = 150
DEADLINE_S = 240.0


def _region(customer: int) -> str:
    return f"r{customer % 3}"


class App:
    """One StreamsApp instance: a JVM whose stdout lines say its state and tasks."""

    def __init__(self, tours: Tours, bootstrap: str, app_id: str, state_dir: Path, prefix: str, out: Path) -> None:
        self.command = ["java", *JVM_FLAGS, "-cp", classpath(tours.classes), "StreamsApp", bootstrap, app_id,
                        str(state_dir), prefix]
        self.state_dir = state_dir
        self.out = out
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.out.open("ab") as out:
            out.write(b"=== start\n")
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.DEVNULL,
                                            stdin=subprocess.DEVNULL)

    def kill9(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def lines(self) -> list[str]:
        text = self.out.read_text(errors="replace")
        return text.split("=== start\n")[-1].splitlines()  # this run's lines only

    def wait_running(self, deadline: float) -> None:
        while "STATE RUNNING" not in self.lines():
            assert self.process is not None and self.process.poll() is None, self.out.read_text()[-3000:]
            assert time.monotonic() < deadline, f"not RUNNING in time:\n{self.out.read_text()[-3000:]}"
            time.sleep(0.2)




def _totals(bootstrap: str, topic: str) -> dict[str, str]:
    """The output topic's last value per key, read_committed, from the start."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True, "log_level": 3})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        last: dict[str, str] = {}
        while True:
            message = consumer.poll(5.0)
            if message is None:
                return last
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return last
                raise AssertionError(message.error())
            last[message.key().decode()] = message.value().decode()
    finally:
        consumer.close()


def test_exactly_once_totals_survive_killed_instances_a_killed_broker_and_a_lost_state_dir(
        tours: Tours, fresh_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = fresh_broker.bootstrap
    prefix = f"streams-{uuid.uuid4().hex[:6]}"
    app_id = f"{prefix}-app"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics([NewTopic(f"{prefix}-orders", 2, 1), NewTopic(f"{prefix}-customers", 2, 1),
                                   NewTopic(f"{prefix}-totals", 1, 1)])
    for future in created.values():
        future.result(30)
    # murmur2, Java's partitioner: the customers table must be partitioned as Streams partitions the sums
    # it is joined with (librdkafka's default, CRC32, would put a customer and its sum in different tasks)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "partitioner": "murmur2_random"})
    for customer in range(CUSTOMERS):
        producer.produce(f"{prefix}-customers", key=f"c{customer}", value=_region(customer))
    producer.flush(30)

    apps = [App(tours, bootstrap, app_id, tmp_path / f"state{i}", prefix, tmp_path / f"app{i}.out") for i in (0, 1)]
    deadline = time.monotonic() + DEADLINE_S
    for app in apps:
        app.start()
    try:
        for app in apps:
            app.wait_running(deadline)
        expected = {f"c{c}": 0 for c in range(CUSTOMERS)}
        order = 0
        for round_ in range(ROUNDS):
            for _ in range(ORDERS_PER_ROUND):
                customer, amount = order % CUSTOMERS, order % 7 + 1
                producer.produce(f"{prefix}-orders", key=f"o{order}", value=f"c{customer},{amount}")
                expected[f"c{customer}"] += amount
                order += 1
            producer.flush(60)
            if round_ == 0:  # an instance dies mid-stream and comes back on its own state dir
                apps[0].kill9()
                apps[0].start()
            elif round_ == 1:  # the broker dies; the instances ride it out
                fresh_broker.restart(kill=True)
            elif round_ == 2:  # an instance comes back with no state: its store is restored from the changelog
                apps[1].kill9()
                shutil.rmtree(apps[1].state_dir, ignore_errors=True)
                apps[1].start()
        want = {key: f"{_region(int(key[1:]))}:{total}" for key, total in expected.items()}
        got: dict[str, str] = {}
        while time.monotonic() < deadline:
            got = _totals(bootstrap, f"{prefix}-totals")
            if got == want:
                break
            time.sleep(1.0)
        if got != want:  # say what holds the output back before failing
            cli = [sys.executable, "-m", "pybroker.broker.cli", "transactions"]
            for args in (["list"], ["describe-producers", "--topic", f"{prefix}-totals", "--partition", "0"],
                         ["find-hanging"]):
                done = subprocess.run([*cli, *args, "--bootstrap-server", bootstrap], capture_output=True, text=True)
                print("$ transactions", *args, "\n", done.stdout, done.stderr)
        assert got == want
        # the topology's internal topics, as Kafka Streams made them: the changelog compacted
        topics = admin.list_topics(timeout=30).topics
        changelog = f"{app_id}-totals-store-changelog"
        assert changelog in topics and f"{app_id}-by-customer-repartition" in topics
        described = admin.describe_configs([ConfigResource("topic", changelog)])
        config = next(iter(described.values())).result(30)
        assert config["cleanup.policy"].value == "compact"
        # each instance ran active tasks and, with the other alive, standby ones
        tasks = [line for app in apps for line in app.out.read_text().splitlines() if line.startswith("TASKS")]
        assert any("standby=[]" not in line for line in tasks), tasks
        assert "Traceback" not in fresh_broker.log_path.read_text(errors="replace")
    finally:
        for app in apps:
            app.kill9()
