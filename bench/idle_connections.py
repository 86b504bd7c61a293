"""10,000 idle connections held for real, and a new stock client served beside them (issue 28).

Why a script and not a test: the fast suite proves the descriptor budget at an open-file limit of 600
(`tests/integration/test_hostile_descriptors.py`); this holds the issue's figure once, at the broker's
real limit, and prints what it cost. `make soak-connections` runs it (a minute or two).

What it does, against a real `pybroker start` (JSON logs, metrics port):
1. The broker raises its soft RLIMIT_NOFILE to the hard limit at start (`broker/resource_limits.py`) and
   logs its connection budget; the script checks the budget holds CONNECTIONS.
2. This process raises its own soft limit to its hard one (each connection is a descriptor here too)
   and opens CONNECTIONS TCP connections, in waves of WAVE with the connects in flight at once (the
   listen backlog is 1,024: a larger burst would only meet SYN retries), and sends nothing on them.
   Time to accept: from the first connect until the broker's `pybroker_connections` gauge shows them all.
3. With them held: the broker's RSS and descriptors, its loop latency (ApiVersions round trips over a
   fresh socket), and a new stock client (confluent-kafka, librdkafka) creates a topic, produces with
   acks=all and consumes the records back; every held connection must still be open.
4. Past the budget (`--past-budget N`, default PAST_BUDGET): connections up to the budget, a wait until
   they have been idle `EVICT_IDLE_S`, then N more, each of which makes the longest idle one go; the
   broker's CPU per such connection (one scan of every connection per new one cost 13 ms here before
   `IdleRanking`), and a new client is still answered. 0 skips it.
5. The broker stops cleanly (SIGTERM, exit 0) and its log must hold no error, no critical line and no
   traceback.

    .venv/bin/python -m bench.idle_connections [--connections 10000] [--past-budget 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import selectors
import socket
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.grid import cpu_times  # noqa: E402
from pybroker.broker.descriptor_budget import EVICT_IDLE_S  # noqa: E402
from tests.integration.brokers import api_versions_ok, kill_all  # noqa: E402
from tests.integration.metrics_broker import MetricsBrokerProcess  # noqa: E402

CONNECTIONS = 10_000
#: connects in flight at once (below the listen backlog of 1,024)
WAVE = 500
#: how long the broker may take to show every connection accepted
ACCEPT_DEADLINE_S = 120.0
#: ApiVersions round trips timed with the connections held (and before, for comparison)
PROBES = 50
RECORDS = 1000
CLIENT_DEADLINE_S = 60.0
#: how long the held connections are watched for the broker's CPU while they only sit there
IDLE_WATCH_S = 10.0
#: connections opened past the budget, each evicting the longest idle one
PAST_BUDGET = 1000
EXPIRED = 'pybroker_connections_expired_total{reason="open_files"}'


def _raise_own_limit(need: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft != resource.RLIM_INFINITY and soft < need:
        raise SystemExit(f"this process may open {soft} files, {need} are needed (raise `ulimit -Hn`)")
    return soft


def _gauge(broker: MetricsBrokerProcess, family: str) -> float:
    status, page = broker.http_get("/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    match = re.search(rf"^{family} (\S+)$", page, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _open_idle(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` connected sockets, WAVE connects in flight at a time; nothing is sent on them."""
    held: list[socket.socket] = []
    selector = selectors.DefaultSelector()
    try:
        while len(held) < count:
            wave = []
            for _ in range(min(WAVE, count - len(held))):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setblocking(False)
                sock.connect_ex((host, port))
                selector.register(sock, selectors.EVENT_WRITE)
                wave.append(sock)
            waiting = len(wave)
            deadline = time.monotonic() + 30
            while waiting:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{waiting} connects of a wave unanswered in 30 s")
                for key, _ in selector.select(timeout=1.0):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    selector.unregister(sock)
                    waiting -= 1
                    error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if error:
                        raise RuntimeError(f"connect failed: {os.strerror(error)}")
            held += wave
    except BaseException:
        for sock in held:
            sock.close()
        raise
    finally:
        selector.close()
    return held


def _still_open(held: list[socket.socket]) -> int:
    """Held sockets the broker has not closed (a closed one reads as readable with EOF)."""
    selector = selectors.DefaultSelector()
    for sock in held:
        selector.register(sock, selectors.EVENT_READ)
    try:
        closed = len(selector.select(timeout=0.5))
    finally:
        selector.close()
    return len(held) - closed


def _probe_ms(host: str, port: int) -> list[float]:
    times = []
    for _ in range(PROBES):
        started = time.perf_counter()
        if not api_versions_ok(host, port, timeout=10.0):
            raise RuntimeError("a new connection got no ApiVersions answer")
        times.append((time.perf_counter() - started) * 1000)
    return times


def _stock_client(bootstrap: str) -> float:
    """confluent-kafka: create a topic, produce RECORDS with acks=all, read them back; seconds taken."""
    started = time.perf_counter()
    topic = f"soak-connections-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 3})
    for i in range(RECORDS):
        producer.produce(topic, value=b"%d" % i)
    if producer.flush(CLIENT_DEADLINE_S) != 0:
        raise RuntimeError("records still undelivered")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "log_level": 3})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + CLIENT_DEADLINE_S
        while got < RECORDS:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {got} of {RECORDS} records read back")
            for message in consumer.consume(num_messages=RECORDS, timeout=1.0):
                if message.error() is None:
                    got += 1
    finally:
        consumer.close()
    return time.perf_counter() - started


def _bad_lines(broker: MetricsBrokerProcess) -> list[str]:
    text = broker.log_path.read_text()
    bad = [line for line in broker.log_lines() if line.get("level") in ("error", "critical", "exception")]
    return [str(line)[:300] for line in bad] + (["a traceback in the log"] if "Traceback" in text else [])


def _past_budget(broker: MetricsBrokerProcess, held: list[socket.socket], budget: int, count: int) -> tuple[float, float, float]:
    """Fill the budget, let every connection be idle long enough, open `count` more: (seconds until all
    evicted their way in, broker CPU microseconds per such connection, ApiVersions median ms after)."""
    held += _open_idle(broker.host, broker.port, budget - len(held))
    deadline = time.monotonic() + ACCEPT_DEADLINE_S
    while _gauge(broker, "pybroker_connections") < budget:
        if time.monotonic() > deadline:
            raise RuntimeError("the budget's worth of connections was not accepted")
        time.sleep(0.05)
    time.sleep(EVICT_IDLE_S + 0.5)  # until the held ones may make way: the broker's rule, not a check
    pid = broker.pid
    assert pid is not None
    expired_before = _gauge(broker, EXPIRED)
    cpu_before = sum(cpu_times(pid))
    started = time.perf_counter()
    held += _open_idle(broker.host, broker.port, count)
    while _gauge(broker, EXPIRED) < expired_before + count:
        if time.monotonic() > deadline + ACCEPT_DEADLINE_S:
            raise RuntimeError(f"{_gauge(broker, EXPIRED) - expired_before:.0f} of {count} evictions")
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    cpu_us = (sum(cpu_times(pid)) - cpu_before) * 1e6 / count
    return seconds, cpu_us, statistics.median(_probe_ms(broker.host, broker.port))


def run(connections: int, past_budget: int = PAST_BUDGET) -> int:
    own_limit = _raise_own_limit(connections + past_budget + 4096)
    with tempfile.TemporaryDirectory(prefix="pybroker-soak-connections-") as tmp:
        broker = MetricsBrokerProcess(Path(tmp) / "pybroker", extra_args=["--log-format", "json"])
        held: list[socket.socket] = []
        try:
            broker.start()
            pid = broker.pid
            assert pid is not None
            [limit] = [line for line in broker.log_lines() if line.get("event") == "open file limit"]
            [budget] = [line for line in broker.log_lines() if line.get("event") == "connection limit"]
            if int(budget["open_file_budget"]) < connections:
                raise SystemExit(f"the broker's budget is {budget['open_file_budget']} connections at a soft "
                                 f"limit of {limit['soft']}: {connections} cannot be held here")
            rss_before, fds_before = _rss_mib(pid), _descriptors(pid)
            probe_before = _probe_ms(broker.host, broker.port)
            cpu_before = sum(cpu_times(pid))
            started = time.perf_counter()
            held = _open_idle(broker.host, broker.port, connections)
            connected_s = time.perf_counter() - started
            deadline = time.monotonic() + ACCEPT_DEADLINE_S
            while _gauge(broker, "pybroker_connections") < connections:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{_gauge(broker, 'pybroker_connections'):.0f} of {connections} "
                                       f"accepted in {ACCEPT_DEADLINE_S:.0f} s")
                time.sleep(0.05)
            accepted_s = time.perf_counter() - started
            accept_cpu_s = sum(cpu_times(pid)) - cpu_before
            idle_cpu_before = sum(cpu_times(pid))
            time.sleep(IDLE_WATCH_S)  # a measurement window, not a wait for something to happen
            idle_cpu_s = sum(cpu_times(pid)) - idle_cpu_before
            rss_held, fds_held = _rss_mib(pid), _descriptors(pid)
            probe_held = _probe_ms(broker.host, broker.port)
            client_s = _stock_client(broker.bootstrap)
            still = _still_open(held)
            refused = _gauge(broker, 'pybroker_connections_refused_total{reason="open_files"}')
            rss_after = _rss_mib(pid)
            past = None
            if past_budget:
                past = _past_budget(broker, held, int(budget["open_file_budget"]), past_budget)
            for sock in held:
                sock.close()
            held = []
            code = broker.stop(expect_code=None)
            bad = _bad_lines(broker)
        finally:
            for sock in held:
                with contextlib.suppress(OSError):
                    sock.close()
            broker.close()
    print(f"\n== {connections:,} idle connections (broker soft/hard open-file limit {limit['soft']}/{limit['hard']}, "
          f"budget {budget['open_file_budget']}; this process {own_limit}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores) ==")
    print(f"  connects done            {connected_s:8.2f} s")
    print(f"  all accepted (gauge)     {accepted_s:8.2f} s  ({connections / accepted_s:,.0f} connections/s)")
    print(f"  broker CPU accepting     {accept_cpu_s:8.2f} s  ({accept_cpu_s * 1e6 / connections:,.0f} us per connection)")
    print(f"  broker CPU holding       {idle_cpu_s / IDLE_WATCH_S * 100:8.1f} % of a core over {IDLE_WATCH_S:.0f} s "
          "(the idle sweep and the background tick)")
    print(f"  broker RSS               {rss_before:8.1f} MiB before, {rss_held:.1f} MiB held "
          f"({(rss_held - rss_before) * 1024 / connections:.1f} KiB per connection), {rss_after:.1f} MiB after the client")
    print(f"  broker descriptors       {fds_before:8d} before, {fds_held} held")
    print(f"  ApiVersions, new socket  {statistics.median(probe_before):8.2f} ms median before, "
          f"{statistics.median(probe_held):.2f} ms held (max {max(probe_held):.1f} ms)")
    print(f"  stock client             {client_s:8.2f} s  (create a topic, {RECORDS} records acks=all, read back)")
    print(f"  held still open          {still:8d} of {connections}; refused for open files: {refused:.0f}")
    if past is not None:
        print(f"  past the budget          {past[0]:8.2f} s  for {past_budget:,} more, each evicting the longest "
              f"idle; broker CPU {past[1]:,.0f} us per connection; ApiVersions {past[2]:.2f} ms median after")
    print(f"  clean stop               exit {code}; error lines in the log: {len(bad)}")
    for line in bad[:5]:
        print(f"    {line}")
    ok = still == connections and code == 0 and not bad and refused == 0
    print("  OK" if ok else "  FAILED")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--connections", type=int, default=CONNECTIONS, help="idle connections to hold")
    parser.add_argument("--past-budget", type=int, default=PAST_BUDGET,
                        help="connections opened past the budget once it is full (0: skip)")
    args = parser.parse_args(argv)
    try:
        return run(args.connections, args.past_budget)
    finally:
        kill_all()


if __name__ == "__main__":
    sys.exit(main())
