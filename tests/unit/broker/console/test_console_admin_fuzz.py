"""A fuzz target for the admin pages' parameter parsing: seeded random mutations of valid bodies and query
strings, sent to every admin path of a real in-process broker's console. Whatever arrives, the answer is a
clear one (200, or a 4xx with a sentence in `error`), never a 500 (a traceback caught at the top), and the
broker keeps answering. Each run feeds the same inputs (`SEED`); `PYBROKER_CONSOLE_FUZZ_INPUTS` feeds more
(`make soak`-style campaigns), the default keeps `make test` fast."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pybroker.broker.app import BrokerApp
from tests.unit.broker.console.console_http import Http, start_broker

SEED = 848
INPUTS = int(os.environ.get("PYBROKER_CONSOLE_FUZZ_INPUTS", "300"))
CLEAR = {200, 400, 403, 404, 409, 413, 414, 415, 431}
#: answered by the HTTP layer before the console reads the request: a line of plain text
PLAIN = {414, 431}
VALID: dict[str, dict[str, Any]] = {
    "acls/create": {"resource_type": "TOPIC", "resource_name": "t", "pattern_type": "LITERAL",
                    "principal": "User:a", "host": "*", "operation": "READ", "permission": "ALLOW"},
    "acls/delete": {"resource_type": "GROUP", "resource_name": "g", "pattern_type": "PREFIXED",
                    "principal": "User:a", "host": "*", "operation": "ALL", "permission": "DENY"},
    "users/upsert": {"user": "u", "password": "pw", "mechanism": "SCRAM-SHA-256", "iterations": 4096},
    "users/delete": {"user": "u", "mechanism": "SCRAM-SHA-512"},
    "quotas/alter": {"entity": [{"type": "user", "name": "u"}, {"type": "client-id", "name": None}],
                     "key": "producer_byte_rate", "value": 1024},
    "transactions/abort": {"topic": "t", "partition": 0, "start_offset": 0},
}
QUERIES = {"transactions/hanging": {"topic": "t", "older_than_ms": "0"}, "consumer-group": {"id": "g"},
           "acls": {}, "users": {}, "quotas": {}, "transactions": {}, "consumer-groups": {}, "broker": {}}


def _value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["none", "bool", "int", "big", "neg", "float", "nan", "str", "long", "unicode", "list", "dict"]
    kind = rng.choice(kinds if depth < 2 else kinds[:-2])
    return {
        "none": lambda: None, "bool": lambda: rng.random() < 0.5, "int": lambda: rng.randint(-5, 20000),
        "big": lambda: 2**rng.choice([31, 63, 64, 200]), "neg": lambda: -(2**rng.choice([15, 31, 63])),
        "float": lambda: rng.uniform(-1e12, 1e12), "nan": lambda: rng.choice([float("nan"), float("inf")]),
        "str": lambda: rng.choice(["", "*", "User:", "kafka-cluster", "TOPIC", "ANY", "..", "a\nb", "\x00"]),
        "long": lambda: "x" * rng.choice([249, 250, 1024, 1025, 70_000]),
        "unicode": lambda: "\u00e9\u4e2d\U0001f600\ud7ff",
        "list": lambda: [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))],
        "dict": lambda: {str(_value(rng, 2)): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))},
    }[kind]()


def _mutate(rng: random.Random, body: dict[str, Any]) -> Any:
    out = json.loads(json.dumps(body))
    for _ in range(rng.randint(1, 3)):
        action = rng.random()
        if action < 0.2 and out:
            out.pop(rng.choice(list(out)))
        elif action < 0.9 and out:
            out[rng.choice(list(out))] = _value(rng)
        else:
            out[str(_value(rng, 2))] = _value(rng)
    return out if rng.random() > 0.05 else _value(rng)  # sometimes not an object at all


async def test_every_admin_input_gets_a_clear_answer(tmp_path: Path) -> None:
    app: BrokerApp = await start_broker(tmp_path, **{"transaction.partition.verification.enable": "false"})
    try:
        assert app.console_bound_port is not None
        http = Http(app.console_bound_port)
        await http.login()
        await http.post("topics/create", {"name": "t", "partitions": 1})
        rng = random.Random(SEED)
        for i in range(INPUTS):
            if rng.random() < 0.7:
                path = rng.choice(sorted(VALID))
                body = _mutate(rng, VALID[path])
                status, answer = await http.request("POST", "/console/api/" + path,
                                                    json.dumps(body).encode())
            else:
                path = rng.choice(sorted(QUERIES))
                params = _mutate(rng, QUERIES[path])
                query = "&".join(f"{quote(str(k))}={quote(str(v))}" for k, v in
                                 (params.items() if isinstance(params, dict) else []))
                body = query
                status, answer = await http.request("GET", f"/console/api/{path}?{query}")
            assert status in CLEAR, (i, path, body, status, answer)
            if status in PLAIN:
                assert isinstance(answer, bytes) and answer.endswith(b"too long\n"), (i, path, answer)
            elif status != 200:
                assert isinstance(answer, dict) and answer.get("error"), (i, path, body, answer)
                assert "Traceback" not in answer["error"]
        assert (await http.get("broker"))["node_id"] == 1  # still answering
    finally:
        await app.stop()
