"""What the console's API tests share: a raw HTTP client for the console's port, and an in-process broker
with the console on a free port (and the PLAIN users `alice` and `admin` for the secured one)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_admin="admin-pw";'


class Http:
    """Raw HTTP/1.1 against one port: every header and byte is the test's to choose."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.token = ""
        self.auth: str | None = None

    async def raw(self, data: bytes) -> tuple[int, dict[str, str], bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(data)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        return int(lines[0].split()[1]), headers, body

    async def request(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None
                      ) -> tuple[int, Any]:
        payload = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        sent = {"Host": f"127.0.0.1:{self.port}"}
        if method == "POST":
            sent.update({"Content-Type": "application/json", "X-Console-Token": self.token,
                         "Origin": f"http://127.0.0.1:{self.port}"})
        if self.auth:
            sent["Authorization"] = "Basic " + base64.b64encode(self.auth.encode()).decode()
        sent.update(headers or {})
        sent["Content-Length"] = str(len(payload))
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in sent.items() if v is not None)
        status, _, data = await self.raw(head.encode() + b"\r\n" + payload)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, data

    async def get(self, path: str, **kwargs: Any) -> Any:
        status, data = await self.request("GET", "/console/api/" + path, **kwargs)
        assert status == 200, data
        return data

    async def post(self, path: str, body: Any, **kwargs: Any) -> Any:
        status, data = await self.request("POST", "/console/api/" + path, body, **kwargs)
        assert status == 200, data
        return data

    async def login(self) -> None:
        self.token = (await self.get("session"))["csrf_token"]


async def start_broker(tmp_path: Path, **extra: str) -> BrokerApp:
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
                                "console.port": "0", "offsets.topic.num.partitions": "2",
                                "group.initial.rebalance.delay.ms": "0", **extra})
    app = BrokerApp(config, metrics_port=0)
    await app.start()
    return app
