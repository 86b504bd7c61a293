"""The SCRAM credentials of every user, kept durably in one file in the first log dir.

Only the server credential of RFC 5802 is written (salt, iterations, StoredKey, ServerKey): never the
password, never the salted password. The file is replaced whole with `atomic_write` (temp, fsync, rename),
so a crash leaves either the old set or the new one. AlterUserScramCredentials changes it at runtime.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
from pathlib import Path

from pybroker.broker.security.scram import ScramCredential
from pybroker.protocol.scram_mechanisms import MECHANISMS
from pybroker.storage.errors import StorageError
from pybroker.storage.files import atomic_write

FILE_NAME = "scram-credentials.json"
FORMAT_VERSION = 1


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ScramStore:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        #: user -> mechanism name -> credential
        self._users: dict[str, dict[str, ScramCredential]] = {}
        if path is not None and path.exists():
            try:
                self._users = self._parse(path.read_bytes())
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise StorageError(f"{path}: unreadable SCRAM credentials ({type(exc).__name__})") from None

    @staticmethod
    def _parse(data: bytes) -> dict[str, dict[str, ScramCredential]]:
        doc = json.loads(data)
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"unknown SCRAM credential file version {doc.get('version')!r}")
        users: dict[str, dict[str, ScramCredential]] = {}
        for user, mechanisms in doc["users"].items():
            users[user] = {
                name: ScramCredential(base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                                      base64.b64decode(c["server_key"]), int(c["iterations"]))
                for name, c in mechanisms.items() if name in MECHANISMS
            }
        return users

    def _render(self) -> bytes:
        return json.dumps({"version": FORMAT_VERSION, "users": {
            user: {name: {"salt": _b64(c.salt), "iterations": c.iterations, "stored_key": _b64(c.stored_key),
                          "server_key": _b64(c.server_key)} for name, c in sorted(mechanisms.items())}
            for user, mechanisms in sorted(self._users.items()) if mechanisms
        }}, indent=1).encode()

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: dict(m) for user, m in self._users.items() if m}

    def apply(self, upserts: list[tuple[str, str, ScramCredential]], deletes: list[tuple[str, str]]) -> None:
        """Apply a batch of changes and write the file once (call off the event loop: it fsyncs)."""
        with self._lock:
            for user, mechanism in deletes:
                self._users.get(user, {}).pop(mechanism, None)
            for user, mechanism, credential in upserts:
                self._users.setdefault(user, {})[mechanism] = credential
            self._users = {user: m for user, m in self._users.items() if m}
            if self.path is not None:
                atomic_write(self.path, self._render())
                with contextlib.suppress(OSError):
                    os.chmod(self.path, 0o600)
