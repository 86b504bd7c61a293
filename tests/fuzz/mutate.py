"""A deterministic mutator: input number `index` of campaign `seed` is always the same bytes.

Every input is a byte stream for one fresh connection: one request frame (most often) or a few
pipelined (then sometimes dealt alternately to two connections at once, for races between them), each taken from the golden seeds and mutated. The (api, version) is drawn first and the seed
frame of that key second, so versions with one seed get as much attention as those with twenty. Each
frame gets a correlation id of its own before mutation, so answers can be matched to requests.

Two kinds of mutation. Field mutations decode the seed with our codecs, change one value of the
message (a count, size, offset or timeout to an edge value, a name to an illegal, long or existing one,
an array emptied, nulled or its element repeated) and encode it again: well-framed requests with hostile
meaning, which reach the handlers. Byte mutations reach the decoder and the framing: bit flips; bytes
set to 0x00, 0x7F, 0x80 or 0xFF; cuts; random inserts; a length or count
field (int16, int32 or varint at a random offset) set to a huge, negative or zero value; splicing the
head of one frame onto the tail of another; a slice repeated (a field or an array element twice).
A few inputs are left as they are (the valid paths move the broker's state along), and a few get a
size prefix that lies.
"""

from __future__ import annotations

import dataclasses
import random
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pybroker.protocol.frame_codec import decode_request, encode_request

HEADER_FIXED = 8  # api key, api version, correlation id
SPECIAL_BYTES = (0x00, 0x7F, 0x80, 0xFF)
INT16_VALUES = (-1, -2, 0, 0x7FFF, -0x8000, 1, 0x100)
INT32_VALUES = (-1, -2, 0, 0x7FFFFFFF, -0x80000000, 0x10000, 0x7FFFFFF0, 1_000_000)
# unsigned varints (compact lengths/counts are length+1): huge, 0 (null), 1 (empty), 5-byte max
VARINTS = (b"\x00", b"\x01", b"\xff\xff\xff\xff\x07", b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08",
           b"\xff\xff\x03", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")


@dataclass(frozen=True, slots=True)
class FuzzInput:
    """One connection's bytes and the correlation ids of the whole frames in them, in order."""

    seed: int
    index: int
    data: bytes
    correlation_ids: tuple[int, ...]
    sources: tuple[str, ...]  # "k00v07" for each frame, for the report
    connections: int = 1  # 2: the frames go alternately to two connections fed at the same time


def _flip(rng: random.Random, frame: bytearray, lo: int) -> None:
    at = rng.randrange(lo, len(frame))
    frame[at] ^= 1 << rng.randrange(8)


def _set_special(rng: random.Random, frame: bytearray, lo: int) -> None:
    frame[rng.randrange(lo, len(frame))] = rng.choice(SPECIAL_BYTES)


def _cut(rng: random.Random, frame: bytearray, lo: int) -> None:
    at = rng.randrange(lo, len(frame))
    if rng.random() < 0.7:
        del frame[at:]
    else:
        del frame[at : at + rng.randint(1, 8)]


def _insert(rng: random.Random, frame: bytearray, lo: int) -> None:
    at = rng.randrange(lo, len(frame) + 1)
    frame[at:at] = rng.randbytes(rng.randint(1, 8))


def _length(rng: random.Random, frame: bytearray, lo: int) -> None:
    at = rng.randrange(lo, len(frame))
    kind = rng.randrange(3)
    if kind == 0:
        value = struct.pack(">h", rng.choice(INT16_VALUES))
    elif kind == 1:
        value = struct.pack(">i", rng.choice(INT32_VALUES))
    else:
        value = rng.choice(VARINTS)
    frame[at : at + len(value)] = value


def _repeat(rng: random.Random, frame: bytearray, lo: int) -> None:
    start = rng.randrange(lo, len(frame))
    end = min(len(frame), start + rng.randint(1, 64))
    piece = frame[start:end]
    frame[end:end] = piece * rng.randint(1, 3)


INTS = (0, -1, 1, 2, -2, 0x7F, 0xFF, 0x100, 0x7FFF, -0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 1 << 31,
        0x7FFFFFFFFFFFFFFF, -0x8000000000000000, 1_000_000, 5000)
STRINGS = ("", "\n", "evil\n", ".", "..", "a/b", "__consumer_offsets", "x" * 249, "x" * 250, "y" * 300,
           "\u00e9\u4e2d\U0001f600", "\x00", "kp-golden", "aio-golden", "ck-golden", "kcat-golden",
           "kp-golden-group", "aio-golden-group", "cleanup.policy", "compact", "retention.ms", "-1")
BYTES = (b"", b"\x00", b"\xff" * 8, bytes(61), b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x3d\x00\x00\x00\x00\x02")


def _slots(obj: Any, out: list[tuple[Any, Any, Any]], depth: int = 0) -> None:
    """(container, key, value) for every field and array element in a decoded message."""
    if depth > 6:
        return
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        out.append((obj, f.name, value))
        _children(value, out, depth)


def _children(value: Any, out: list[tuple[Any, Any, Any]], depth: int) -> None:
    if isinstance(value, list):
        for i, element in enumerate(value):
            out.append((value, i, element))
            _children(element, out, depth + 1)
    elif dataclasses.is_dataclass(value):
        _slots(value, out, depth + 1)


def _new_value(rng: random.Random, value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice(INTS) if rng.random() < 0.8 else value + rng.choice((-1, 1))
    if isinstance(value, str):
        return rng.choice(STRINGS)
    if isinstance(value, list):
        roll = rng.random()
        if not value or roll < 0.25:
            return [] if rng.random() < 0.8 else None
        if roll < 0.7:
            return value + [value[rng.randrange(len(value))]] * rng.choice((1, 1, 2, 50, 1000))
        return value[: rng.randrange(len(value))]
    if isinstance(value, uuid.UUID):
        return rng.choice((uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))))
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        if data and rng.random() < 0.5:  # records: one byte of the batch, past the header fields
            at = rng.randrange(len(data))
            return data[:at] + bytes([rng.choice(SPECIAL_BYTES)]) + data[at + 1 :]
        return rng.choice(BYTES)
    if value is None:
        return rng.choice(("", [], 0, b""))
    return value


def field_mutation(rng: random.Random, frame: bytearray) -> bytearray | None:
    """The frame with one value of its decoded message changed, re-encoded; None if it cannot be."""
    try:
        header, request = decode_request(frame)
    except Exception:
        return None
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        slots: list[tuple[Any, Any, Any]] = []
        _slots(request, slots)
        if not slots:
            return None
        container, key, value = rng.choice(slots)
        replacement = _new_value(rng, value)
        if isinstance(container, list):
            container[key] = replacement
        else:
            try:
                setattr(container, key, replacement)
            except TypeError:  # a compiled (mypyc) message checks types on assignment, as encoding would
                return None
    try:
        encoded = encode_request(request, header.api_version, header.correlation_id, header.client_id)
    except Exception:  # a value the field's type cannot carry: the next input will do better
        return None
    return bytearray(encoded[4:])


MUTATIONS: tuple[Callable[[random.Random, bytearray, int], None], ...] = (
    _flip, _flip, _set_special, _set_special, _cut, _insert, _length, _length, _repeat)


class Mutator:
    def __init__(self, seeds: dict[tuple[int, int], list[bytes]]) -> None:
        self.keys = sorted(seeds)
        self.seeds = seeds

    def _pick(self, rng: random.Random) -> tuple[tuple[int, int], bytes]:
        key = rng.choice(self.keys)
        return key, rng.choice(self.seeds[key])

    def input(self, seed: int, index: int) -> FuzzInput:
        rng = random.Random(f"{seed}:{index}")  # a str seed hashes the same in every process
        count = 1 if rng.random() < 0.7 else rng.randint(2, 4)
        data = bytearray()
        ids: list[int] = []
        sources: list[str] = []
        for n in range(count):
            key, original = self._pick(rng)
            frame = bytearray(original)
            correlation_id = (index * 8 + n) & 0x7FFFFFFF
            struct.pack_into(">i", frame, 4, correlation_id)
            self._mutate(rng, frame)
            sources.append(f"k{key[0]:02d}v{key[1]:02d}")
            size = len(frame)
            if rng.random() < 0.02:  # a size prefix that lies: shorter, longer, negative, huge
                size = rng.choice((max(size - rng.randint(1, 16), 0), size + rng.randint(1, 16), -1,
                                   0x7FFFFFFF, 0))
            data += struct.pack(">i", size) + frame
            if HEADER_FIXED <= size <= len(frame):  # a prefix that lies short still frames a request
                ids.append(struct.unpack_from(">i", frame, 4)[0])
            if size != len(frame):
                break  # the stream is out of step from here on: nothing after it is a frame
        # drawn apart, so adding this mode left every earlier input of a seed as it was
        together = len(ids) >= 2 and random.Random(f"{seed}:{index}:connections").random() < 0.3
        return FuzzInput(seed, index, bytes(data), tuple(ids), tuple(sources), 2 if together else 1)

    def _mutate(self, rng: random.Random, frame: bytearray) -> None:
        roll = rng.random()
        if roll < 0.08:
            return  # valid input moves the broker's state along
        if roll < 0.45:
            mutated = field_mutation(rng, frame)
            if mutated is not None:
                frame[:] = mutated
                return
        if roll < 0.5:  # splice: this frame's head onto another's tail
            _, other = self._pick(rng)
            frame[rng.randrange(HEADER_FIXED, len(frame) + 1):] = other[rng.randrange(HEADER_FIXED, len(other) + 1):]
        lo = HEADER_FIXED if rng.random() < 0.9 else 0  # the header is mutated too, sometimes
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4, 8))):
            if len(frame) <= lo:
                break
            rng.choice(MUTATIONS)(rng, frame, lo)


def inputs(mutator: Mutator, seed: int, indices: Sequence[int] | range) -> list[FuzzInput]:
    return [mutator.input(seed, i) for i in indices]
