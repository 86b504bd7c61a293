"""Kafka's rules for topic names (`Topic.validate`), with Kafka's messages."""

from __future__ import annotations

import re
from collections.abc import Callable

from pybroker.storage.errors import InvalidTopicError

MAX_TOPIC_LENGTH = 249
#: Kafka's `Topic.LEGAL_CHARS`, always used with `fullmatch` (`$` would also match before a final newline)
LEGAL_CHARS = re.compile(r"[a-zA-Z0-9._-]*")

#: Kafka's topic-name rules (`Topic.validate`), in order, with Kafka's messages
_TOPIC_NAME_RULES: list[tuple[Callable[[str], bool], str]] = [
    (lambda name: not name, "Topic name is illegal, it can't be empty"),
    (lambda name: name in (".", ".."), 'Topic name cannot be "." or ".."'),
    (lambda name: len(name) > MAX_TOPIC_LENGTH,
     "Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"),
    (lambda name: not LEGAL_CHARS.fullmatch(name),
     "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' "
     "and '-'"),
]


def validate_topic_name(name: str) -> None:
    for broken, message in _TOPIC_NAME_RULES:
        if broken(name):
            raise InvalidTopicError(message.format(name=name))
