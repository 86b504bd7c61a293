"""What the codecs cost, compiled (mypyc, setup.py) against the same source run as pure Python, in-process.

Decode and encode of the hot requests and responses (Produce v9 with 16 partitions of 1 KiB record
sets; Fetch v12-v16 with 100 partitions, the response with 1 KiB record sets), the primitives the
generated codecs call (varints, compact strings), and the record-batch code (building a batch of 100
records, decoding it, validating a ~1 MiB batch of 1 KiB records as produce does). Record sets stay
opaque in the messages (a view of the request), so the figures are the cost of the structure around them.

Times are CPU time per call, the best of 5 rounds. Each side runs in its own child process: the pure one imports pybroker's modules from their .py source
even where an extension is installed beside it, so both sides run the same code.

    .venv/bin/python bench/codecs.py [--seconds S]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from importlib.abc import MetaPathFinder
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

FETCH_VERSIONS = (12, 13, 14, 15, 16)
RECORDS = bytes(1024)


class _SourceFirst(MetaPathFinder):
    """Imports pybroker's modules from their .py source where an extension sits beside it."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if not name.startswith("pybroker.") or path is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return spec
        origin = spec.origin or ""
        source = origin[: origin.find(".", origin.rfind("/") + 1)] + ".py"
        return importlib.util.spec_from_file_location(name, source) if os.path.exists(source) else spec


def _per_call(fn: Callable[[], object], seconds: float, rounds: int = 5) -> float:
    """CPU seconds per call: the best of `rounds` (CPU time, not wall time: on a shared machine the
    wall clock counts other processes' turns; the best round is the one least disturbed)."""
    fn()
    best = float("inf")
    for _ in range(rounds):
        calls = 0
        started = time.process_time()
        while (elapsed := time.process_time() - started) < seconds / rounds:
            fn()
            calls += 1
        best = min(best, elapsed / calls)
    return best


def _cases() -> dict[str, Callable[[], object]]:
    """name -> one call of what is measured (imported here: after the child chose its import order)."""
    from pybroker.protocol import primitives as p
    from pybroker.protocol.messages import fetch as f
    from pybroker.protocol.messages import produce as pr
    from pybroker.protocol.records import varint
    from pybroker.protocol.records.batch import parse_header
    from pybroker.protocol.records.record import Record, build_batch, decode_records
    from pybroker.protocol.records.validate import validate_produce_records

    cases: dict[str, Callable[[], object]] = {}

    def codec(name: str, message: Any, version: int) -> None:
        encoded = message.encode(version)
        cls = type(message)
        cases[f"{name} decode"] = lambda: cls.decode(encoded, version)
        cases[f"{name} encode"] = lambda: message.encode(version)

    codec("Produce v9 request", pr.ProduceRequest(None, -1, 30000, [pr.TopicProduceData("bench", [
        pr.PartitionProduceData(i, RECORDS) for i in range(16)])]), 9)
    codec("Produce v9 response", pr.ProduceResponse([pr.TopicProduceResponse("bench", [
        pr.PartitionProduceResponse(i, 0, 1000 * i) for i in range(16)])]), 9)
    topic_id = uuid.uuid4()
    for v in FETCH_VERSIONS:
        codec(f"Fetch v{v} request", f.FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, session_id=0,
                                                  topics=[f.FetchTopic("bench", topic_id, [
                                                      f.FetchPartition(i, 0, 1000 * i, -1, -1, 1 << 20)
                                                      for i in range(100)])]), v)
    for v in FETCH_VERSIONS:
        codec(f"Fetch v{v} response", f.FetchResponse(responses=[f.FetchableTopicResponse("bench", topic_id, [
            f.PartitionData(i, 0, 2000, 2000, 0, records=RECORDS) for i in range(100)])]), v)

    varints = bytearray()
    for value in (5, 300, 70000, 2_000_000):
        p.write_uvarint(varints, value)
    text = bytearray()
    p.write_compact_string(text, "a-topic-name-of-30-characters!")

    def read_uvarints() -> object:
        pos = 0
        for _ in range(4):
            _, pos = p.read_uvarint(varints, pos)
        return pos

    def write_uvarints() -> object:
        out = bytearray()
        for value in (5, 300, 70000, 2_000_000):
            p.write_uvarint(out, value)
        return out

    zigzag = bytearray()
    for value in (3, -300, 70000, -2_000_000):
        varint.write_varint(zigzag, value)

    def read_varints() -> object:
        pos = 0
        for _ in range(4):
            _, pos = varint.read_varint(zigzag, pos)
        return pos

    cases["4 uvarints read"] = read_uvarints
    cases["4 uvarints written"] = write_uvarints
    cases["4 zigzag varints read"] = read_varints
    cases["compact string read"] = lambda: p.read_compact_string(text, 0)
    cases["compact string written"] = lambda: p.write_compact_string(bytearray(), "a-topic-name-of-30-characters!")
    records = [Record(i, i, b"key-%d" % i, bytes(100), [("h", b"v")]) for i in range(100)]
    batch = build_batch(records, base_timestamp=1_700_000_000_000)
    cases["batch of 100 x 100 B built"] = lambda: build_batch(records, base_timestamp=1_700_000_000_000)
    header = parse_header(batch)
    cases["batch of 100 x 100 B decoded"] = lambda: decode_records(batch, 0, header)
    big = build_batch([Record(i, i, b"k", bytes(1024)) for i in range(1000)], base_timestamp=1_700_000_000_000)
    cases["1 MiB batch (1 KiB records) validated"] = lambda: validate_produce_records(
        big, max_batch_bytes=len(big) + 1, allow_zstd=True)
    return cases


def _child(pure: bool, seconds: float) -> dict[str, float]:
    if pure:
        sys.meta_path.insert(0, _SourceFirst())
    from pybroker.broker import compiled_modules as compiled

    cases = _cases()
    timings = {name: _per_call(fn, seconds) for name, fn in cases.items()}
    timings["_compiled_modules"] = float(len(compiled.compiled()))
    return timings


def _measure(pure: bool, seconds: float) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", "--seconds", str(seconds), *(["--pure"] if pure else [])]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=REPO_ROOT).stdout
    result: dict[str, float] = json.loads(out)
    return result


def run(seconds: float = 0.2) -> None:
    compiled = _measure(False, seconds)
    pure = _measure(True, seconds)
    print(f"compiled modules loaded: {compiled.pop('_compiled_modules'):.0f} compiled side, "
          f"{pure.pop('_compiled_modules'):.0f} pure side (0 when the install is pure Python: the ratio is then ~1)")
    print(f"{'':<40} {'compiled us':>12} {'pure us':>10} {'speed-up':>9}")
    for name, seconds_compiled in compiled.items():
        seconds_pure = pure[name]
        print(f"{name:<40} {seconds_compiled * 1e6:>12.2f} {seconds_pure * 1e6:>10.2f} "
              f"{seconds_pure / seconds_compiled:>8.1f}x")
    print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=0.2, help="time spent on each measurement")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.pure, args.seconds)))
    else:
        run(args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
