"""Kafka's JAAS config syntax, as `sasl.jaas.config` takes it: one login module, a flag, options, a semicolon.

    org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="b";

Values may be quoted (with backslash escapes) or bare. Kafka allows exactly one module per config value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_HEAD = re.compile(r"\s*([A-Za-z_$][\w.$]*)\s+(\w+)")
_OPTION = re.compile(r"\s*([^\s=;]+)\s*=\s*(\"(?:[^\"\\]|\\.)*\"|[^\s\";]+)")
_ESCAPE = re.compile(r"\\(.)")


class JaasError(ValueError):
    """A config value that is not one JAAS login module entry (the message never repeats option values)."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas(text: str) -> JaasEntry:
    head = _HEAD.match(text)
    if head is None:
        raise JaasError("expected '<LoginModule class> <flag> key=value ... ;'")
    module, flag = head.group(1), head.group(2).lower()
    if flag not in FLAGS:
        raise JaasError(f"login module flag must be one of {sorted(FLAGS)}")
    options: dict[str, str] = {}
    pos = head.end()
    while True:
        match = _OPTION.match(text, pos)
        if match is None:
            break
        raw = match.group(2)
        options[match.group(1)] = _ESCAPE.sub(r"\1", raw[1:-1]) if raw.startswith('"') else raw
        pos = match.end()
    rest = text[pos:].strip()
    if rest != ";":
        raise JaasError("expected options as key=value and one terminating ';' (one login module only)")
    return JaasEntry(module, flag, options)


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """PlainLoginModule's `user_<name>="<password>"` options: the users a PLAIN listener accepts."""
    return {key[len("user_"):]: value for key, value in entry.options.items()
            if key.startswith("user_") and len(key) > len("user_")}
