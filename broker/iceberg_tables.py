"""Iceberg topics, the broker's side: start and supervise the worker that keeps each topic's Iceberg table.

A topic whose `iceberg.mode` is not `disabled` gets an Apache Iceberg table, filled by a worker process
(`python -m pybroker.clients.iceberg.worker`, like the cleaner's: niced, off the broker's interpreter
lock; the broker never imports it, so the `iceberg` extra is needed only when a topic asks for a table).

Who does what:
- the event loop, asked by the supervisor thread once per round (`_plan`), lists the Iceberg topics and,
  per partition, its dir and the offset the worker may read up to: the last stable offset, never above
  the recovery point, so the table never holds a row that a power cut could take from the log or that an
  open transaction could still abort; where that end lags the last stable offset, the loop asks the log's
  group commit for an fsync (`_make_durable`, on the flusher's threads), so data no producer waits on is
  not left out of the table for good;
- the supervisor thread (`iceberg-supervisor`) sends that job to the worker as one JSON line, waits for
  its status line without holding anything of the broker, keeps the status for the console
  (`status()`, any thread), and sleeps until the next topic is due (the worker says when);
- the worker reads the partition files and commits the snapshots (`clients/iceberg/`).

What can go wrong: the worker cannot start or dies (kill -9, out of memory): the thread logs it, waits
(1 s doubling to `MAX_BACKOFF_S`) and starts a new one, which resumes from the offsets of the table's
last snapshot. The broker stops: the worker finishes its round (up to `STOP_GRACE_S`) and is told to
exit, else killed; a kill mid-commit loses nothing either. The broker is killed: the worker's input
closes and it exits after its round.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from pybroker.broker.iceberg_schemas import latest_id, new_schemas
from pybroker.broker.schema_registry.store import RegistryState
from pybroker.config.broker_config import BrokerConfig
from pybroker.storage.files import make_dirs_durably
from pybroker.storage.log import Log
from pybroker.storage.log_manager import LogManager

log = structlog.get_logger("pybroker.iceberg").bind(logger="pybroker.iceberg")

WORKER_MODULE = "pybroker.clients.iceberg.worker"
READY_TIMEOUT_S = 60.0
#: how long one round may take before the worker is taken for stuck and killed
ROUND_TIMEOUT_S = 600.0
STOP_GRACE_S = 10.0
MAX_BACKOFF_S = 30.0
#: how often the thread looks again when no topic has a table
IDLE_S = 1.0
PLAN_TIMEOUT_S = 10.0
DECODING_MODES = frozenset({"value_schema_id_prefix", "value_schema_latest"})


class WorkerGone(Exception):
    """The worker could not start, died, broke the protocol or took too long."""


def catalog_settings(config: BrokerConfig, first_log_dir: Path) -> dict[str, Any]:
    """The catalog part of every job: plain values (the secret travels in the job's pipe, never in argv)."""
    home = first_log_dir / "iceberg"
    kind = str(config.get("iceberg.catalog.type"))
    uri = str(config.get("iceberg.catalog.uri") or "")
    if kind == "sql" and not uri:
        uri = f"sqlite:///{home / 'catalog.db'}"
    warehouse = str(config.get("iceberg.warehouse") or "") or (home / "warehouse").as_uri()
    # made durably (each new dir's entry fsynced in its parent): a dir whose entry a power cut takes takes the
    # catalog and every table with it, and the tables would be written again from what the log still holds
    if (kind == "sql" and uri.startswith("sqlite:///")) or warehouse.startswith("file:"):
        make_dirs_durably(home)
    if warehouse.startswith("file:"):
        make_dirs_durably(Path(warehouse.removeprefix("file://")))
    return {"type": kind, "uri": uri, "warehouse": warehouse,
            "namespace": str(config.get("iceberg.catalog.namespace")),
            "s3": {"endpoint": config.get("iceberg.s3.endpoint") or "", "region": config.get("iceberg.s3.region") or "",
                   "access_key_id": config.get("iceberg.s3.access.key.id") or "",
                   "secret_access_key": config.get("iceberg.s3.secret.access.key") or ""}}


class WorkerProcess:
    """One running worker and its two pipes."""

    def __init__(self, nice: int) -> None:
        command = [sys.executable, "-m", WORKER_MODULE, "--nice", str(nice)]
        try:
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        except OSError as exc:
            raise WorkerGone(f"cannot start {WORKER_MODULE}: {exc}") from exc
        try:
            hello = self._receive(READY_TIMEOUT_S, threading.Event())
        except WorkerGone:
            self.kill()
            raise
        if not hello.get("ready"):
            self.kill()
            raise WorkerGone(f"{WORKER_MODULE} said {hello!r} instead of ready")

    def _receive(self, timeout_s: float, stop: threading.Event) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        stopping_since: float | None = None
        while True:
            readable, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if readable:
                line = self.proc.stdout.readline()
                if not line:
                    raise WorkerGone(f"the worker exited (code {self.proc.wait()})")
                try:
                    answer = json.loads(line)
                except ValueError as exc:
                    raise WorkerGone(f"the worker wrote a line that is not JSON: {exc}") from None
                if not isinstance(answer, dict):
                    raise WorkerGone("the worker wrote JSON that is not an object")
                return answer
            now = time.monotonic()
            if stop.is_set() and stopping_since is None:
                stopping_since = now
            if now > deadline or (stopping_since is not None and now - stopping_since > STOP_GRACE_S):
                raise WorkerGone(f"the worker did not answer within {timeout_s if now > deadline else STOP_GRACE_S:.0f} s")

    def run(self, job: dict[str, Any], stop: threading.Event) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(job).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise WorkerGone(f"the worker's input is closed: {exc}") from None
        return self._receive(ROUND_TIMEOUT_S, stop)

    def close(self) -> None:
        """Ask the worker to exit; kill it if it does not."""
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.write(b'{"exit": true}\n')
            self.proc.stdin.close()
        try:
            self.proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_pipes()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError, ValueError):
                    pipe.close()


class IcebergTables:
    """The supervisor of the Iceberg worker (see the module docstring for who calls what)."""

    def __init__(self, config: BrokerConfig, logs: LogManager) -> None:
        self.config = config
        self.logs = logs
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: WorkerProcess | None = None
        self._status: dict[str, Any] = {}
        self._worker_error: str | None = None
        self._catalog: dict[str, Any] | None = None
        #: the schema registry's state when it runs (set by the app before `start`): the decoding modes' schemas
        self.registry: RegistryState | None = None
        #: the schema ids the running worker was sent (the supervisor thread's; empty for a new worker)
        self._sent: set[int] = set()
        #: logs with a durability request in flight (the loop's): one at a time per log
        self._flushing: set[tuple[str, int]] = set()

    @property
    def enabled(self) -> bool:
        return bool(self.config.get("iceberg.enable"))

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """From the event loop, once the logs are loaded."""
        if not self.enabled or self._thread is not None:
            return
        self._loop = loop
        self._thread = threading.Thread(target=self._run, name="iceberg-supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """From a worker thread at shutdown: the round in flight ends (or the worker is killed), then it exits."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_GRACE_S + 10)
            self._thread = None

    def status(self) -> dict[str, Any]:
        """Each Iceberg topic's table status as the worker last reported it (any thread; a copy)."""
        return {"worker_error": self._worker_error, "topics": dict(self._status)}

    def plan(self, sent: frozenset[int] = frozenset()) -> dict[str, Any] | None:
        """On the event loop: the next job's topics, or None when no topic has a table (plain values only).

        With a topic in a decoding mode and the registry on, the job also carries the schemas not in `sent`."""
        topics = []
        registry = self.registry
        suffix = str(self.config.get("iceberg.dlq.table.suffix"))
        for name, info in sorted(self.logs.topics().items()):
            values = self.config.topic_values(info.configs)
            if values["iceberg.mode"] == "disabled":
                continue
            partitions = []
            for partition in range(info.num_partitions):
                partition_log = self.logs.get_log(name, partition)
                if partition_log is None or self.logs.dir_of(name, partition) in self.logs.offline_dirs:
                    continue
                stable = partition_log.last_stable_offset
                end = min(stable, partition_log.recovery_point)
                if end < stable:
                    self._make_durable(partition_log, stable)
                partitions.append({"partition": partition, "dir": str(partition_log.dir), "end": end})
            topic: dict[str, Any] = {"topic": name, "topic_id": str(info.topic_id), "mode": values["iceberg.mode"],
                                     "interval_ms": int(values["iceberg.commit.interval.ms"]),
                                     "spec": values["iceberg.partition.spec"], "partitions": partitions}
            if values["iceberg.mode"] in DECODING_MODES:
                topic.update(invalid_action=values["iceberg.invalid.record.action"], dlq_suffix=suffix,
                             latest_id=latest_id(registry, f"{name}-value") if registry is not None else None)
            topics.append(topic)
        if not topics:
            return None
        job: dict[str, Any] = {"topics": topics, "registry": registry is not None}
        if registry is not None and any(t["mode"] in DECODING_MODES for t in topics):
            job["schemas"] = new_schemas(registry, sent)
        return job

    def _make_durable(self, partition_log: Log, offset: int) -> None:
        """On the loop: ask the log's group commit for an fsync up to `offset`, so the worker may read it.

        The worker reads only below the recovery point (what a power cut cannot take). Most data gets there
        by itself (an acks=all produce, flush.ms); data no one waits on (acks 0/1 with the default flush
        policy, or a log recovered after a crash, whose recovery point restarts at its checkpoint) would
        never be fsynced, and the table would stall below it. So an Iceberg topic costs one fsync per
        partition per commit round that has new data, on the flusher's threads, never on the loop."""
        key = (partition_log.topic, partition_log.partition)
        if key in self._flushing:
            return
        try:
            flusher = self.logs.flusher_for(partition_log)
        except KeyError:  # its dir is not one of ours any more (a move's leftover)
            return
        self._flushing.add(key)
        loop = self._loop

        def done(future: Any) -> None:
            exc = future.exception()
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(self._durable, key, partition_log, exc)

        flusher.request(partition_log, offset).add_done_callback(done)

    def _durable(self, key: tuple[str, int], partition_log: Log, exc: BaseException | None) -> None:
        self._flushing.discard(key)
        if isinstance(exc, OSError):
            self.logs.report_io_error(partition_log, exc)

    def _next_job(self) -> dict[str, Any] | None:
        """The loop's `plan`, asked from this thread (a callback, not a coroutine: nothing is left unawaited
        when the loop goes away); a closed loop ends the thread."""
        assert self._loop is not None
        sent = frozenset(self._sent)
        answer: concurrent.futures.Future[dict[str, Any] | None] = concurrent.futures.Future()

        def on_loop() -> None:
            try:
                answer.set_result(self.plan(sent))
            except BaseException as exc:
                answer.set_exception(exc)

        try:
            self._loop.call_soon_threadsafe(on_loop)
        except RuntimeError:  # the loop is closed: there is no broker left to serve
            self._stop.set()
            return None
        try:
            return answer.result(PLAN_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            return None  # the loop is busy past the timeout: ask again next time
        except Exception:
            log.exception("listing the iceberg topics failed")
            return None

    def _run(self) -> None:
        backoff = 1.0
        try:
            while not self._stop.is_set():
                job = self._next_job()
                if job is None:
                    self._status = {}
                    self._stop.wait(IDLE_S)
                    continue
                try:
                    if self._catalog is None:  # here, not on the loop: it makes the default dirs
                        self._catalog = catalog_settings(self.config, self.logs.dirs[0])
                    job["catalog"] = self._catalog
                    if self._worker is None:
                        self._worker = WorkerProcess(int(self.config.get("iceberg.process.niceness")))
                        log.info("iceberg worker started", pid=self._worker.proc.pid)
                    reply = self._worker.run(job, self._stop)
                    self._sent.update(int(schema_id) for schema_id in job.get("schemas") or {})
                    wait_s = min(max(float(reply.get("wait_ms", 1000)), 0.0), 60_000.0) / 1000
                except (WorkerGone, OSError, ValueError, TypeError) as exc:  # OSError: the default dirs
                    self._worker_error = str(exc)
                    # the console shows each topic why its table is not filled (a missing extra, ...)
                    self._status = {t["topic"]: {"mode": t["mode"], "error": f"worker: {exc}"} for t in job["topics"]}
                    log.warning("iceberg worker failed; restarting it", reason=str(exc), retry_in_s=backoff)
                    if self._worker is not None:
                        self._worker.kill()
                        self._worker = None
                    self._sent = set()
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_S)
                    continue
                backoff, self._worker_error = 1.0, None
                self._report(reply.get("topics") or {})
                self._stop.wait(wait_s)
        finally:
            if self._worker is not None:
                self._worker.close()
                self._worker = None

    def _report(self, topics: dict[str, Any]) -> None:
        """Keep the new status; log a topic's error when it changes."""
        for name, now in topics.items():
            before = self._status.get(name) or {}
            if now.get("error") and now.get("error") != before.get("error"):
                log.warning("iceberg table not updated", topic=name, error=now["error"])
            elif before.get("error") and not now.get("error"):
                log.info("iceberg table updated again", topic=name)
        self._status = topics
