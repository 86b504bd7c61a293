"""A deterministic mutator: input number `index` of campaign `seed` is always the same bytes.

Every input is a byte stream for one fresh connection: one request frame (most often) or a few
pipelined, each taken from the golden seeds and mutated. The (api, version) is drawn first and the seed
frame of that key second, so versions with one seed get as much attention as those with twenty. Each
frame gets a correlation id of its own before mutation, so answers can be matched to requests.

Mutations: bit flips; bytes set to 0x00, 0x7F, 0x80 or 0xFF; cuts; random inserts; a length or count
field (int16, int32 or varint at a random offset) set to a huge, negative or zero value; splicing the
head of one frame onto the tail of another; a slice repeated (a field or an array element twice).
A few inputs are left as they are (the valid paths move the broker's state along), and a few get a
size prefix that lies.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
        return FuzzInput(seed, index, bytes(data), tuple(ids), tuple(sources))

    def _mutate(self, rng: random.Random, frame: bytearray) -> None:
        roll = rng.random()
        if roll < 0.08:
            return  # valid input moves the broker's state along
        if roll < 0.12:  # splice: this frame's head onto another's tail
            _, other = self._pick(rng)
            frame[rng.randrange(HEADER_FIXED, len(frame) + 1):] = other[rng.randrange(HEADER_FIXED, len(other) + 1):]
        lo = HEADER_FIXED if rng.random() < 0.9 else 0  # the header is mutated too, sometimes
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4, 8))):
            if len(frame) <= lo:
                break
            rng.choice(MUTATIONS)(rng, frame, lo)


def inputs(mutator: Mutator, seed: int, indices: Sequence[int] | range) -> list[FuzzInput]:
    return [mutator.input(seed, i) for i in indices]
