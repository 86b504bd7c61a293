"""What the coordinator does when producers or the broker go wrong: a second producer with the same
transactional id fences the first (whose open transaction is aborted and whose commit fails); a transaction
left open past its timeout is aborted by the broker; and a broker killed between writing PrepareCommit and
completing the transaction completes it after restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka.errors import KafkaError as KpKafkaError

from pybroker.broker.transactions.coordinator import MARKER_DELAY_ENV
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import close_clients
from tests.integration.test_transactions import txn_broker  # noqa: F401 (the module's shared broker)
from tests.integration.txn_clients import (
    CONSUMERS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TXN_OVERRIDES,
    ck_txn_producer,
    create_topic,
    kp_txn_producer,
    read_values,
)

#: codes librdkafka reports for a fenced producer (it maps the broker's answer to its own _FENCED)
FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


def test_second_producer_with_the_same_id_fences_the_first_confluent(
        txn_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:  # noqa: F811
    topic = new_topic()
    create_topic(txn_broker.bootstrap, topic, 1)
    txn_id = f"fenced-{topic}"
    old = ck_txn_producer(txn_broker.bootstrap, txn_id)
    old.init_transactions(20)
    old.begin_transaction()
    old.produce(topic, value=b"zombie", partition=0)
    assert old.flush(20) == 0

    new = ck_txn_producer(txn_broker.bootstrap, txn_id)
    new.init_transactions(20)  # bumps the epoch and aborts the old producer's open transaction
    new.begin_transaction()
    new.produce(topic, value=b"live", partition=0)
    new.commit_transaction(20)

    with pytest.raises(KafkaException) as raised:
        old.commit_transaction(20)
    error = raised.value.args[0]
    assert error.code() in FENCED or error.fatal(), error

    assert read_values("confluent-kafka", txn_broker.bootstrap, topic, 1, READ_COMMITTED) == [b"live"]
    assert read_values("confluent-kafka", txn_broker.bootstrap, topic, 1, READ_UNCOMMITTED,
                       expected=2) == [b"zombie", b"live"]


def test_second_producer_with_the_same_id_fences_the_first_kafka_python(
        txn_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:  # noqa: F811
    topic = new_topic()
    create_topic(txn_broker.bootstrap, topic, 1)
    txn_id = f"fenced-{topic}"
    with kp_txn_producer(txn_broker.bootstrap, txn_id) as old:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, value=b"zombie", partition=0)
        old.flush(timeout=20)
        with kp_txn_producer(txn_broker.bootstrap, txn_id) as new:
            new.init_transactions()
            new.begin_transaction()
            new.send(topic, value=b"live", partition=0)
            new.commit_transaction()
        with pytest.raises(KpKafkaError):
            old.commit_transaction()
    assert read_values("kafka-python", txn_broker.bootstrap, topic, 1, READ_COMMITTED) == [b"live"]


@pytest.mark.slow
def test_transaction_open_past_its_timeout_is_aborted(broker_factory: Callable[..., BrokerProcess],
                                                      new_topic: Callable[..., str]) -> None:
    broker = broker_factory({**TXN_OVERRIDES, "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"})
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    with kp_txn_producer(broker.bootstrap, f"slow-{topic}", transaction_timeout_ms=1500) as stale:
        stale.init_transactions()
        stale.begin_transaction()
        stale.send(topic, value=b"abandoned", partition=0)
        stale.flush(timeout=20)
        # another producer commits after it: read_committed readers see it only once the stale one ends
        later = ck_txn_producer(broker.bootstrap, f"later-{topic}")
        later.init_transactions(20)
        later.begin_transaction()
        later.produce(topic, value=b"later", partition=0)
        later.commit_transaction(20)

        deadline = time.monotonic() + 15
        seen: list[bytes] = []
        while time.monotonic() < deadline and seen != [b"later"]:
            seen = read_values("confluent-kafka", broker.bootstrap, topic, 1, READ_COMMITTED, expected=1, timeout=2)
        assert seen == [b"later"], "the timed-out transaction was never aborted (the LSO did not move)"
        for consumer in CONSUMERS:  # the aborted record comes first in the log: a leak would be read first
            assert read_values(consumer, broker.bootstrap, topic, 1, READ_COMMITTED, expected=1) == [b"later"], consumer
        with pytest.raises(KpKafkaError):
            stale.commit_transaction()  # its epoch was bumped by the abort


@pytest.mark.slow
def test_broker_killed_between_prepare_and_complete_completes_after_restart(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    """EndTxn answers once PrepareCommit is durable in `__transaction_state`; the coordinator's test hook
    (PYBROKER_TEST_TXN_MARKER_DELAY_MS) holds the markers back, and the broker is killed meanwhile. After a
    restart the replayed coordinator writes the COMMIT markers, so read_committed readers see the records,
    and the transactional id works again."""
    broker = broker_factory(TXN_OVERRIDES, needs_restart=True, start=False)
    plain_env = broker.env
    broker.env = lambda: {**plain_env(), MARKER_DELAY_ENV: "60000"}  # type: ignore[method-assign]
    broker.start()
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 2)
    txn_id = f"crash-{topic}"
    values = [f"v{i}".encode() for i in range(10)]
    producer = ck_txn_producer(broker.bootstrap, txn_id)
    producer.init_transactions(20)
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % 2)
    producer.commit_transaction(20)  # PrepareCommit is durable; the markers wait
    assert read_values("confluent-kafka", broker.bootstrap, topic, 2, READ_COMMITTED, timeout=3) == []
    assert sorted(read_values("confluent-kafka", broker.bootstrap, topic, 2, READ_UNCOMMITTED,
                              expected=10)) == sorted(values)
    close_clients()

    broker.kill9()
    broker.env = plain_env  # type: ignore[method-assign]
    broker.start()
    got = read_values("confluent-kafka", broker.bootstrap, topic, 2, READ_COMMITTED, expected=10, timeout=30)
    assert sorted(got) == sorted(values)

    again = ck_txn_producer(broker.bootstrap, txn_id)
    again.init_transactions(20)
    again.begin_transaction()
    again.produce(topic, value=b"after", partition=0)
    again.commit_transaction(20)
    got = read_values("confluent-kafka", broker.bootstrap, topic, 2, READ_COMMITTED, expected=11, timeout=20)
    assert sorted(got) == sorted([*values, b"after"])
