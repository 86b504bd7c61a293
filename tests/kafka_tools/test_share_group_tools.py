"""Kafka's share group tools against pybroker, each compared with the same tool's output against Kafka:
`kafka-configs --entity-type groups` (the group starts at the earliest offset), `kafka-console-share-consumer`
(reads every record), and `kafka-share-groups` --list, --describe (offsets, state, members), --reset-offsets,
--delete-offsets and --delete.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.kafka_tools.normalize import normalize
from tests.kafka_tools.runner import BOOTSTRAP as B
from tests.kafka_tools.runner import Targets

Names = Callable[[str], str]
COUNT = 10


def _share(text: str) -> str:
    """Member and client ids are random, the coordinator's address is the broker's; columns are padded."""
    text = re.sub(r"[A-Za-z0-9_-]{22}", "<id>", normalize(text))
    text = re.sub(r"/127\.0\.0\.1", "<host>", text)
    return re.sub(r"[ \t]+", " ", text)


def _start_masked(text: str) -> str:
    """Kafka 4.4 shows a start offset of 0 (lag 0) right after all records were acknowledged: its persisted
    state moves the start offset later; ours moves it with the acknowledgement (docs/kafka-tools.md)."""
    return re.sub(r"^(\S+ \S+ \d+ )\d+", r"\1<start>", _share(text), flags=re.MULTILINE)


def test_kafka_share_groups(targets: Targets, names: Names) -> None:
    topic, group = names("t"), names("g")
    targets.same("kafka-topics", "--bootstrap-server", B, "--create", "--topic", topic, "--partitions", "1",
                 normalize=normalize)
    targets.same("kafka-console-producer", "--bootstrap-server", B, "--topic", topic,
                 stdin="".join(f"v{i}\n" for i in range(COUNT)))
    for bad in ("by_duration:P1W", "by_duration:-PT1H", "none"):  # refused with Kafka's message
        mine, theirs = targets.both("kafka-configs", "--bootstrap-server", B, "--alter", "--entity-type", "groups",
                                    "--entity-name", group, "--add-config", f"share.auto.offset.reset={bad}")
        said = [[line for line in r.errors() if line.startswith("Caused by")] for r in (mine, theirs)]
        assert mine.code == theirs.code == 1 and said[0] == said[1] and len(said[0]) == 1, (mine, theirs)
    targets.same("kafka-configs", "--bootstrap-server", B, "--alter", "--entity-type", "groups", "--entity-name",
                 group, "--add-config", "share.auto.offset.reset=by_duration:P1DT2H")
    targets.same("kafka-configs", "--bootstrap-server", B, "--alter", "--entity-type", "groups", "--entity-name",
                 group, "--add-config", "share.auto.offset.reset=earliest")
    mine, theirs = targets.both("kafka-console-share-consumer", "--bootstrap-server", B, "--topic", topic,
                                "--group", group, "--max-messages", str(COUNT))
    assert sorted(mine.lines) == sorted(theirs.lines) == sorted(f"v{i}" for i in range(COUNT))
    mine, _ = targets.both("kafka-share-groups", "--bootstrap-server", B, "--list")
    assert group in mine.lines
    g = ["--bootstrap-server", B, "--group", group]
    mine, _ = targets.same("kafka-share-groups", *g, "--describe", normalize=_start_masked)
    assert re.search(rf"{topic}\s+0\s+{COUNT}\s+0\s*$", mine.stdout, re.MULTILINE), mine.stdout
    targets.same("kafka-share-groups", *g, "--describe", "--state", normalize=_share)
    targets.same("kafka-share-groups", *g, "--describe", "--members", normalize=_share)
    targets.same("kafka-share-groups", *g, "--reset-offsets", "--topic", topic, "--to-earliest", "--execute",
                 normalize=_share)
    targets.same("kafka-share-groups", *g, "--describe", normalize=_share)  # both at 0 after the reset
    targets.same("kafka-share-groups", *g, "--delete-offsets", "--topic", topic, normalize=_share)
    targets.same("kafka-share-groups", *g, "--delete", normalize=_share)
    mine, theirs = targets.both("kafka-share-groups", "--bootstrap-server", B, "--list")
    assert group not in mine.lines and group not in theirs.lines
