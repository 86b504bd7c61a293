"""examples/spark_pipeline.py end to end on a small input: windowed counts per key land in the sink topic."""

from __future__ import annotations

import calendar
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from pyspark.sql import SparkSession

from tests.integration.brokers import REPO_ROOT, BrokerProcess
from tests.integration.clients import kp_producer, kp_read
from tests.integration.spark.support import create_topic, run_to_end

EXAMPLE = REPO_ROOT / "examples" / "spark_pipeline.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_pipeline_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_counts_events_per_key_and_minute(spark: SparkSession, broker: BrokerProcess,
                                                      new_topic: Callable[..., str], tmp_path: Path) -> None:
    source, sink = new_topic("events"), new_topic("counts")
    create_topic(broker.bootstrap, source, 2)
    minute = (int(time.time()) // 60 - 10) * 60_000  # ten minutes ago, on a minute boundary
    expected: dict[tuple[str, int], int] = {}
    with kp_producer(broker.bootstrap) as producer:
        for i in range(30):
            key, window = f"user-{i % 3}", minute + (i // 15) * 60_000
            producer.send(source, key=key.encode(), value=b"{}", timestamp_ms=window + i * 100)
            expected[(key, window)] = expected.get((key, window), 0) + 1
        # one event five minutes later moves the watermark past both windows, so they are final
        producer.send(source, key=b"user-late", value=b"{}", timestamp_ms=minute + 5 * 60_000)
        producer.flush(timeout=20)

    example = _example()
    args = example.parse_args(["--bootstrap", broker.bootstrap, "--source", source, "--sink", sink,
                               "--checkpoint", str(tmp_path / "checkpoint"), "--available-now",
                               "--max-offsets-per-trigger", "12"])
    run_to_end(lambda: example.start_pipeline(spark, args), 240)

    got: dict[tuple[str, int], int] = {}
    for record in kp_read(broker.bootstrap, sink, 1, len(expected)):
        count = json.loads(record.value)
        assert record.key.decode() == count["key"]
        start = calendar.timegm(time.strptime(count["window_start"], "%Y-%m-%dT%H:%M:%S.000Z"))
        got[(count["key"], start * 1000)] = count["count"]
    assert got == expected


def test_the_example_explains_itself() -> None:
    out = subprocess.run([sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert "--checkpoint" in out and "--available-now" in out


def test_ctrl_c_stops_the_example_cleanly(broker: BrokerProcess, new_topic: Callable[..., str],
                                          tmp_path: Path) -> None:
    """SIGINT, as a terminal's Ctrl-C sends it to the whole process group: the query stops, the program
    exits 0, and nothing on its way out is a traceback (py4j's included), but for the one Spark's own
    streaming-source runner may print as the query stops (`_without_runner_teardown`)."""
    source, sink = new_topic("events"), new_topic("counts")
    create_topic(broker.bootstrap, source, 1)
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--bootstrap", broker.bootstrap, "--source", source,
                             "--sink", sink, "--checkpoint", str(tmp_path / "checkpoint")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stderr is not None
        lines: list[str] = []
        deadline = time.monotonic() + 240  # its own Spark JVM: minutes to start on a loaded machine
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "Ctrl-C stops it" in line:
                break
        assert any("Ctrl-C stops it" in line for line in lines), "".join(lines)[-3000:]
        time.sleep(2)  # a micro-batch or two
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        for pipe in (proc.stdout, proc.stderr):  # closed here when a failure skipped communicate
            if pipe is not None:
                pipe.close()
    assert proc.returncode == 0, err[-3000:]
    ours = _without_runner_teardown(err)
    assert "Traceback" not in ours and "py4j" not in ours.lower(), err[-3000:]
    assert "stopped" in err


#: where PySpark's streaming-source runner fails as it reports its socket's end to a JVM already gone
_RUNNER_FILES = ("/site-packages/pyspark/", "/socket.py", "/contextlib.py", "<frozen runpy>")
_RUNNER_ERRORS = ("EOFError", "BrokenPipeError")


def _without_runner_teardown(err: str) -> str:
    """`err` without the one traceback Spark itself may print on a clean stop.

    Stopping a query closes the socket of the Python process that plans its batches (PySpark's
    `python_streaming_source_runner`); that process reads the end of its socket (EOFError), reports it back
    over the same socket and, when the JVM's close has already reached it, fails with BrokenPipeError and
    prints the chain. Whether the close arrives first is a race inside Spark (it showed up on a slow host).
    A chain goes only if every frame is PySpark's or the standard library's and every error is one of those
    two; anything else, the example's code or py4j's included, stays for the assertions."""
    kept: list[str] = []
    block: list[str] = []

    def close_block() -> None:
        files = [line for line in block if line.lstrip().startswith('File "')]
        errors = [line for line in block if line and not line[0].isspace() and not line.startswith(
            ("Traceback", "During handling"))]
        if not (files and errors and all(any(f in line for f in _RUNNER_FILES) for line in files)
                and all(line.startswith(_RUNNER_ERRORS) for line in errors)):
            kept.extend(block)
        block.clear()

    for line in err.splitlines():
        starts_chain = line.startswith("Traceback (most recent call last):")
        continues = block and (line == "" or line[0].isspace() or line.startswith(("During handling", *_RUNNER_ERRORS)))
        if starts_chain or continues:
            block.append(line)
            continue
        if block:
            close_block()
        kept.append(line)
    if block:
        close_block()
    return "\n".join(kept)
