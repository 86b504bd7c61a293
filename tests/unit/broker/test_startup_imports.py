"""What a broker imports before it serves (issue 34: start-to-ready).

A started broker has every handler registered and its listeners and metrics port up, yet has not imported
what only a later request needs: the web console's pages (built at the first `/console` request), the
Spark connector and pyarrow, and the admin commands. Nor the `crc32c` package, whose import reads the
installed distributions' metadata: the live KRaft metadata log needs its function before the broker serves,
and `storage/crc32c_extension.py` loads it from the package's extension module alone. The check
runs in a fresh interpreter (this one has imported everything); it looks at *what* is imported, never at how long it took (that is `make bench`'s).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: a broker started with a metrics port (so the console is mounted there) that prints what it imported
SCRIPT = r"""
import asyncio, json, sys
import uvloop
from pybroker.broker.app import BrokerApp
from pybroker.broker.dispatch import REGISTRY
from pybroker.broker.loggers.structlog_setup import configure_logging
from pybroker.config.broker_config import BrokerConfig

configure_logging("json", "warning")

async def main():
    config = BrokerConfig.load({"log.dirs": sys.argv[1], "listeners": "PLAINTEXT://127.0.0.1:0"})
    app = BrokerApp(config, metrics_port=0)
    await app.start()
    try:
        print(json.dumps({"modules": sorted(sys.modules), "handlers": len(REGISTRY),
                          "console_mounted": app.metrics.server.console is not None}))
    finally:
        await app.stop()

uvloop.run(main())
"""

#: imported only when first used, never by a start
NOT_AT_START = ("pybroker.broker.console.routes", "pybroker.broker.console.admin_routes",
                "pybroker.broker.console.local_client", "pybroker.broker.console.search",
                "pybroker.clients", "pyarrow", "pyspark", "crc32c", "importlib.metadata")


def test_a_started_broker_has_not_imported_what_only_a_later_request_needs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "data")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["console_mounted"]
    assert seen["handlers"] > 50  # the whole table is registered before the listener answers
    loaded = [name for name in seen["modules"] if name.startswith(NOT_AT_START)]
    assert loaded == []
