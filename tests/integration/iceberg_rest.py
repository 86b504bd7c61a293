"""Apache Iceberg's own REST catalog server, for the tests of an Iceberg topic on a REST catalog.

`make iceberg-rest` resolves it (tests/ecosystem/iceberg_rest/pom.xml: iceberg-open-api's main artifact, one
runnable jar whose manifest names `org.apache.iceberg.rest.RESTCatalogServer`) into a cache outside the
tree. The server takes its catalog from `CATALOG_*` environment variables (`CATALOG_WAREHOUSE` is the
`warehouse` property, `CATALOG_REST_PORT` its `rest.port`): a JDBC catalog on SQLite in memory behind it,
a warehouse directory the test gives. It is started on port 0 and its port read from Jetty's log line (the
server creates the catalog's tables before it starts Jetty, so it is ready then).

Its store gets one JDBC connection (`CATALOG_CLIENTS=1`). Its default `jdbc:sqlite::memory:` is a database
of each connection's own, and the JDBC catalog's pool opens a second connection as soon as two requests
overlap (the broker's worker committing while the test polls the table): that database is empty, every
request it serves fails with "no such table" (HTTP 500, UncheckedSQLException), and it stays in the pool.
With one connection the requests take turns on the one database.

Blocking; the test's thread.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

ENV_HOME = "PYBROKER_ICEBERG_REST_HOME"
POM = Path(__file__).resolve().parents[1] / "ecosystem" / "iceberg_rest" / "pom.xml"
START_TIMEOUT_S = 120.0
_PORT = re.compile(r"Started ServerConnector@\S+\{HTTP/1\.1, ?\(http/1\.1\)\}\{[^}]*:(\d+)\}")


def rest_home() -> Path:
    configured = os.environ.get(ENV_HOME)
    if configured:
        return Path(configured)
    version = POM.read_text().split("<iceberg.version>")[1].split("</iceberg.version>")[0].strip()
    return Path.home() / ".cache" / "pybroker" / f"iceberg-rest-{version}"


def rest_jar() -> Path | None:
    found = sorted((rest_home() / "libs").glob("iceberg-open-api-*.jar"))
    return found[0] if found else None


def rest_missing() -> str | None:
    """Why the server cannot run here (None when it can)."""
    if shutil.which("java") is None:
        return "no java (`make java`)"
    if rest_jar() is None:
        return f"Iceberg's REST catalog server is not resolved in {rest_home()}: run `make iceberg-rest`"
    return None


class RestCatalogServer:
    """One server process over `warehouse`; `uri` once `start()` returned."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.warehouse = workdir / "warehouse"
        self.log_path = workdir / "rest-catalog.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.uri = ""

    def start(self) -> RestCatalogServer:
        jar = rest_jar()
        assert jar is not None, rest_missing()
        self.warehouse.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "CATALOG_WAREHOUSE": str(self.warehouse), "CATALOG_REST_PORT": "0",
               "CATALOG_CLIENTS": "1"}  # one connection: one in-memory database (the module's docstring)
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(["java", "-Xmx384m", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-jar", str(jar)],
                                         stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.workdir)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = _PORT.search(self.log_path.read_text(errors="replace"))
            if found:
                self.uri = f"http://127.0.0.1:{found.group(1)}"
                return self
            assert self.proc.poll() is None, f"the REST catalog server exited: {self.log_path.read_text()[-2000:]}"
            time.sleep(0.2)
        raise AssertionError(f"the REST catalog server did not start: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
