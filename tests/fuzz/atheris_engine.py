"""Coverage-guided fuzzing of the same target with atheris (libFuzzer), an optional engine for `make fuzz`.

    .venv/bin/pip install atheris          # or: pip install -e '.[fuzz]'
    .venv/bin/python -m tests.fuzz.atheris_engine -runs=1000000 -seed=7 CORPUS_DIR

Where the seeded mutator of `tests/fuzz/run.py` knows the message structure, libFuzzer knows which
inputs reached new code: the broker's modules are instrumented, the corpus starts from the golden frames
(each with its size prefix) and grows with every input that covers something new. An input is one
connection's byte stream, exactly as the seeded campaign feeds it; a finding raises, so libFuzzer saves
the input as `crash-<sha1>` (replay it with `python -m tests.fuzz.run --replay crash-...`).
The bounded run of `make test` does not use this engine.
"""

from __future__ import annotations

import asyncio
import struct
import sys
from pathlib import Path
from typing import Any

import atheris

with atheris.instrument_imports(include=["pybroker"]):
    from tests.fuzz.known import known_finding, known_rule
    from tests.fuzz.seeds import load_seeds
    from tests.fuzz.target import FuzzTarget, replay_bytes


class FuzzFinding(Exception):
    """A finding of the target, raised for libFuzzer to save the input."""


def _seed_corpus(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        return
    for (api_key, version), frames in sorted(load_seeds().items()):
        for n, frame in enumerate(frames):
            (directory / f"k{api_key:02d}v{version:02d}-{n}").write_bytes(struct.pack(">i", len(frame)) + frame)


def main(argv: list[str]) -> None:
    corpus = next((Path(a) for a in argv[1:] if not a.startswith("-")), None)
    if corpus is not None:
        _seed_corpus(corpus)
    loop = asyncio.new_event_loop()
    target = FuzzTarget(known=known_rule, alarm=False)  # SIGALRM is atheris's: its -timeout bounds an input
    loop.run_until_complete(target.__aenter__())
    count = 0

    def one_input(data: bytes) -> None:
        nonlocal count
        count += 1
        finding = loop.run_until_complete(target.run(replay_bytes(data, seed=-1, index=count)))
        if finding is not None and known_finding(finding.kind, finding.detail) is None:
            raise FuzzFinding(f"{finding.kind}: {finding.detail}")

    args: list[Any] = [argv[0], "-timeout=30", "-rss_limit_mb=4096", *argv[1:]]
    atheris.Setup(args, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
