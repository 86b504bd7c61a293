"""What schema validation on produce costs per record: the framing check alone, and with the payload decoded
against its schema (`schema.registry.validate.payload`), for Avro and JSON Schema values.

Why: the issue asks for the payload check to be measured before anyone turns it on. This times the check
the partition layer runs (`SchemaValidation.check` on a built batch of `--records` records, uncompressed)
on the calling thread, with no broker around it, so the figure is the check's own CPU per record; the
median of `--repeats` runs is printed with the load average (the machine is shared).

    .venv/bin/python -m bench.schema_validation [--records 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import fastavro  # noqa: E402

from pybroker.broker.schema_registry.records import schema_key, schema_value  # noqa: E402
from pybroker.broker.schema_registry.registry import Registry  # noqa: E402
from pybroker.broker.schema_registry.store import RegistryState  # noqa: E402
from pybroker.broker.schema_registry.validation import SchemaValidation  # noqa: E402
from pybroker.protocol.records.batch import parse_header  # noqa: E402
from pybroker.protocol.records.record import Record, build_batch  # noqa: E402
from pybroker.storage.topic_store import TopicInfo  # noqa: E402

AVRO = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}, {"name": "qty", "type": "int"},
    {"name": "price", "type": "double"}, {"name": "tags", "type": {"type": "array", "items": "string"}}]}
JSON_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "item": {"type": "string"},
               "qty": {"type": "integer", "minimum": 0}, "price": {"type": "number"},
               "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["id", "item"]}
VALUE = {"id": 42, "item": "a thing to sell", "qty": 3, "price": 9.99, "tags": ["new", "red"]}


class _Logs:
    def __init__(self) -> None:
        self.table = {"t": TopicInfo("t", uuid.uuid4(), 1, {"confluent.value.schema.validation": "true"})}

    def topics(self) -> dict[str, TopicInfo]:
        return self.table


async def _no_writes(records: Any) -> None:
    raise AssertionError


def _case(kind: str, payload: bool, records: int) -> tuple[SchemaValidation, bytes]:
    state = RegistryState()
    schema = AVRO if kind == "AVRO" else JSON_SCHEMA
    state.apply(schema_key("t-value", 1), schema_value("t-value", 1, 1, kind, json.dumps(schema), [], False))
    if kind == "AVRO":
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO), VALUE)
        body = out.getvalue()
    else:
        body = json.dumps(VALUE).encode()
    value = b"\x00\x00\x00\x00\x01" + body
    batch = build_batch([Record(i, 0, None, value) for i in range(records)])
    return SchemaValidation(Registry(state, _no_writes), _Logs(), payload=payload), batch  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.records} records per batch, "
          f"median of {args.repeats}")
    for kind in ("AVRO", "JSON"):
        for payload in (False, True):
            validation, batch = _case(kind, payload, args.records)
            header = parse_header(batch, 0)
            assert validation.check("t", batch, header) is None
            times = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                validation.check("t", batch, header)
                times.append(time.perf_counter() - started)
            per = statistics.median(times) / args.records * 1e6
            print(f"{kind:5} payload check {'on ' if payload else 'off'}: {per:7.2f} us/record "
                  f"({args.records / statistics.median(times):,.0f} records/s on one core)")


if __name__ == "__main__":
    main()
