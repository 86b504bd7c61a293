"""DescribeTopicPartitions pagination as a property: for any topics and any page limit, following
`next_cursor` lists every partition exactly once, in order, never more than the limit a page."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.context import RequestContext
from pybroker.broker.handlers.describe_topic_partitions import handle_describe_topic_partitions
from pybroker.protocol.messages import describe_topic_partitions as dtp


@dataclass
class _Info:
    name: str
    num_partitions: int
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)


def _ctx(topics: dict[str, int], cap: int) -> RequestContext:
    infos = {name: _Info(name, count) for name, count in topics.items()}
    logs = SimpleNamespace(topics=lambda: infos, offline_dirs=set(), dir_of=lambda t, p: None)
    state: Any = SimpleNamespace(node_id=1, logs=logs, topics=SimpleNamespace(get=infos.get),
                                 config=SimpleNamespace(get=lambda key: cap))
    return RequestContext(state=state, api_key=75, api_version=0, correlation_id=1, client_id=None, peer="x:1")


@settings(max_examples=200, deadline=None)
@given(topics=st.dictionaries(st.text("abc", min_size=1, max_size=3), st.integers(0, 7), max_size=6),
       limit=st.integers(1, 9), cap=st.integers(1, 9), named=st.booleans())
def test_following_the_cursor_lists_every_partition_once(topics: dict[str, int], limit: int, cap: int,
                                                         named: bool) -> None:
    ctx = _ctx(topics, cap)
    wanted = [dtp.TopicRequest(name=n) for n in topics] if named else []
    seen: list[tuple[str, int]] = []
    cursor = None
    for _ in range(200):
        response = handle_describe_topic_partitions(ctx, dtp.DescribeTopicPartitionsRequest(
            topics=wanted, response_partition_limit=limit, cursor=cursor))
        page = [(t.name or "", p.partition_index) for t in response.topics for p in t.partitions]
        assert len(page) <= min(limit, cap)
        seen += page
        if response.next_cursor is None:
            break
        cursor = dtp.DescribeTopicPartitionsRequestCursor(topic_name=response.next_cursor.topic_name,
                                                          partition_index=response.next_cursor.partition_index)
    else:
        raise AssertionError("the cursor never reached the end")
    assert seen == [(name, i) for name in sorted(topics) for i in range(topics[name])]
