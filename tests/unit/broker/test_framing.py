"""The size-prefix splitter: limits are enforced on the prefix, frames come out whole and writable."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pybroker.protocol.framing import FrameDecoder, FrameError


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@given(st.lists(st.binary(max_size=50), max_size=10), st.lists(st.integers(1, 40), max_size=20))
def test_any_split_of_the_stream_gives_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(_frame(p) for p in payloads)
    decoder = FrameDecoder(1000)
    out: list[bytes] = []
    pos = 0
    for cut in cuts:
        out += [bytes(f) for f in decoder.feed(stream[pos : pos + cut])]
        pos += cut
    out += [bytes(f) for f in decoder.feed(stream[pos:])]
    assert out == payloads
    assert decoder.buffered == 0


def test_oversized_prefix_fails_before_buffering() -> None:
    decoder = FrameDecoder(100)
    with pytest.raises(FrameError):
        decoder.feed(struct.pack(">i", 101))


def test_negative_prefix_fails() -> None:
    with pytest.raises(FrameError):
        FrameDecoder(100).feed(struct.pack(">i", -1) + b"xx")


def test_frames_are_writable() -> None:
    (frame,) = FrameDecoder(100).feed(_frame(b"abc"))
    frame[0] = ord("x")
    assert bytes(frame) == b"xbc"
