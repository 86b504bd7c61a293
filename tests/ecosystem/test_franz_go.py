"""franz-go against pybroker: an exactly-once ETL on kgo's GroupTransactSession (`go/eos/main.go`) through a
killed instance and a killed broker, and franz-go's own integration tests (pkg/kgo) run at the pinned tag.

The ETL: two instances (distinct transactional ids) share a 4-partition input topic in one group; each
transaction produces "etl:<value>" per consumed record and commits the consumed offsets with it. One instance
is killed with SIGKILL mid-run and restarted on its transactional id, the broker is killed with SIGKILL and
restarted; at the end the output, read with read_committed, must hold each input value exactly once.

franz-go's suite (kgo's *_test.go; kadm's tests are unit tests only and never reach a broker; kfake's are
franz-go's fake broker and excluded): the subset in FAST_SUBSET runs in `make test`; PYBROKER_FRANZ_GO_FULL=1
runs every test of pkg/kgo against a fresh broker (about 1.5 minutes here; what does not pass is named in
KNOWN_NOT_PASSING and docs/testing.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.ecosystem.golang import BUILD_TIMEOUT_S, FRANZ_GO, build, go_env, module_copy, need_go
from tests.integration.brokers import BrokerProcess

PARTITIONS = 4
RECORDS_PER_ROUND = 1500
DEADLINE_S = 300.0


@pytest.fixture(scope="session")
def eos_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`go/eos`, built once for the session."""
    return build("eos", tmp_path_factory.mktemp("go-bin") / "eos")




class Etl:
    """One `eos` process; its stdout (ASSIGNED / COMMITTED n / ABORTED n lines) goes to a file per run."""

    def __init__(self, binary: Path, bootstrap: str, prefix: str, txn_id: str, out: Path) -> None:
        self.command = [str(binary), "-brokers", bootstrap, "-group", f"{prefix}-group", "-in", f"{prefix}-in",
                        "-out", f"{prefix}-out", "-txn-id", txn_id, "-batch", "40", "-pause", "20ms"]
        self.out = out
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.out.open("ab") as out:
            out.write(b"=== start\n")
            out.flush()
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)

    def kill9(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def terminate(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"eos did not leave on SIGTERM:\n{self.tail()}") from None

    def committed(self) -> int:
        """Records this instance committed, over all its runs."""
        return sum(int(n) for n in re.findall(r"^COMMITTED (\d+)$", self.out.read_text(), re.M))

    def tail(self) -> str:
        return self.out.read_text(errors="replace")[-3000:]


def _wait(what: str, done: object, deadline: float, etls: list[Etl]) -> None:
    while not done():  # type: ignore[operator]
        for etl in etls:
            assert etl.process is not None and etl.process.poll() is None, f"eos exited:\n{etl.tail()}"
        assert time.monotonic() < deadline, f"{what} not in time:\n" + "\n".join(e.tail() for e in etls)
        time.sleep(0.2)


def _committed_output(bootstrap: str, topic: str) -> list[str]:
    """Every value of `topic`, read_committed, to the end of each partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True, "log_level": 3})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values: list[str] = []
        ended: set[int] = set()
        deadline = time.monotonic() + 120
        while len(ended) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic} not read to its end; {len(values)} values"
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                    continue
                raise AssertionError(message.error())
            ended.discard(message.partition())
            values.append(message.value().decode())
        return values
    finally:
        consumer.close()


def _group_lag(bootstrap: str, group: str, topic: str) -> int:
    """Input records the group has not committed past (offsets committed by a transaction count once it ends)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "log_level": 3})
    try:
        lag = 0
        for tp in consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30):
            _, high = consumer.get_watermark_offsets(tp, timeout=30)
            lag += high - max(tp.offset, 0)
        return lag
    finally:
        consumer.close()


def test_group_transact_session_is_exactly_once_through_a_killed_instance_and_a_killed_broker(
        eos_binary: Path, fresh_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = fresh_broker.bootstrap
    prefix = f"eos-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(f"{prefix}-in", PARTITIONS, 1),
                                       NewTopic(f"{prefix}-out", PARTITIONS, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    sent: list[str] = []

    def send_round() -> None:
        for _ in range(RECORDS_PER_ROUND):
            value = f"rec-{len(sent):05d}"
            producer.produce(f"{prefix}-in", key=value, value=value)
            sent.append(value)
        assert producer.flush(60) == 0

    etls = [Etl(eos_binary, bootstrap, prefix, f"{prefix}-txn-{i}", tmp_path / f"eos{i}.out") for i in (0, 1)]
    deadline = time.monotonic() + DEADLINE_S
    send_round()
    for etl in etls:
        etl.start()
    try:
        total = lambda: sum(etl.committed() for etl in etls)  # noqa: E731
        # both in the group and well into the first round: one dies inside a transaction and comes back
        _wait("both instances committing", lambda: all(e.committed() > 0 for e in etls), deadline, etls)
        _wait("a third of the first round", lambda: total() >= RECORDS_PER_ROUND // 3, deadline, etls)
        etls[0].kill9()
        etls[0].start()
        send_round()
        # the broker dies mid-stream (open transactions, group state, offsets in flight); the instances ride it out
        _wait("the first round", lambda: total() >= RECORDS_PER_ROUND, deadline, etls)
        fresh_broker.restart(kill=True)
        send_round()
        _wait("the group past every input record",
              lambda: _group_lag(bootstrap, f"{prefix}-group", f"{prefix}-in") == 0, deadline, etls)
        for etl in etls:
            etl.terminate()
        values = _committed_output(bootstrap, f"{prefix}-out")
        counts = Counter(values)
        twice = sorted(v for v, n in counts.items() if n > 1)
        lost = sorted(set(f"etl:{v}" for v in sent) - set(counts))
        assert not twice and not lost, f"duplicated {twice[:10]} ({len(twice)}), lost {lost[:10]} ({len(lost)})"
        assert len(values) == len(sent) == 3 * RECORDS_PER_ROUND
        # the kill and the restart showed: something was aborted or re-assigned, and nothing was logged as a crash
        assert sum(etl.out.read_text().count("ASSIGNED") for etl in etls) >= 3
        assert "Traceback" not in fresh_broker.log_path.read_text(errors="replace")
    finally:
        for etl in etls:
            etl.kill9()


# -- franz-go's own tests ---------------------------------------------------------------------------------

#: pkg/kgo tests that speak to the broker, pass against pybroker, and together take about a minute here:
#: produce (large records, purges, manual partitions), consume (regex, pause/resume, offsets, a fetch larger
#: than the broker's max, decompression limits), classic and KIP-848 groups, and the two ETLs (group and
#: transactional, every balancer, static members, classic and KIP-848), at KGO_TEST_RECORDS records each
FAST_SUBSET = ("TestGroupETL", "TestTxnEtl", "TestGroupSimple", "TestConsumeRegex", "TestIssue325",
               "TestIssue434", "TestPauseIssue489", "TestPauseIssueOct2023", "TestIssue769", "TestIssue810",
               "TestIssue831", "TestIssue865", "TestDirectPartitionPurge", "TestAddRemovePartitions",
               "TestIssueFetchLargerThanBrokerMaxReadBytes", "TestClient_ProduceLargeMessages",
               "TestUnknownGroupOffsetFetchPinned", "TestIssue1505", "TestConsumeMaxDecompressBatchBytes",
               "Test848RegexBrokerResolves", "TestPing", "TestSCRAMAuth", "TestSCRAMAuthBadCredentials",
               # share groups (KIP-932): a consumer, acknowledgements sent on close, the share-group offsets
               # admin calls and a regex subscription that skips internal topics (about 13 s together)
               "TestShareGroup", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin",
               "TestConsumeRegexShareSkipsInternal")
FAST_RECORDS = 3000
#: what the full run (PYBROKER_FRANZ_GO_FULL=1) gives that is not a pass, and why (measured: 151 top-level
#: tests pass, 2 skip; about 1.5 minutes here with KGO_TEST_RECORDS=20000)
KNOWN_NOT_PASSING = {
    "TestIssueProduceBrokerTooOldFailsRecords": "SKIP: Produce v0-2 stay advertised (librdkafka needs them; "
                                                "docs/skipped-features.md), so the test has no broker to try",
    "TestOAuthAuth": "SKIP: needs KGO_TEST_OAUTH_SEEDS, a listener whose OAUTHBEARER tokens its own issuer signs",
}
#: the broker as franz-go's CI runs Kafka for these tests: topics auto-created, no initial rebalance delay; and a
#: SASL_PLAINTEXT listener with SCRAM for its SCRAM tests (KGO_TEST_SCRAM_SEEDS, KGO_TEST_SCRAM)
SUITE_OVERRIDES = {"auto.create.topics.enable": "true", "group.initial.rebalance.delay.ms": "0",
                   "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}
SCRAM_USER, SCRAM_PASSWORD = "franz", "franz-Pw-5e1d2c"


@contextlib.contextmanager
def suite_broker(workdir: Path) -> Iterator[BrokerProcess]:
    """A fresh broker for franz-go's tests, with the SCRAM user (SHA-512) its SCRAM tests log in as."""
    broker = BrokerProcess(workdir, SUITE_OVERRIDES, extra_listeners=["SASL_PLAINTEXT"])
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        upsert = UserScramCredentialUpsertion(SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              SCRAM_PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            assert future.result(timeout=30) is None
        yield broker
        assert "Traceback" not in broker.log_path.read_text(errors="replace")
        assert SCRAM_PASSWORD not in broker.log_path.read_text(errors="replace")
    finally:
        broker.close()


@pytest.fixture(scope="module")
def franz_go_tests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pkg/kgo's test binary, compiled once from a writable copy of the pinned franz-go (-trimpath: the
    build cache then serves a later copy in another temporary dir)."""
    go = need_go()
    source = module_copy(FRANZ_GO, tmp_path_factory.mktemp("franz-go") / "franz-go")
    binary = source / "kgo.test"
    done = subprocess.run([go, "test", "-c", "-trimpath", "-o", str(binary), "./pkg/kgo"], cwd=source,
                          env=go_env(), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-4000:]
    return binary


def _run_suite(binary: Path, broker: BrokerProcess, pattern: str, records: int, timeout_s: float,
               log: Path) -> dict[str, str]:
    """Run the kgo tests matching `pattern` against `broker`; {test name: PASS|FAIL|SKIP} for the top-level
    tests (their output in `log`). It runs in the package's dir, as `go test` does (a test parses config.go)."""
    env = go_env() | {"KGO_SEEDS": broker.bootstrap, "KGO_TEST_RF": "1", "KGO_TEST_RECORDS": str(records),
                      "KGO_LOG_LEVEL": "none", "KGO_TEST_SCRAM_SEEDS": broker.bootstrap_of("SASL_PLAINTEXT"),
                      "KGO_TEST_SCRAM": f"{SCRAM_USER}:{SCRAM_PASSWORD}:512"}
    with log.open("wb") as out:
        done = subprocess.run([str(binary), "-test.v", "-test.count=1", f"-test.timeout={int(timeout_s)}s",
                               "-test.run", pattern], cwd=binary.parent / "pkg" / "kgo", env=env, stdout=out,
                              stderr=subprocess.STDOUT, timeout=timeout_s + 60)
    text = log.read_text(errors="replace")
    results = {name: verdict for verdict, name in re.findall(r"^--- (PASS|FAIL|SKIP): (\w+)", text, re.M)}
    if done.returncode != 0 and not any(v == "FAIL" for v in results.values()):
        results["(run)"] = f"FAIL: exit {done.returncode}\n{text[-3000:]}"
    return results


def test_franz_go_kgo_suite_subset(franz_go_tests: Path, tmp_path: Path) -> None:
    with suite_broker(tmp_path / "broker") as broker:
        pattern = "^(" + "|".join(FAST_SUBSET) + ")$"
        results = _run_suite(franz_go_tests, broker, pattern, FAST_RECORDS, 600, tmp_path / "kgo.log")
        failed = {name: verdict for name, verdict in results.items() if verdict != "PASS"}
        assert not failed, (failed, (tmp_path / "kgo.log").read_text(errors="replace")[-6000:])
        assert set(results) == set(FAST_SUBSET)


@pytest.mark.skipif(not os.environ.get("PYBROKER_FRANZ_GO_FULL"),
                    reason="the whole of pkg/kgo's suite (about 1.5 minutes here): PYBROKER_FRANZ_GO_FULL=1 runs it")
def test_franz_go_kgo_suite_full(franz_go_tests: Path, tmp_path: Path) -> None:
    with suite_broker(tmp_path / "broker") as broker:
        results = _run_suite(franz_go_tests, broker, "^Test", 20000, 1800, tmp_path / "kgo.log")
        print("franz-go pkg/kgo:", Counter(results.values()))
        unexpected = {name: verdict for name, verdict in results.items()
                      if verdict != "PASS" and KNOWN_NOT_PASSING.get(name, "").split(":")[0] != verdict}
        assert not unexpected, (unexpected, (tmp_path / "kgo.log").read_text(errors="replace")[-6000:])
