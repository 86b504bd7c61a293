"""A streams group's topology as the coordinator holds it, its validation, and its configuration against
the topics that exist (Kafka's InternalTopicManager).

A topology is what the first member (epoch 0) sent: subtopologies, each reading source topics and
repartition source topics, writing repartition sink topics and keeping state in changelog topics. It is
plain frozen data, so it compares by value (a member joining with the same epoch must send the same one)
and is written as one record (`records.topology_record`).

`configure` answers, for a topic table, what the group can run: the number of tasks of each subtopology
(the most partitions among its source and repartition source topics), the internal topics to create
(repartition topics with the partitions the topology or its upstream subtopologies give them; changelog
topics with one partition per task), and the statuses Kafka reports (missing source topics, missing
internal topics, incorrectly partitioned topics). Pure functions; any thread, though the coordinator
calls them on the event loop.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

#: caps on what one topology may make the broker hold (Kafka has none this small, and needs none larger)
MAX_SUBTOPOLOGIES = 1_000
MAX_TOPICS_PER_SUBTOPOLOGY = 1_000
MAX_TOPIC_CONFIGS = 200
MAX_TASKS = 100_000
#: internal topics (repartition and changelog) one topology may have the broker create
MAX_INTERNAL_TOPICS = 1_000
MAX_NAME_CHARS = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


class StatusCode(IntEnum):
    """The group statuses of StreamsGroupHeartbeat's answer (Kafka's codes)."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    #: (source topic indexes, regex indexes, repartition source indexes) per copartition group
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


class InvalidTopology(Exception):
    """STREAMS_INVALID_TOPOLOGY (or INVALID_REQUEST for a topology over the caps), with Kafka's kind of message."""


def validate(topology: Topology) -> None:
    """Raise `InvalidTopology` for a topology that cannot be run or is larger than the caps."""
    if len(topology.subtopologies) > MAX_SUBTOPOLOGIES:
        raise InvalidTopology(f"At most {MAX_SUBTOPOLOGIES} subtopologies.")
    internal = {t.name for sub in topology.subtopologies
                for t in (*sub.state_changelog_topics, *sub.repartition_source_topics)}
    if len(internal) > MAX_INTERNAL_TOPICS:
        raise InvalidTopology(f"At most {MAX_INTERNAL_TOPICS} internal topics.")
    reserved = sorted(name for name in internal if name.startswith("__"))
    if reserved:  # the broker's own topics (__consumer_offsets, ...) are never a topology's to make
        raise InvalidTopology(f"Internal topic names may not start with '__': {', '.join(reserved[:5])}.")
    seen: set[str] = set()
    for sub in topology.subtopologies:
        if not sub.subtopology_id:
            raise InvalidTopology("Subtopology IDs must be non-empty.")
        if sub.subtopology_id in seen:
            raise InvalidTopology(f"Duplicate subtopology ID {sub.subtopology_id}.")
        seen.add(sub.subtopology_id)
        topics = (*sub.source_topics, *sub.repartition_sink_topics,
                  *(t.name for t in sub.state_changelog_topics), *(t.name for t in sub.repartition_source_topics))
        if len(topics) + len(sub.source_topic_regex) > MAX_TOPICS_PER_SUBTOPOLOGY:
            raise InvalidTopology(f"At most {MAX_TOPICS_PER_SUBTOPOLOGY} topics per subtopology.")
        for name in topics:
            if not name or len(name) > MAX_NAME_CHARS or not _LEGAL_TOPIC.fullmatch(name) or name in (".", ".."):
                raise InvalidTopology(f"Topic name {name[:64]!r} is invalid.")
        for info in (*sub.state_changelog_topics, *sub.repartition_source_topics):
            if info.partitions < 0:
                raise InvalidTopology(f"Topic {info.name} has a negative partition count.")
            if len(info.configs) > MAX_TOPIC_CONFIGS:
                raise InvalidTopology(f"At most {MAX_TOPIC_CONFIGS} configs per topic.")
        for sources, regexes, repartitions in sub.copartition_groups:
            if any(not 0 <= i < len(sub.source_topics) for i in sources) or \
                    any(not 0 <= i < len(sub.source_topic_regex) for i in regexes) or \
                    any(not 0 <= i < len(sub.repartition_source_topics) for i in repartitions):
                raise InvalidTopology(f"Copartition group of subtopology {sub.subtopology_id} names a topic "
                                      "that is not in the subtopology.")


@dataclass(frozen=True, slots=True)
class Status:
    code: StatusCode
    detail: str


@dataclass(frozen=True, slots=True)
class Configured:
    """What the group can run against one topic table."""

    #: subtopology id -> its number of tasks (empty when the topology is not ready)
    tasks: dict[str, int] = field(default_factory=dict)
    #: internal topics to create: name -> (partitions, configs, replication factor)
    to_create: dict[str, tuple[int, dict[str, str], int]] = field(default_factory=dict)
    statuses: tuple[Status, ...] = ()
    #: the internal topics with the partitions they must have (for StreamsGroupDescribe)
    partitions: dict[str, int] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return not self.statuses


def _sources_of(sub: Subtopology, topics: Mapping[str, int]) -> list[str]:
    names = list(sub.source_topics)
    for pattern in sub.source_topic_regex:
        try:
            regex = re.compile(pattern)
        except re.error:
            continue
        names += sorted(t for t in topics if regex.fullmatch(t) and not t.startswith("__"))
    return names


def configure(topology: Topology, topics: Mapping[str, int]) -> Configured:
    """The tasks, the internal topics to create and the statuses for the topic table `topics` (name ->
    partition count)."""
    missing_sources: list[str] = []
    sources = {sub.subtopology_id: _sources_of(sub, topics) for sub in topology.subtopologies}
    for sub in topology.subtopologies:
        missing_sources += [t for t in sub.source_topics if t not in topics]
        if sub.source_topic_regex and not sources[sub.subtopology_id] and not sub.source_topics:
            missing_sources += list(sub.source_topic_regex)
    if missing_sources:
        return Configured(statuses=(Status(StatusCode.MISSING_SOURCE_TOPICS,
                                           f"Source topics {', '.join(sorted(set(missing_sources)))} are missing."),))
    # repartition topics: the count the topology gives, else the most of its writers' inputs (iterated:
    # a writer may itself read a repartition topic)
    repartition: dict[str, int] = {}
    for sub in topology.subtopologies:
        for info in sub.repartition_source_topics:
            if info.partitions > 0:
                repartition[info.name] = info.partitions
    for _ in range(len(topology.subtopologies) + 1):
        changed = False
        for sub in topology.subtopologies:
            counts = [topics[t] for t in sources[sub.subtopology_id] if t in topics]
            counts += [repartition[t.name] for t in sub.repartition_source_topics if t.name in repartition]
            if not counts:
                continue
            for sink in sub.repartition_sink_topics:
                if sink not in repartition or (repartition[sink] < max(counts) and not _fixed(topology, sink)):
                    repartition[sink] = max(counts)
                    changed = True
        if not changed:
            break
    statuses: list[Status] = []
    tasks: dict[str, int] = {}
    partitions: dict[str, int] = dict(repartition)
    wrong: list[str] = []
    for sub in topology.subtopologies:
        # copartitioned repartition topics take the count of their group's largest member
        for group_sources, _regexes, group_repartitions in sub.copartition_groups:
            names = [sub.source_topics[i] for i in group_sources]
            group_counts = {topics[n] for n in names if n in topics}
            if len(group_counts) > 1:
                wrong += names
            if group_counts:
                for i in group_repartitions:
                    name = sub.repartition_source_topics[i].name
                    if not _fixed(topology, name):
                        partitions[name] = repartition[name] = max(group_counts)
        counts = [topics[t] for t in sources[sub.subtopology_id] if t in topics]
        counts += [repartition.get(t.name, 0) for t in sub.repartition_source_topics]
        count = max(counts, default=0)
        if count <= 0:
            continue
        tasks[sub.subtopology_id] = count
        for info in sub.state_changelog_topics:
            partitions[info.name] = count
    to_create: dict[str, tuple[int, dict[str, str], int]] = {}
    infos = {info.name: info for sub in topology.subtopologies
             for info in (*sub.state_changelog_topics, *sub.repartition_source_topics)}
    for name, count in sorted(partitions.items()):
        if name in topics:
            if topics[name] != count:
                wrong.append(name)
            continue
        found = infos.get(name)
        to_create[name] = (count, dict(found.configs) if found else {}, found.replication_factor if found else 0)
    if sum(tasks.values()) > MAX_TASKS:
        return Configured(statuses=(Status(StatusCode.INCORRECTLY_PARTITIONED_TOPICS,
                                           f"The topology has more than {MAX_TASKS} tasks."),), partitions=partitions)
    if wrong:
        statuses.append(Status(StatusCode.INCORRECTLY_PARTITIONED_TOPICS,
                               f"Following topics are not copartitioned or have the wrong number of partitions: "
                               f"{', '.join(sorted(set(wrong)))}."))
    if to_create:
        statuses.append(Status(StatusCode.MISSING_INTERNAL_TOPICS,
                               f"Internal topics are missing: [{', '.join(sorted(to_create))}]"))
    if statuses:
        return Configured(to_create=to_create, statuses=tuple(statuses), partitions=partitions)
    return Configured(tasks=tasks, partitions=partitions)


def _fixed(topology: Topology, name: str) -> bool:
    return any(info.name == name and info.partitions > 0
               for sub in topology.subtopologies for info in sub.repartition_source_topics)


def topics_hash(topology: Topology | None, topics: Mapping[str, int]) -> int:
    """A hash of the partition counts of every topic the topology names (an int64, the group's
    `metadata_hash`): when it changes, the group's epoch moves and its tasks are assigned again."""
    if topology is None:
        return 0
    names: set[str] = set()
    for sub in topology.subtopologies:
        names.update(_sources_of(sub, topics))
        names.update(t.name for t in (*sub.state_changelog_topics, *sub.repartition_source_topics))
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(names):
        digest.update(f"{name}\0{topics.get(name, -1)}\n".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)
