"""What differs between pybroker's and Kafka's output of a tool for reasons that are not defects.

Each rule is (pattern, replacement, why). Both outputs go through the same table before they are compared,
so a rule can only hide what it names: addresses and ports, ids and times that are random or clock-bound,
and the log dir's path.
"""

from __future__ import annotations

import re

RULES: tuple[tuple[str, str, str], ...] = (
    (r"(?m)^\[[0-9.]+s\]\[(?:warning|info)\]\[[^\]]*\] .*\n", "",
     "the JVM's own unified-logging lines (a clash over a /tmp file with another JVM, ...) are not the tool's"),
    (r"127\.0\.0\.1:\d+", "<host:port>", "each broker listens on a port of its own"),
    (r"TopicId: \S+", "TopicId: <id>", "topic ids are random"),
    (r'"logDir":"[^"]*"', '"logDir":"<dir>"', "each broker has a log dir of its own"),
    (r'"size":\d+', '"size":<n>', "a batch's size depends on its timestamps' deltas"),
    (r'"log_dirs":\["(?!any)[^"]*"', '"log_dirs":["<dir>"', "each broker has a log dir of its own"),
    # Kafka 4.4 turns eligible leader replicas on in a new cluster and with it writes a cluster-level
    # min.insync.replicas, which shows among a topic's and the brokers' non-default configs; one pybroker
    # node has no ELR (docs/kafka-tools.md)
    (r"\n  min\.insync\.replicas=1 sensitive=false synonyms=\{[^}]*\}", "",
     "Kafka's cluster-level min.insync.replicas (ELR on)"),
    (r"min\.insync\.replicas=1,", "", "Kafka's cluster-level min.insync.replicas (ELR on)"),
    (r",?min\.insync\.replicas=1(?=\s|$)", "", "Kafka's cluster-level min.insync.replicas (ELR on)"),
)
_COMPILED = [(re.compile(pattern), replacement) for pattern, replacement, _ in RULES]


def normalize(text: str) -> str:
    for pattern, replacement in _COMPILED:
        text = pattern.sub(replacement, text)
    return text


def without_synonyms(text: str) -> str:
    """kafka-configs' lines without their synonym lists: which broker defaults Kafka lists as a topic key's
    synonyms differs in places (docs/kafka-tools.md), the values and sources do not."""
    return re.sub(r" synonyms=\{[^}]*\}", "", normalize(text))
