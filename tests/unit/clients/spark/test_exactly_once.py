"""The exactly-once sink's task and driver steps against an in-memory broker (no Spark)."""

from __future__ import annotations

import functools
import logging
from typing import Any

import pytest

from pybroker.clients.spark import exactly_once
from pybroker.clients.spark.cluster import Cluster, Timeouts
from pybroker.clients.spark.exactly_once import InjectedFailure, PreparedTask
from pybroker.clients.spark.offsets import OptionError
from pybroker.clients.spark.options import parse_read_options, parse_write_options
from pybroker.clients.spark.record_writer import Columns
from tests.unit.clients.spark.fake_broker import FakeBroker

COLUMNS = Columns(has_key=True, has_topic=False, has_partition=False, has_headers=False)
FAST = Timeouts(request_s=1, operation_s=2, backoff_s=0.001, max_backoff_s=0.002)


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> FakeBroker:
    fake = FakeBroker({"out": 3})
    monkeypatch.setattr(exactly_once, "Cluster", functools.partial(_cluster, fake))
    return fake


def _cluster(fake: FakeBroker, bootstrap: Any, timeouts: Timeouts) -> Cluster:
    return Cluster(bootstrap, FAST, connect=fake.connect)


def _options(**extra: str) -> Any:
    return parse_write_options({"kafka.bootstrap.servers": "fake:1", "topic": "out", **extra})


def _rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"key": f"k{i}", "value": f"v{i}"} for i in range(start, start + n)]


def _task(rows: list[dict[str, Any]], partition: int, *, batch: int = 0, attempt: int = 0, streaming: bool = False,
          **options: str) -> PreparedTask:
    return exactly_once.write_task(rows, _options(**options), COLUMNS, job="q", batch=batch, partition=partition,
                                   attempt=attempt, streaming=streaming)


def _values(broker: FakeBroker) -> list[bytes]:
    return sorted(v for *_, v in broker.committed if v is not None)


def test_a_job_commits_every_task_once_the_driver_says_so(broker: FakeBroker) -> None:
    tasks = [_task(_rows(10, 10 * p), p) for p in range(3)]
    assert [t.transactional_id for t in tasks] == ["pybroker-spark.q.0.0", "pybroker-spark.q.0.1",
                                                   "pybroker-spark.q.0.2"]
    assert broker.committed == []
    assert exactly_once.commit_all(_options(), tasks, "test") == 30
    assert _values(broker) == sorted(f"v{i}".encode() for i in range(30))


def test_a_task_that_dies_after_writing_is_fenced_by_its_retry(broker: FakeBroker) -> None:
    with pytest.raises(InjectedFailure):
        _task(_rows(5), 1, **{"exactlyOnce.failOnceAfterWrite": "1"})
    retried = _task(_rows(5), 1, attempt=1, **{"exactlyOnce.failOnceAfterWrite": "1"})
    exactly_once.commit_all(_options(), [retried], "test")
    assert _values(broker) == sorted(f"v{i}".encode() for i in range(5))
    assert len(broker.aborted) == 5


def test_a_task_that_fails_aborts_its_own_transaction(broker: FakeBroker) -> None:
    rows: list[dict[str, Any]] = [*_rows(3), {"key": None, "value": None}]
    with pytest.raises(ValueError, match="neither key nor value"):
        _task(rows, 0)
    assert broker.txns["pybroker-spark.q.0.0"].open is False and broker.committed == []


def test_a_row_naming_a_partition_is_checked_against_the_topics_partition_count(broker: FakeBroker) -> None:
    columns = Columns(has_key=True, has_topic=False, has_partition=True, has_headers=False)
    rows: list[dict[str, Any]] = [{"key": "k0", "value": "v0", "partition": 2}]
    task = exactly_once.write_task(rows, _options(), columns, job="q", batch=0, partition=0, attempt=0,
                                   streaming=False)
    exactly_once.commit_all(_options(), [task], "test")
    assert _values(broker) == [b"v0"]
    with pytest.raises(RuntimeError, match="out-3: the topic has 3 partitions"):
        exactly_once.write_task([{"key": "k1", "value": "v1", "partition": 3}], _options(), columns, job="q",
                                batch=0, partition=1, attempt=0, streaming=False)


def test_the_driver_abort_aborts_every_task(broker: FakeBroker) -> None:
    tasks = [_task(_rows(2, 2 * p), p) for p in range(2)]
    exactly_once.abort_all(_options(), [t.transactional_id or "" for t in tasks], "test")
    assert broker.committed == [] and len(broker.aborted) == 4


def test_a_commit_of_a_fenced_task_fails_loudly(broker: FakeBroker) -> None:
    stale = _task(_rows(2), 0)
    _task(_rows(2), 0, attempt=1)
    with pytest.raises(RuntimeError, match=r"1 task transaction\(s\) could not be committed"):
        exactly_once.commit_all(_options(), [stale], "test")
    assert broker.committed == []


def test_a_task_without_rows_prepares_nothing(broker: FakeBroker) -> None:
    task = _task([], 2)
    assert task.transactional_id is None
    assert exactly_once.commit_all(_options(), [task], "test") == 0


def test_a_streaming_batch_rerun_after_its_commit_writes_nothing(broker: FakeBroker) -> None:
    first = [_task(_rows(4, 4 * p), p, batch=7, streaming=True) for p in range(2)]
    exactly_once.commit_all(_options(), first, "batch 7")
    # the driver died before Spark's commit log said batch 7 is done: the restarted query runs it again
    again = [_task(_rows(4, 4 * p), p, batch=7, streaming=True) for p in range(2)]
    assert all(t.already_committed and t.transactional_id is None for t in again)
    exactly_once.commit_all(_options(), again, "batch 7")
    assert _values(broker) == sorted(f"v{i}".encode() for i in range(8))
    # the next batch is written as usual
    nxt = _task(_rows(1, 100), 0, batch=8, streaming=True)
    exactly_once.commit_all(_options(), [nxt], "batch 8")
    assert b"v100" in _values(broker)


def test_a_streaming_rerun_after_a_partial_commit_writes_only_the_missing_tasks(broker: FakeBroker) -> None:
    first = [_task(_rows(3, 3 * p), p, batch=2, streaming=True) for p in range(2)]
    exactly_once.commit_all(_options(), first[:1], "batch 2")  # the driver died after committing task 0 only
    again = [_task(_rows(3, 3 * p), p, batch=2, streaming=True) for p in range(2)]
    assert [t.already_committed for t in again] == [True, False]
    exactly_once.commit_all(_options(), again, "batch 2")
    assert _values(broker) == sorted(f"v{i}".encode() for i in range(6))


def test_decide_follows_the_option_and_the_broker(broker: FakeBroker) -> None:
    assert exactly_once.decide(_options()) is True
    assert exactly_once.decide(_options(exactlyOnce="false")) is False
    broker.two_phase_commit = None  # cannot tell: unset stays at-least-once, true tries
    assert exactly_once.decide(_options()) is False
    assert exactly_once.decide(_options(exactlyOnce="true")) is True
    broker.two_phase_commit = "false"
    assert exactly_once.decide(_options()) is False
    with pytest.raises(OptionError, match=r"has transaction\.two\.phase\.commit\.enable=false"):
        exactly_once.decide(_options(exactlyOnce="true"))
    broker.two_phase_commit = "true"
    broker.max_init_version = 5
    assert exactly_once.decide(_options()) is False
    with pytest.raises(OptionError, match="does not serve InitProducerId v6"):
        exactly_once.decide(_options(exactlyOnce="true"))
    with pytest.raises(OptionError, match=r"needs kafka\.acks=all"):
        exactly_once.decide(_options(exactlyOnce="true", **{"kafka.acks": "1"}))


def test_falling_back_to_at_least_once_is_a_warning_that_says_how_to_turn_exactly_once_on(
        broker: FakeBroker, caplog: pytest.LogCaptureFixture) -> None:
    # The README calls the sink exactly-once; a default broker has two-phase commit off, so an INFO line would
    # leave a user believing it. The warning names the key and where to set it.
    broker.two_phase_commit = "false"
    with caplog.at_level(logging.INFO, logger="pybroker.spark"):
        assert exactly_once.decide(_options()) is False
    [record] = [r for r in caplog.records if "at-least-once" in r.getMessage()]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "transaction.two.phase.commit.enable=false" in message
    assert "--override transaction.two.phase.commit.enable=true" in message
    assert "exactlyOnce=true" in message


def test_a_write_that_asked_for_at_least_once_warns_about_nothing(
        broker: FakeBroker, caplog: pytest.LogCaptureFixture) -> None:
    broker.two_phase_commit = "false"
    with caplog.at_level(logging.INFO, logger="pybroker.spark"):
        assert exactly_once.decide(_options(exactlyOnce="false")) is False
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_options_of_the_exactly_once_sink() -> None:
    options = _options(exactlyOnce="TRUE", transactionalIdPrefix="etl", **{"exactlyOnce.failOnceAfterWrite": "3"})
    assert (options.exactly_once, options.transactional_id_prefix, options.fail_once_after_write) == (True, "etl", 3)
    assert _options().exactly_once is None
    with pytest.raises(OptionError, match="'exactlyOnce' must be true or false"):
        _options(exactlyOnce="maybe")
    with pytest.raises(OptionError, match="transactionalIdPrefix"):
        _options(transactionalIdPrefix=" ")
    with pytest.raises(OptionError, match="gives each task its own transactional id"):
        _options(**{"kafka.transactional.id": "x"})


def test_readers_default_to_read_committed() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert parse_read_options(base, streaming=False).consumer_config["isolation_level"] == "read_committed"
    chosen = parse_read_options({**base, "kafka.isolation.level": "read_uncommitted"}, streaming=True)
    assert chosen.consumer_config["isolation_level"] == "read_uncommitted"
