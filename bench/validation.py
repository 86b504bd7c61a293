"""What produce-path validation costs, per batch and per record, in-process (no broker, no client).

For each record size (100 B, 1 KiB, 10 KiB values, a 16-byte key and one header each) a batch holds
about 1 MiB of records; it is built once per codec and then validated repeatedly with
`validate_produce_records` (header, CRC-32C, decompression under the cap, the record walk), with the
compiled walk and with the same walk run from its Python source. For compressed batches the table
also splits out decompression alone: that part runs in a worker thread on the broker, the rest of an
uncompressed batch's cost is event-loop time. "header+CRC" is what the produce path checked before
records were walked (the 61-byte header and the CRC-32C), for comparison.

    .venv/bin/python bench/validation.py [--seconds S]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from pybroker.broker import compiled_modules  # noqa: E402
from pybroker.protocol.records import records_check  # noqa: E402
from pybroker.protocol.records.batch import HEADER_SIZE, parse_header  # noqa: E402
from pybroker.protocol.records.codecs import CODEC_NAMES, decompress  # noqa: E402
from pybroker.protocol.records.record import Record, build_batch  # noqa: E402
from pybroker.protocol.records.validate import check_produce_batch, validate_produce_records  # noqa: E402

SIZES = (100, 1024, 10 * 1024)
BATCH_BYTES = 1 << 20
CODECS = (0, 1, 2, 3, 4)


def _batch(size: int, codec: int) -> tuple[bytes, int]:
    count = max(1, BATCH_BYTES // size)
    records = [Record(i, i, os.urandom(8).hex().encode(), os.urandom(size // 2 + 1).hex().encode()[:size],
                      [("trace", b"0123456789abcdef")]) for i in range(count)]
    return build_batch(records, base_timestamp=1_700_000_000_000, compression=codec), count


def _per_call(fn: Callable[[], object], seconds: float) -> float:
    fn()
    calls = 0
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        fn()
        calls += 1
    return elapsed / calls


@contextlib.contextmanager
def _walking(module: ModuleType) -> Iterator[None]:
    """Validation walks records with `module` inside the block (swapped once, outside the timed calls)."""
    saved, saved_implementation = records_check.walk_module(), records_check.WALK_IMPLEMENTATION
    records_check.use_walk(module, "measured")
    try:
        yield
    finally:
        records_check.use_walk(saved, saved_implementation)


def run(seconds: float) -> None:
    pure = compiled_modules.load_pure_walk()
    print(f"record walk in use: {records_check.WALK_IMPLEMENTATION}")
    print(f"batches of ~{BATCH_BYTES >> 10} KiB of records; each record: a 16 B key, a value of the size "
          "shown (hex text, ~2:1 compressible), one 21 B header; times are the whole validate_produce_records "
          "call (header, CRC, decompression, walk)\n")
    print(f"{'value':>7} {'codec':>6} {'records':>7} {'batch B':>8} | {'compiled':>21} | "
          f"{'pure Python':>21} | {'decompress alone':>16} | {'header+CRC':>10}")
    print(f"{'':>7} {'':>6} {'':>7} {'':>8} | {'us/batch':>10} {'ns/record':>10} | {'us/batch':>10} "
          f"{'ns/record':>10} | {'us/batch':>16} | {'us/batch':>10}")
    for size in SIZES:
        for codec in CODECS:
            raw, count = _batch(size, codec)
            header = parse_header(raw)

            def validate(raw: bytes = raw) -> object:
                return validate_produce_records(raw, max_batch_bytes=len(raw) + 1, allow_zstd=True)

            compiled = _per_call(validate, seconds) if records_check.COMPILED else float("nan")
            with _walking(pure):
                python = _per_call(validate, seconds)
            inflate = float("nan")
            if codec:
                inflate = _per_call(lambda raw=raw, header=header: decompress(
                    header.compression, memoryview(raw)[HEADER_SIZE:], 64 << 20), seconds)
            header_only = _per_call(lambda raw=raw: check_produce_batch(raw, max_batch_bytes=len(raw) + 1,
                                                                         allow_zstd=True), seconds)
            print(f"{size:>7} {CODEC_NAMES[codec]:>6} {count:>7} {len(raw):>8} | {compiled * 1e6:>10.0f} "
                  f"{compiled * 1e9 / count:>10.0f} | {python * 1e6:>10.0f} {python * 1e9 / count:>10.0f} | "
                  f"{inflate * 1e6:>16.0f} | {header_only * 1e6:>10.0f}")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=0.3, help="time spent on each measurement")
    run(parser.parse_args(argv).seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
