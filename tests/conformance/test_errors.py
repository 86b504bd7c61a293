"""The error answers clients act on most, from pybroker and from Apache Kafka, compared field by field.

Each scenario sends the same requests to a fresh pybroker and to the session's Kafka node and compares the
normalized answers (tests/conformance/normalize.py). Where pybroker answers differently today the test is
marked `xfail(strict=True)` with the difference, so the fix that closes it fails the run until the mark
goes. A difference that would hide a whole family's error codes (the `configs` of a refused CreateTopics
entry) is left out of that family's comparison and asserted, as a known difference, by a test of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.conformance import scenarios as s
from tests.conformance.conftest import Pair
from tests.conformance.normalize import differences


def same(ours: Any, theirs: Any, ignoring: Callable[[str], bool] = lambda path: False) -> None:
    found = [d for d in differences(ours, theirs) if not ignoring(d.split(":", 1)[0])]
    assert not found, "pybroker and Kafka differ:\n" + "\n".join(found)


def known(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=reason)


AUTO_CREATES_ON_OLD_METADATA = known(
    "Metadata v1-v3 for an unknown topic: pybroker auto-creates it; Kafka 4.4 answers UNKNOWN_TOPIC_OR_PARTITION")


@pytest.mark.parametrize("version", [*(pytest.param(v, marks=AUTO_CREATES_ON_OLD_METADATA) for v in (1, 2, 3)),
                                     4, 9, 12, 13])
async def test_metadata_of_an_unknown_topic(pair: Pair, version: int) -> None:
    same(*await pair.call(s.metadata(s.unique("unknown")), version))


@pytest.mark.parametrize("version", [1, 9, 12])
async def test_metadata_of_an_existing_topic(pair: Pair, version: int) -> None:
    name = s.unique("exists")
    await pair.call(s.create(s.topic(name, partitions=3)), 7)
    await s.created(pair.ours, name, 3)
    await s.created(pair.theirs, name, 3)
    same(*await pair.call(s.metadata(name), version))


CREATE_REFUSALS = {
    "name with a space": lambda n: [s.topic("bad name " + n)],
    "empty name": lambda n: [s.topic("")],
    "dot": lambda n: [s.topic(".")],
    "dot dot": lambda n: [s.topic("..")],
    "name too long": lambda n: [s.topic(n + "x" * 250)],
    "zero partitions": lambda n: [s.topic(n, partitions=0)],
    "negative partitions": lambda n: [s.topic(n, partitions=-5)],
    "replication factor above brokers": lambda n: [s.topic(n, replication=3)],
    "replication factor zero": lambda n: [s.topic(n, replication=0)],
    "unknown config": lambda n: [s.topic(n, configs={"no.such.config": "1"})],
    "invalid config value": lambda n: [s.topic(n, configs={"cleanup.policy": "sometimes"})],
    "null config value": lambda n: [s.topic(n, configs={"retention.ms": None})],
}


def _configs(path: str) -> bool:
    return path.endswith(".configs")


@pytest.mark.parametrize("case", sorted(CREATE_REFUSALS))
async def test_create_topics_refusals(pair: Pair, case: str) -> None:
    request = s.create(*CREATE_REFUSALS[case](s.unique("ct")), validate_only=True)
    same(*await pair.call(request, 7), ignoring=_configs)


@known("CreateTopics v5+, a refused topic: pybroker answers configs null, Kafka an empty list")
async def test_refused_topic_has_an_empty_configs_list(pair: Pair) -> None:
    same(*await pair.call(s.create(s.topic("bad name"), validate_only=True), 7))


@known("CreateTopics with one name twice: pybroker accepts the first and refuses the second (two entries); "
       "Kafka answers one entry, INVALID_REQUEST")
async def test_create_topics_duplicate_in_one_request(pair: Pair) -> None:
    name = s.unique("dup")
    same(*await pair.call(s.create(s.topic(name), s.topic(name), validate_only=True), 7), ignoring=_configs)


async def test_create_an_existing_topic(pair: Pair) -> None:
    name = s.unique("twice")
    await pair.call(s.create(s.topic(name)), 7)
    await s.created(pair.theirs, name)
    same(*await pair.call(s.create(s.topic(name)), 7), ignoring=_configs)


@known("Produce to an unknown topic: pybroker auto-creates it and appends; Kafka's Produce never creates "
       "topics and answers UNKNOWN_TOPIC_OR_PARTITION")
async def test_produce_to_an_unknown_topic(pair: Pair) -> None:
    same(*await pair.call(s.produce(s.unique("nowhere")), 9))


async def test_produce_to_an_unknown_partition(pair: Pair) -> None:
    name = s.unique("onepart")
    await pair.call(s.create(s.topic(name)), 7)
    await s.created(pair.theirs, name)
    same(*await pair.call(s.produce(name, partition=4), 9))


async def test_list_offsets_of_an_unknown_partition_and_topic(pair: Pair) -> None:
    name = s.unique("lo")
    await pair.call(s.create(s.topic(name)), 7)
    await s.created(pair.theirs, name)
    same(*await pair.call(s.list_offsets(name, -1, partition=7), 7))
    same(*await pair.call(s.list_offsets(s.unique("lo-unknown"), -1), 7))


AFTER_THE_LAST = known("ListOffsets for a timestamp after the last record: pybroker answers leader_epoch 0 "
                       "with offset -1, Kafka leader_epoch -1")


@pytest.mark.parametrize("timestamp", [-2, -1, -3, s.TIMESTAMP,
                                       pytest.param(s.TIMESTAMP + 10_000, marks=AFTER_THE_LAST)])
async def test_list_offsets_by_timestamp(pair: Pair, timestamp: int) -> None:
    name = s.unique("lots")
    await pair.call(s.create(s.topic(name)), 7)
    await s.created(pair.theirs, name)
    same(*await pair.call(s.produce(name), 9))
    same(*await pair.call(s.list_offsets(name, timestamp), 7))


def _offsets_of_the_log(path: str) -> bool:
    return path.rsplit(".", 1)[-1] in ("high_watermark", "last_stable_offset", "log_start_offset")


@pytest.mark.parametrize("offset", [5, 100, -7])
async def test_fetch_out_of_range_error_code(pair: Pair, offset: int) -> None:
    name = s.unique("oor")
    await pair.call(s.create(s.topic(name)), 7)
    await s.created(pair.theirs, name)
    same(*await pair.call(s.produce(name), 9))
    ours, theirs = await pair.call(s.fetch(name, offset), 12)
    same(ours, theirs, ignoring=_offsets_of_the_log)
    assert ours["responses"][0]["partitions"][0]["error_code"] == 1  # OFFSET_OUT_OF_RANGE


@known("Fetch, OFFSET_OUT_OF_RANGE: pybroker fills high_watermark, last_stable_offset and log_start_offset; "
       "Kafka 4.4 answers -1 for all three")
async def test_fetch_out_of_range_offsets_of_the_log(pair: Pair) -> None:
    name = s.unique("oorlog")
    await pair.call(s.create(s.topic(name)), 7)
    await s.created(pair.theirs, name)
    same(*await pair.call(s.produce(name), 9))
    same(*await pair.call(s.fetch(name, 100), 12))


@known("Fetch v13 of an unknown topic id: pybroker answers aborted_transactions null, Kafka an empty list")
async def test_fetch_an_unknown_topic_id(pair: Pair) -> None:
    same(*await pair.call(s.fetch("", 0, topic_id=uuid.uuid4()), 13))
