"""The fuzzer's starting points: golden request frames, captured from stock clients or generated.

A seed file is one request frame without its size prefix, named `k<key>v<version>-<source>-<n>.bin`.
`<source>` is the client that sent it (kafka-python, librdkafka, aiokafka, kcat) or `generated` for an
(api, version) that no stock client sends: those are re-encoded by our codecs from a captured frame of
the same API at the nearest version (so they name the topics and groups the captured traffic made), or
built from the message's defaults when no version of that API was captured.

    .venv/bin/python -m tests.fuzz.seeds      # refresh only the generated seeds
"""

from __future__ import annotations

import struct
from collections import defaultdict
from pathlib import Path

from pybroker.broker.dispatch import load_handlers, supported_versions
from pybroker.protocol.frames import decode_request, encode_request
from pybroker.protocol.messages import REQUESTS

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
GENERATED = "generated"


def advertised() -> list[tuple[int, int]]:
    """Every (api key, version) the broker's ApiVersions answer advertises."""
    load_handlers()
    return [(key, v) for key, lo, hi in supported_versions() for v in range(lo, hi + 1)]


def seed_files(directory: Path = GOLDEN_DIR) -> list[Path]:
    return sorted(directory.glob("k*v*-*.bin"))


def key_of(frame: bytes) -> tuple[int, int]:
    api_key, version = struct.unpack_from(">hh", frame)
    return api_key, version


def load_seeds(directory: Path = GOLDEN_DIR) -> dict[tuple[int, int], list[bytes]]:
    """Seed frames by (api key, version), in file-name order (deterministic for the mutator)."""
    seeds: dict[tuple[int, int], list[bytes]] = defaultdict(list)
    for path in seed_files(directory):
        frame = path.read_bytes()
        seeds[key_of(frame)].append(frame)
    return dict(seeds)


def _captured(directory: Path) -> dict[tuple[int, int], list[bytes]]:
    seeds: dict[tuple[int, int], list[bytes]] = defaultdict(list)
    for path in seed_files(directory):
        if f"-{GENERATED}-" not in path.name:
            frame = path.read_bytes()
            seeds[key_of(frame)].append(frame)
    return seeds


def generate(api_key: int, version: int, captured: dict[tuple[int, int], list[bytes]]) -> bytes:
    """A frame for (api_key, version): a captured request of the nearest version re-encoded, or defaults."""
    others = sorted((abs(v - version), v) for (k, v) in captured if k == api_key)
    for _, other in others:
        for frame in captured[(api_key, other)]:
            try:
                _, request = decode_request(bytearray(frame))
                return encode_request(request, version, 0, "pybroker-generated")[4:]
            except Exception:  # a value the other version cannot carry: try the next one
                continue
    return encode_request(REQUESTS[api_key](), version, 0, "pybroker-generated")[4:]


def write_generated_seeds(directory: Path = GOLDEN_DIR) -> int:
    """Write a generated seed for every advertised (api, version) no captured frame covers."""
    for old in directory.glob(f"*-{GENERATED}-*.bin"):
        old.unlink()
    captured = _captured(directory)
    written = 0
    for api_key, version in advertised():
        if (api_key, version) not in captured:
            frame = generate(api_key, version, captured)
            (directory / f"k{api_key:02d}v{version:02d}-{GENERATED}-0.bin").write_bytes(frame)
            written += 1
    return written


if __name__ == "__main__":
    print(f"{write_generated_seeds()} generated seeds written to {GOLDEN_DIR}")
