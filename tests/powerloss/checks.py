"""What must hold after every power cut and restart, checked against the campaign's `Ledger`.

`check_after_restart` reads everything back from the restarted broker with stock clients and returns a
`Findings`: per kind, how much was acknowledged and how much of that was lost, and every violation as a
line. The rules:

- every acks=all record is there at its acknowledged offset, with its value (pl-idem; pl-compact unless a
  later record of the same key replaced it; pl-retain unless retention moved the log start past it);
- no value twice (the idempotent producer's resends after the restart were recognised);
- every acknowledged transaction is visible whole to read_committed, and no transaction partly;
- every acknowledged offset commit survives (the committed offset is at least the acknowledged one and
  one that was sent);
- every acknowledged topic creation survives and every acknowledged deletion stays deleted;
- each pl-idem partition lives in exactly one log dir;
- the broker's output since its start has no traceback and no error line;
- acks=1 losses are counted, not judged (the harness must see some over a campaign).

`check_log` runs `pybroker check-log` over each log dir of a stopped broker. Called from the campaign's
thread only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient

from pybroker.clients.admin import cluster as cluster_ops
from pybroker.clients.wire import WireClient
from tests.integration.clients import ck_consumer
from tests.powerloss.workload import (
    ACKS1,
    CHURN_PREFIX,
    CK,
    COMPACT,
    GROUP,
    IDEM,
    PARTITIONS,
    RETAIN,
    TXN,
    Ledger,
)

READ_S = 60.0
SHOWN = 5

Read = dict[tuple[int, int], tuple[bytes | None, bytes]]  # (partition, offset) -> (key, value)


@dataclass
class Findings:
    """Acknowledged and lost per kind, and the violations (empty when everything held)."""

    acknowledged: Counter[str] = field(default_factory=Counter)
    lost: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def violate(self, kind: str, what: list[str] | str) -> None:
        items = [what] if isinstance(what, str) else what
        if items:
            self.violations.append(f"{kind}: {len(items)} x {', '.join(map(str, items[:SHOWN]))}")


def read_topic(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> tuple[Read, dict[int, int]]:
    """Every record of every partition from its log start to its end, and each partition's log start."""
    partitions = PARTITIONS[topic]
    have: Read = {}
    starts: dict[int, int] = {}
    with ck_consumer(bootstrap, **{"isolation.level": isolation, "log_level": 2}) as consumer:
        for p in range(partitions):
            starts[p] = consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)[0]
        consumer.assign([CkTopicPartition(topic, p, starts[p]) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + READ_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic}: no end of partitions {set(range(partitions)) - at_end}"
            for message in consumer.consume(num_messages=2000, timeout=0.3):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(message.partition())
                    continue
                at_end.discard(message.partition())
                have[(message.partition(), message.offset())] = (message.key(), message.value())
    return have, starts


def _duplicates(have: Read) -> list[str]:
    counts = Counter(value for _, value in have.values())
    return [value.decode(errors="replace")[:40] for value, n in counts.items() if n > 1]


def check_after_restart(bootstrap: str, ledger: Ledger, broker_output: str) -> Findings:
    findings = Findings()
    with ledger.lock:
        findings.violations += ledger.problems
        ledger.problems.clear()
        acked = {topic: dict(records) for topic, records in ledger.acked.items()}
        somewhere = set(ledger.acked_without_offset[IDEM])
        acks1 = dict(ledger.acks1)
        committed = dict(ledger.txn_committed)
        begun = dict(ledger.txn_begun)
        commits, sent = dict(ledger.commits), {p: set(v) for p, v in ledger.commits_sent.items()}
        commit_acks = ledger.commit_acks
        created, deleted, delete_asked = set(ledger.created), set(ledger.deleted), set(ledger.delete_asked)
    lost_records = _check_records(bootstrap, acked, somewhere, findings)
    lost_acks1 = _check_acks1(bootstrap, acks1, findings)
    lost_txns = _check_transactions(bootstrap, committed, begun, findings)
    lost_commits = _check_commits(bootstrap, commits, sent, commit_acks, findings)
    missing, back = _check_topics(bootstrap, created, deleted, delete_asked, findings)
    _check_log_dirs(bootstrap, findings)
    _check_output(broker_output, findings)
    with ledger.lock:  # each loss is counted once: what was found lost leaves the ledger
        for topic, keys in lost_records.items():
            for key in keys:
                ledger.acked[topic].pop(key, None)
        for key in lost_acks1:
            ledger.acks1.pop(key, None)
        for number in lost_txns:
            ledger.txn_committed.pop(number, None)
        for partition in lost_commits:
            ledger.commits.pop(partition, None)
        ledger.created -= set(missing)
        ledger.deleted -= set(back)
        for kind, n in findings.lost.items():
            findings.acknowledged[kind] += ledger.dropped[kind]
            ledger.dropped[kind] += n
    return findings


def _check_records(bootstrap: str, acked: dict[str, Read], somewhere: set[bytes],
                   findings: Findings) -> dict[str, list[tuple[int, int]]]:
    lost_keys: dict[str, list[tuple[int, int]]] = {}
    for topic in (IDEM, COMPACT, RETAIN):
        records = acked.get(topic, {})
        have, starts = read_topic(bootstrap, topic)
        findings.acknowledged[topic] += len(records)
        findings.violate(f"{topic} duplicates", _duplicates(have))
        if topic == IDEM:
            values = {value for _, value in have.values()}
            findings.acknowledged["pl-idem without an offset"] = len(somewhere)
            findings.violate(f"{IDEM} acknowledged without an offset, and not there",
                             sorted(v.decode(errors="replace")[:30] for v in somewhere - values))
        later_keys: dict[tuple[int, bytes | None], int] = {}
        for (p, offset), (key, _) in have.items():
            later_keys[(p, key)] = max(later_keys.get((p, key), -1), offset)
        lost = []
        for (p, offset), (key, value) in sorted(records.items(), key=lambda item: item[0]):
            got = have.get((p, offset))
            if got == (key, value):
                continue
            if got is None and topic == RETAIN and offset < starts[p]:
                continue  # retention deleted it
            if got is None and topic == COMPACT and later_keys.get((p, key), -1) > offset:
                continue  # a later record of its key replaced it
            lost.append((p, offset))
        lost_keys[topic] = lost
        findings.lost[topic] += len(lost)
        findings.violate(f"{topic} acknowledged records lost (partition, offset)", lost)
    return lost_keys


def _check_acks1(bootstrap: str, acks1: dict[tuple[int, int], bytes], findings: Findings) -> list[tuple[int, int]]:
    have, _ = read_topic(bootstrap, ACKS1)
    findings.acknowledged[ACKS1] += len(acks1)
    lost = [key for key, value in acks1.items() if have.get(key, (None, b""))[1] != value]
    findings.lost[ACKS1] += len(lost)
    return lost


def _check_transactions(bootstrap: str, committed: dict[int, set[bytes]], begun: dict[int, set[bytes]],
                        findings: Findings) -> list[int]:
    have, _ = read_topic(bootstrap, TXN, "read_committed")
    visible: dict[int, set[bytes]] = defaultdict(set)
    for _, value in have.values():
        visible[int(value.split(b":")[1])].add(value)
    findings.acknowledged["transactions"] += len(committed)
    lost = [n for n, values in sorted(committed.items()) if visible.get(n) != values]
    findings.lost["transactions"] += len(lost)
    findings.violate("acknowledged transactions lost or partial", lost)
    partial = [n for n, values in sorted(visible.items()) if values != begun.get(n)]
    findings.violate("transactions visible in part", partial)
    findings.violate(f"{TXN} duplicates", _duplicates(have))
    return lost


def _check_commits(bootstrap: str, commits: dict[int, int], sent: dict[int, set[int]], acks: int,
                   findings: Findings) -> list[int]:
    with ck_consumer(bootstrap, **{"group.id": GROUP, "log_level": 2}) as consumer:
        got = {tp.partition: tp.offset for tp in consumer.committed(
            [CkTopicPartition(IDEM, p) for p in range(PARTITIONS[IDEM])], timeout=15)}
    findings.acknowledged["offset commits"] += acks
    behind = [p for p, offset in sorted(commits.items()) if got.get(p, -1) < offset]
    bad = [f"{p}: {got.get(p)} < acknowledged {commits[p]}" for p in behind]
    bad += [f"{p}: {offset} never sent" for p, offset in sorted(got.items())
            if offset >= 0 and offset not in sent.get(p, set())]
    findings.lost["offset commits"] += len(bad)
    findings.violate("offset commits", bad)
    return behind


def _check_topics(bootstrap: str, created: set[str], deleted: set[str], delete_asked: set[str],
                  findings: Findings) -> tuple[list[str], list[str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **CK})
    names = {t for t in admin.list_topics(timeout=15).topics if t.startswith(CHURN_PREFIX)}
    findings.acknowledged["topic creations"] += len(created)
    findings.acknowledged["topic deletions"] += len(deleted)
    missing = sorted(created - delete_asked - names)
    back = sorted(deleted & names)
    findings.lost["topic creations"] += len(missing)
    findings.lost["topic deletions"] += len(back)
    findings.violate("acknowledged topic creations lost", missing)
    findings.violate("acknowledged topic deletions undone", back)
    return missing, back


def _check_log_dirs(bootstrap: str, findings: Findings) -> None:
    with WireClient(bootstrap, 10) as client:
        homes = Counter(p["partition"] for d in cluster_ops.log_dirs(client, [IDEM]) for p in d["partitions"]
                        if not p["future"])
    findings.violate(f"{IDEM} partitions not in exactly one log dir",
                     [f"{p}: {homes.get(p, 0)}" for p in range(PARTITIONS[IDEM]) if homes.get(p, 0) != 1])


def _check_output(output: str, findings: Findings) -> None:
    bad = []
    for line in output.splitlines():
        if "Traceback" in line:
            bad.append(line[:200])
            continue
        if line.startswith("{"):
            try:
                level = json.loads(line).get("level")
            except ValueError:
                continue
            if level in ("error", "critical"):
                bad.append(line[:300])
    findings.violate("broker output errors", bad)


def check_log(log_dirs: list[Path]) -> list[str]:
    """`pybroker check-log` over each dir of a stopped broker: the problems it printed, if it failed."""
    problems = []
    for directory in log_dirs:
        done = subprocess.run([sys.executable, "-m", "pybroker.broker.cli", "check-log", str(directory)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            problems.append(f"check-log {directory.name}: {(done.stdout + done.stderr).strip()[-600:]}")
    return problems
