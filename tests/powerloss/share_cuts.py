"""Power cuts under a share group (KIP-932): what a share consumer was answered must survive the cut.

One scenario, run with a cut at a chosen moment: a topic of RECORDS records (acks=all); a share group from
the earliest offset; member H acquires one batch and holds it (never acknowledges: its lock outlasts the
test); member A accepts batch after batch (explicit acknowledgement, `commit_sync`) until `accept_at_least`
records are accepted. Then the power is cut (the lazy file system of `tests/powerloss/` drops everything
not fsynced), either

- `after-answer`: right after A's last `commit_sync` was answered, or
- `at-state-write`: at the write to a `__share_group_state` segment that A's last commit makes, or
- `at-state-fsync`: at the fsync of that segment, the write done but not yet durable
  (the file system freezes there: that commit is never answered and its batch never durable, so it is *cut
  short* and must come back, as must everything not accepted).

The broker starts again on what survived and a new member B reads the share group until every record it
should get has come (and a little longer). What must hold:

- no record whose ACCEPT was answered is delivered again;
- no record is lost: every record not accepted is delivered to B, the batch whose commit was cut short
  included;
- every record H held (acquired, never acknowledged) comes back to B, with a delivery count above one.

`tests/integration/test_power_loss_share.py` runs one cut of each kind in `make test`; `make soak` runs
`python -m tests.powerloss.share_cuts --cuts N` (every kind of cut, at random thresholds) after the main
campaign. Runs on the caller's thread; A's last commit runs on a thread of its own while the cut waits.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_flush, ck_producer, close_clients
from tests.powerloss.mount import LazyMount
from tests.powerloss.triggers import Trigger

RECORDS = 400
BATCH = 10
OVERRIDES = {
    "offsets.topic.num.partitions": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "share.coordinator.state.topic.segment.bytes": str(16 * 1024),  # the state topic rolls under the test
    "group.share.record.lock.duration.ms": "600000",  # H's lock outlasts the test: only the cut frees it
}
STATE_WRITE = "*/__share_group_state-*/*.log"
DEADLINE_S = 90.0  # polled: a loaded machine is slow, a stuck broker never answers
TRIGGER_S = 30.0
QUIET_S = 3.0  # B keeps polling this long after it has everything, to see nothing more comes
COMMIT_S = 20.0
#: the lazy file system reads its control file at an operation at most every 0.1 s: after this long, the
#: next operation (at the latest) arms the trigger
ARM_S = 0.3
#: cut -> the file-system operation on a `__share_group_state` segment it freezes at (None: no trigger)
CUTS: dict[str, str | None] = {"after-answer": None, "at-state-write": "write", "at-state-fsync": "fsync"}


@dataclass
class Outcome:
    accepted: set[str] = field(default_factory=set)
    held: set[str] = field(default_factory=set)
    cut_short: set[str] = field(default_factory=set)
    after: dict[str, int] = field(default_factory=dict)  # value -> delivery count, as B got it
    violations: list[str] = field(default_factory=list)


def _consumer(bootstrap: str, group: str, topic: str, name: str, max_records: int = 500) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                              "share.acknowledgement.mode": "explicit", "max.poll.records": max_records})
    consumer.subscribe([topic])
    return consumer


def _poll(consumer: ShareConsumer, deadline: float) -> list[Any]:
    while True:
        batch = [m for m in consumer.poll(0.5) if m.error() is None]
        if batch:
            return batch
        assert time.monotonic() < deadline, "no records handed out in time"


def _commit(consumer: ShareConsumer) -> bool:
    """`commit_sync`; True when it was answered with no error for any partition."""
    try:
        answered = consumer.commit_sync(COMMIT_S)
    except Exception:  # a commit cut short by the power is not answered: any error is that
        return False
    return all(getattr(tp, "error", None) is None for tp in (answered or []))


def setup(bootstrap: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"pl-share-{suffix}", f"pl-share-group-{suffix}"
    admin = ck_admin(bootstrap)  # held in a name: a collected AdminClient cancels its futures
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    producer = ck_producer(bootstrap, **{"acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(RECORDS):  # batches of BATCH records: a fetch hands out whole batches
        producer.produce(topic, value=f"r{i}".encode(), partition=0)
        if i % BATCH == BATCH - 1:
            ck_flush(producer)
    ck_flush(producer)
    return topic, group


def run(broker: BrokerProcess, lazy: LazyMount, cut: str, *, accept_at_least: int = RECORDS // 3) -> Outcome:
    """The scenario on a started broker over `lazy`; the broker is running again when it returns."""
    topic, group = setup(broker.bootstrap)
    out = Outcome()
    worker: threading.Thread | None = None
    deadline = time.monotonic() + DEADLINE_S
    holder = _consumer(broker.bootstrap, group, topic, "holder", max_records=BATCH)
    out.held = {m.value().decode() for m in _poll(holder, deadline)}
    acceptor = _consumer(broker.bootstrap, group, topic, "acceptor", max_records=3 * BATCH)
    while True:
        batch = _poll(acceptor, deadline)
        values = {m.value().decode() for m in batch}
        last = len(out.accepted) + len(values) >= accept_at_least
        trigger = CUTS[cut] if last else None
        if trigger is not None:  # armed before the acknowledgements exist
            lazy.arm(Trigger(trigger, STATE_WRITE, 1))
            time.sleep(ARM_S)
        for m in batch:
            acceptor.acknowledge(m, AcknowledgeType.ACCEPT)
        if trigger is not None:
            worker = threading.Thread(target=_commit, args=(acceptor,), daemon=True, name="last-commit")
            worker.start()
            until = time.monotonic() + TRIGGER_S
            while lazy.fired() is None and worker.is_alive() and time.monotonic() < until:
                time.sleep(0.01)
            if lazy.fired() is None:
                out.violations.append(f"no {trigger} of {STATE_WRITE} was reached while the commit ran")
            out.cut_short = values  # the file system froze before its state write or fsync
            break
        assert _commit(acceptor), "a commit failed before any cut"
        out.accepted |= values
        if last:
            break
    broker.kill9()  # the power cut: the broker dies, then the file system forgets what was not durable
    lazy.kill_frozen()
    close_clients()
    if worker is not None:  # the commit ends with the broker gone; the consumer is then free to close
        worker.join(COMMIT_S + 5)
    holder.close()  # with the broker dead: its records are released by the cut, not by a leave
    acceptor.close()
    lazy.cut()
    lazy.mount()
    broker.start()
    _read_after(broker.bootstrap, group, topic, out)
    _judge(out)
    return out


def _read_after(bootstrap: str, group: str, topic: str, out: Outcome) -> None:
    expected = {f"r{i}" for i in range(RECORDS)} - out.accepted
    reader = _consumer(bootstrap, group, topic, "after-the-cut")
    try:
        deadline, quiet_until = time.monotonic() + DEADLINE_S, None
        while time.monotonic() < (quiet_until or deadline):
            for m in reader.poll(0.3):
                if m.error() is not None:
                    continue
                value = m.value().decode()
                out.after[value] = max(out.after.get(value, 0), m.delivery_count() or 0)
                reader.acknowledge(m, AcknowledgeType.ACCEPT)
            reader.commit_sync(COMMIT_S)
            if quiet_until is None and expected <= set(out.after):
                quiet_until = time.monotonic() + QUIET_S
    finally:
        reader.close()


def _judge(out: Outcome) -> None:
    again = sorted(out.accepted & set(out.after))
    if again:
        out.violations.append(f"{len(again)} accepted records delivered again after the cut: {again[:5]}")
    lost = sorted({f"r{i}" for i in range(RECORDS)} - out.accepted - set(out.after))
    if lost:
        out.violations.append(f"{len(lost)} records lost: {lost[:5]}")
    unreturned = sorted(out.held - set(out.after))
    if unreturned:
        out.violations.append(f"{len(unreturned)} held records never came back: {unreturned[:5]}")
    recounted = sorted(v for v in out.held & set(out.after) if out.after[v] < 2)
    if recounted:
        out.violations.append(f"{len(recounted)} held records came back with delivery count 1: {recounted[:5]}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.powerloss.share_cuts", description=__doc__.split("\n")[0])
    parser.add_argument("--cuts", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"share group power cuts: {args.cuts} cuts, seed {seed}", flush=True)
    failures = 0
    with tempfile.TemporaryDirectory() as workdir:
        lazy = LazyMount(Path(workdir) / "backing", Path(workdir) / "mnt").mount()
        broker = BrokerProcess(Path(workdir) / "broker", OVERRIDES, log_dirs=[lazy.mountpoint])
        try:
            broker.start()
            for n in range(1, args.cuts + 1):
                cut, at_least = rng.choice(list(CUTS)), rng.randint(1, RECORDS - 50)
                out = run(broker, lazy, cut, accept_at_least=at_least)
                print(f"cut {n}/{args.cuts} {cut} (accept >= {at_least}): {len(out.accepted)} "
                      f"accepted, {len(out.cut_short)} cut short, {len(out.held)} held, {len(out.after)} after; "
                      f"{len(out.violations)} violations", flush=True)
                for line in out.violations:
                    print(f"  {line}", flush=True)
                failures += bool(out.violations)
        finally:
            close_clients()
            broker.close()
            lazy.unmount()
    print(f"share group power cuts: {failures} of {args.cuts} cuts with violations", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
