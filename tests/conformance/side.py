"""One broker as a conformance scenario sees it: our codecs on the wire, answers kept as plain JSON values.

A scenario is one coroutine run twice, once against each broker (tests/conformance/registry.py), so that a
recorded run and a live one are the same code: what a `Side` keeps (`answers`) is what is compared, and for
Kafka what is recorded. Topic and group names are derived from the scenario's id, so a recorded answer that
names them stays valid. A connection the broker closes is an answer too (`CLOSED`), after which the next call
opens a new one; a request that gets no answer within the wait is `NO_ANSWER`. Coroutines for the test's loop.
"""

from __future__ import annotations

import asyncio
import json
import re
import struct
import uuid
from typing import Any

from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pybroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from pybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from tests.conformance.normalize import normalize
from tests.unit.broker.conftest import RawClient

CLOSED = {"<connection>": "closed"}
# every name a scenario makes starts with this; a listing (ListGroups, ListConfigResources, ...) on the
# shared Kafka node also shows other scenarios' names, which `call` drops so answers do not depend on order
MARK = "cf-"
NAME_KEYS = ("name", "group_id", "resource_name", "topic", "transactional_id", "topic_name")
NO_ANSWER = {"<connection>": "no answer"}


def as_json(value: Any) -> Any:
    """A normalized answer as JSON values exactly as they read back from a recording (bytes as hex)."""
    return json.loads(json.dumps(value, default=_bytes_as_hex))


def _bytes_as_hex(value: Any) -> str:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    raise TypeError(f"not JSON: {type(value).__name__}")


class Side:
    def __init__(self, port: int, scenario: str, wait: float = 10, login: tuple[str, str] | None = None,
                 messages: bool = False) -> None:
        self.port = port
        self.login = login
        self.messages = messages
        self.prefix = MARK + re.sub(r"[^a-zA-Z0-9._-]+", "-", scenario)[:150]
        self.wait = wait
        self.answers: list[Any] = []
        self.client: RawClient | None = None

    def name(self, suffix: str = "t") -> str:
        """A topic (or group, or transactional id) name of this scenario's own, the same on both brokers."""
        return f"{self.prefix}-{suffix}"

    async def _client(self) -> RawClient:
        if self.client is None:
            self.client = RawClient(*await asyncio.open_connection("127.0.0.1", self.port))
            if self.login is not None:
                await self._authenticate(self.client, *self.login)
        return self.client

    async def _authenticate(self, client: RawClient, user: str, password: str) -> None:
        """SASL PLAIN as a client does it (SaslHandshake v1, then SaslAuthenticate v2); not compared."""
        shake = await client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert shake.error_code == 0, shake
        token = b"\0" + user.encode() + b"\0" + password.encode()
        done = await client.call(SaslAuthenticateRequest(auth_bytes=token), 2)
        assert done.error_code == 0, done

    async def raw(self, request: Any, version: int) -> Any:
        """Send `request`; the decoded answer, or CLOSED / NO_ANSWER. Not kept."""
        client = await self._client()
        try:
            return await client.call(request, version, timeout=self.wait)
        except (asyncio.IncompleteReadError, ConnectionError, struct.error):
            self.close()
            return CLOSED
        except TimeoutError:
            self.close()
            return NO_ANSWER

    async def call(self, request: Any, version: int) -> Any:
        """Send `request` and keep its normalized answer for the comparison; the decoded answer."""
        answer = await self.raw(request, version)
        self.keep(answer)
        return answer

    def keep(self, answer: Any) -> None:
        """Keep `answer` (one `raw` gave, perhaps with a random part replaced) for the comparison."""
        self.answers.append(self.own(as_json(normalize(answer, messages=self.messages))))

    def own(self, value: Any) -> Any:
        """`value` without the list entries that name another scenario's topic, group or transaction."""
        if isinstance(value, dict):
            return {k: self.own(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.own(v) for v in value if not self._foreign(v)]
        return value

    def _foreign(self, item: Any) -> bool:
        if not isinstance(item, dict):
            return False
        names = [item[k] for k in NAME_KEYS if isinstance(item.get(k), str)]
        return any(n.startswith(MARK) and not n.startswith(self.prefix + "-") for n in names)

    async def created(self, name: str, partitions: int = 1, timeout: float = 15) -> uuid.UUID:
        """Wait until this broker serves every partition of `name` with a leader (Kafka's metadata is
        asynchronous: a topic is served a moment after CreateTopics answered); its topic id."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            answer = await self.raw(MetadataRequest(topics=[MetadataRequestTopic(name=name)]), 12)
            found = answer.topics[0] if answer not in (CLOSED, NO_ANSWER) else None
            if found is not None and found.error_code == 0 and len(found.partitions) == partitions and all(
                    p.error_code == 0 and p.leader_id >= 0 for p in found.partitions):
                topic_id: uuid.UUID = found.topic_id
                return topic_id
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{name} not served: {answer}")
            await asyncio.sleep(0.05)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
