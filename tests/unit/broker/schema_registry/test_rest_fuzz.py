"""The REST body and path parser under seeded random inputs: mutations of valid registrations, lookups,
config and mode changes (keys dropped or added, values of every JSON type, huge numbers, long and
non-ASCII strings, bodies that are not JSON or not objects, odd path segments). Every answer must be 200
or a 4xx/409 in Confluent's JSON shape, never a 500 or a dropped connection, and the registry must keep
answering. `PYBROKER_REGISTRY_FUZZ_INPUTS` feeds more than the default 300."""

from __future__ import annotations

import json
import os
import random
from typing import Any

from pybroker.broker.app import BrokerApp
from pybroker.broker.schema_registry.errors import RegistryError
from pybroker.broker.schema_registry.http_server import decode_body
from tests.unit.broker.schema_registry.conftest import call

INPUTS = int(os.environ.get("PYBROKER_REGISTRY_FUZZ_INPUTS", "300"))
AVRO = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
SEEDS: list[tuple[str, str, Any]] = [
    ("POST", "/subjects/s-value/versions", {"schema": AVRO}),
    ("POST", "/subjects/s-value/versions", {"schema": '{"type":"object"}', "schemaType": "JSON"}),
    ("POST", "/subjects/s-value/versions", {"schema": 'syntax = "proto3"; message M { int32 a = 1; }',
                                             "schemaType": "PROTOBUF"}),
    ("POST", "/subjects/s-value/versions", {"schema": AVRO, "references": [{"name": "x", "subject": "s-value",
                                                                             "version": 1}]}),
    ("POST", "/subjects/s-value", {"schema": AVRO}),
    ("POST", "/compatibility/subjects/s-value/versions/latest?verbose=true", {"schema": AVRO}),
    ("PUT", "/config/s-value", {"compatibility": "FULL"}),
    ("PUT", "/mode/s-value", {"mode": "READONLY"}),
    ("DELETE", "/mode/s-value", None),
    ("GET", "/subjects/s-value/versions/latest", None),
    ("GET", "/schemas/ids/1?subject=s-value&format=serialized", None),
    ("DELETE", "/subjects/s-value/versions/1", None),
]
VALUES: list[Any] = [None, True, 0, -1, 2**63, 1e308, float("nan"), "", "x" * 5000, "\u00e9\u6f22\U0001f600",
                     [], {}, [1, "a"], {"type": "record"}, "latest", "-1", "BACKWARD", "IMPORT"]
SEGMENTS = ["", "..", "%2F", "%00", "latest", "-2", "99999999999", "s-value", "\u00e9", "a" * 300]


def mutate(rng: random.Random, value: Any, depth: int = 0) -> Any:
    if isinstance(value, dict) and depth < 3:
        out = dict(value)
        for _ in range(rng.randint(0, 2)):
            action = rng.random()
            if out and action < 0.3:
                out.pop(rng.choice(list(out)))
            elif action < 0.6:
                out[rng.choice(["schema", "schemaType", "references", "id", "version", "compatibility", "mode",
                                "extra"])] = rng.choice(VALUES)
            elif out:
                key = rng.choice(list(out))
                out[key] = mutate(rng, out[key], depth + 1)
        return out
    if isinstance(value, list) and depth < 3:
        return [mutate(rng, v, depth + 1) for v in value] + ([rng.choice(VALUES)] if rng.random() < 0.3 else [])
    if isinstance(value, str) and value.startswith("{") and rng.random() < 0.5:
        cut = rng.randint(0, len(value))
        return value[:cut] + rng.choice(["", "}", "[", '"', "\\", "null"]) + value[cut + 1:]
    return rng.choice(VALUES) if rng.random() < 0.5 else value


def encode(rng: random.Random, body: Any) -> bytes:
    text = json.dumps(body)
    roll = rng.random()
    if roll < 0.05:
        return text.encode()[: rng.randint(0, len(text))]
    if roll < 0.1:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    if roll < 0.13:
        return b"[" * 5000
    return text.encode()


async def test_rest_answers_every_mutation_in_confluents_shape(registry_app: BrokerApp) -> None:
    port = registry_app.schema_registry.bound_port
    assert port is not None
    rng = random.Random(33)
    for i in range(INPUTS):
        method, path, body = rng.choice(SEEDS)
        if rng.random() < 0.2:
            parts = path.split("/")
            parts[rng.randrange(1, len(parts))] = rng.choice(SEGMENTS)
            path = "/".join(parts)
        data = encode(rng, mutate(rng, body)) if body is not None else b""
        status, answer = await call(port, method, path, data or None)
        assert status < 500, (i, method, path, data[:200], status, answer)
        if status != 200:
            assert isinstance(answer, dict) and isinstance(answer.get("error_code"), int), (i, path, answer)
    assert (await call(port, "GET", "/subjects"))[0] == 200


def test_decode_body_refuses_what_is_not_json() -> None:
    for body in (b"{", b"\xff\xfe", b"[" * 100_000, b'{"a": NaN'):
        try:
            decode_body(body)
        except RegistryError as exc:
            assert exc.code == 422
    assert decode_body(b"  ") is None
