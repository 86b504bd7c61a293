"""ACLs on disk: one JSON file in the first log dir, replaced atomically on every change.

Kafka keeps ACLs in its metadata log; a single node keeps them next to its data, as it keeps dynamic
configs, so they survive a restart and move with the log dirs:

    {"version": 1, "acls": [{"resource_type": "TOPIC", "resource_name": "orders",
                             "pattern_type": "LITERAL", "principal": "User:alice", "host": "*",
                             "operation": "READ", "permission": "ALLOW"}, ...]}

Enum values are stored by name, so the file reads like `kafka-acls --list`.
"""

from __future__ import annotations

import json
from pathlib import Path

from pybroker.broker.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_problem,
)
from pybroker.storage.errors import StorageError
from pybroker.storage.files import atomic_write

FILE_NAME = "pybroker-acls.json"
VERSION = 1


class AclStore:
    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / FILE_NAME

    def load(self) -> set[AclBinding]:
        """Every stored binding; empty when none was ever created.

        An unreadable or malformed file raises `StorageError` naming it: starting without the
        operator's ACLs could open (or close) everything, which is worse than refusing to start.
        """
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return set()
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"{self.path}: cannot read ACLs ({exc})") from None
        try:
            data = json.loads(text)
            if data.get("version") != VERSION:
                raise ValueError(f"unsupported version {data.get('version')!r}")
            bindings = {_from_json(item) for item in data["acls"]}
        except (ValueError, KeyError, AttributeError, TypeError) as exc:
            raise StorageError(f"{self.path}: not an ACL file ({exc})") from None
        return bindings

    def save(self, bindings: set[AclBinding]) -> None:
        data = {"version": VERSION, "acls": [_to_json(b) for b in sorted(bindings)]}
        atomic_write(self.path, (json.dumps(data, indent=1) + "\n").encode())


def _to_json(b: AclBinding) -> dict[str, str]:
    return {"resource_type": b.resource_type.name, "resource_name": b.resource_name,
            "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permission": b.permission.name}


def _from_json(item: dict[str, str]) -> AclBinding:
    for key in ("resource_name", "principal", "host"):
        if not isinstance(item[key], str):
            raise ValueError(f"{key} must be a string")
    binding = AclBinding(ResourceType[item["resource_type"]], item["resource_name"],
                         PatternType[item["pattern_type"]], item["principal"], item["host"],
                         AclOperation[item["operation"]], AclPermissionType[item["permission"]])
    problem = binding_problem(binding)
    if problem is not None:
        raise ValueError(problem)
    return binding
