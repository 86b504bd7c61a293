"""The size-prefix splitter: limits are enforced on the prefix, frames come out whole and writable."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pybroker.protocol.frame_splitter import FrameDecoder, FrameError


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


@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(1, 80), max_size=30),
       st.lists(st.booleans(), max_size=30))
def test_refused_admission_holds_frames_back_without_losing_or_reordering_any(
        payloads: list[bytes], cuts: list[int], answers: list[bool]) -> None:
    """Whatever `admit` answers and however the stream is cut, retrying yields exactly the frames sent."""
    replies = iter(answers)
    admitted: list[int] = []

    def admit(size: int) -> bool:
        ok = next(replies, True)
        if ok:
            admitted.append(size)
        return ok

    stream = b"".join(_frame(p) for p in payloads)
    decoder = FrameDecoder(1000, admit)
    out: list[bytes] = []
    pos = 0
    for cut in cuts:
        out += [bytes(f) for f in decoder.feed(stream[pos : pos + cut])]
        pos += cut
    out += [bytes(f) for f in decoder.feed(stream[pos:])]
    while decoder.blocked:
        out += [bytes(f) for f in decoder.feed(b"")]
    assert out == payloads
    assert admitted == [len(p) for p in payloads]  # each frame admitted once, in order
    assert decoder.buffered == 0


def test_refused_frame_stops_the_decoder_before_anything_is_allocated() -> None:
    decoder = FrameDecoder(10_000_000, lambda size: size < 1000)
    frames = decoder.feed(_frame(b"small") + struct.pack(">i", 5_000_000) + b"xyz")
    assert [bytes(f) for f in frames] == [b"small"]
    assert decoder.blocked and decoder.partial_size == 0
    assert decoder.buffered == 7  # only the held-back bytes, no 5 MB buffer


def test_a_big_frame_is_allocated_once_and_filled_in_place() -> None:
    payload = bytes(range(256)) * 400
    stream = _frame(payload) + _frame(b"next")
    decoder = FrameDecoder(1_000_000)
    assert decoder.feed(stream[:10]) == []
    frame_buffer = decoder._frame
    assert frame_buffer is not None and len(frame_buffer) == len(payload) and decoder.partial_size == len(payload)
    for start in range(10, len(payload) - 1000, 1000):
        assert decoder.feed(stream[start : start + 1000]) == []
        assert decoder._frame is frame_buffer  # never reallocated or copied
    done = decoder.feed(stream[start + 1000 :])
    assert done[0] is frame_buffer and bytes(done[0]) == payload and bytes(done[1]) == b"next"
    assert decoder.partial_size == 0


def test_clear_drops_a_partial_frame() -> None:
    decoder = FrameDecoder(1_000_000)
    decoder.feed(struct.pack(">i", 500_000) + b"abc")
    assert decoder.buffered == 500_000
    decoder.clear()
    assert decoder.buffered == 0 and decoder.partial_size == 0


def _receive(decoder: FrameDecoder, scratch: memoryview, stream: bytes, pos: int, most: int) -> tuple[list[bytes], int]:
    """One `recv_into` of at most `most` bytes of `stream` into what the decoder lends: (frames, new pos)."""
    target = decoder.get_buffer(scratch)
    take = min(len(target), most, len(stream) - pos)
    target[:take] = stream[pos : pos + take]
    frames = decoder.buffer_updated(scratch, take)
    scratch[:] = b"\xff" * len(scratch)  # the scratch is lent again at once: no frame may alias it
    return [bytes(f) for f in frames], pos + take


@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(1, 120), min_size=1, max_size=30),
       st.lists(st.booleans(), max_size=30), st.integers(4, 64), st.integers(0, 400))
def test_receiving_into_lent_buffers_gives_the_same_frames(
        payloads: list[bytes], reads: list[int], answers: list[bool], scratch_size: int, large_frame: int) -> None:
    """The BufferedProtocol pair: however big each read and the scratch, whichever frames count as large
    (after one, only a size prefix is read into the scratch), and whatever `admit` answers, the frames
    come out whole and in order, each admitted once, and none shares the scratch."""
    replies = iter(answers)
    admitted: list[int] = []

    def admit(size: int) -> bool:
        ok = next(replies, True)
        if ok:
            admitted.append(size)
        return ok

    stream = b"".join(_frame(p) for p in payloads)
    scratch = memoryview(bytearray(scratch_size))
    decoder = FrameDecoder(1000, admit, large_frame=large_frame)
    out: list[bytes] = []
    pos = 0
    turn = 0
    while pos < len(stream) or decoder.blocked:
        if decoder.blocked:
            out += [bytes(f) for f in decoder.feed(b"")]
            continue
        frames, pos = _receive(decoder, scratch, stream, pos, reads[turn % len(reads)])
        out += frames
        turn += 1
    assert out == payloads
    assert admitted == [len(p) for p in payloads]
    assert decoder.buffered == 0


def test_a_big_frame_is_received_straight_into_its_own_buffer() -> None:
    payload = bytes(range(256)) * 400
    stream = _frame(payload) + _frame(b"next")
    scratch = memoryview(bytearray(64))
    decoder = FrameDecoder(1_000_000)
    frames, pos = _receive(decoder, scratch, stream, 0, 64)  # the prefix and the frame's first bytes
    assert frames == [] and decoder.partial_size == len(payload)
    frame_buffer = decoder._frame
    lent = decoder.get_buffer(scratch)
    assert lent.obj is frame_buffer and len(lent) == len(payload) - 60  # the rest of the frame, not the scratch
    lent[:] = stream[pos : pos + len(lent)]
    (done,) = decoder.buffer_updated(scratch, len(lent))
    assert done is frame_buffer and bytes(done) == payload
    assert _receive(decoder, scratch, stream, pos + len(lent), 64)[0] == [b"next"]


def test_after_a_large_frame_only_the_next_prefix_goes_through_the_scratch() -> None:
    """A produce load sends large frames back to back: a read into the whole scratch after one would
    take the next frame's first bytes there, to be copied again. Only its four-byte prefix is read
    there; the frame itself is received into its own buffer whole. A small frame lends the whole
    scratch again."""
    large, small = bytes(range(256)) * 4, b"small"
    stream = _frame(large) + _frame(large) + _frame(small) + _frame(small) + _frame(small)
    scratch = memoryview(bytearray(64))
    decoder = FrameDecoder(1_000_000, large_frame=1024)
    everything = len(stream)
    assert len(decoder.get_buffer(scratch)) == 64  # nothing received yet: the whole scratch
    frames, pos = _receive(decoder, scratch, stream, 0, everything)  # the prefix and the first 60 bytes
    assert (frames, pos) == ([], 64)
    frames, pos = _receive(decoder, scratch, stream, pos, everything)  # the rest, into the frame
    assert (frames, pos) == ([large], 4 + len(large))
    lent = decoder.get_buffer(scratch)
    assert lent.obj is scratch.obj and len(lent) == 4  # the next size prefix, and nothing more
    frames, pos = _receive(decoder, scratch, stream, pos, everything)
    assert frames == [] and decoder.partial_size == len(large)
    lent = decoder.get_buffer(scratch)
    assert lent.obj is decoder._frame and len(lent) == len(large)  # the whole frame, straight into its buffer
    frames, pos = _receive(decoder, scratch, stream, pos, everything)
    assert frames == [large]
    frames, pos = _receive(decoder, scratch, stream, pos, everything)  # the small frame's prefix alone
    assert frames == [] and decoder.partial_size == len(small)
    frames, pos = _receive(decoder, scratch, stream, pos, everything)
    assert frames == [small]
    assert len(decoder.get_buffer(scratch)) == 64  # after a small frame: the whole scratch again
    assert _receive(decoder, scratch, stream, pos, everything) == ([small, small], everything)
