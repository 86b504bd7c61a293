"""Hostile bytes into the request decoder: nothing but the typed errors may come out.

Random frames, random bodies behind a valid header, and valid frames with bytes flipped, cut or
inserted: a broker must answer or close, never crash (`DecodeError`, `UnknownApiKey`,
`UnsupportedVersion` are the only exceptions the server expects).
"""

from __future__ import annotations

import contextlib
import struct
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.protocol.frame_codec import UnknownApiKey, UnsupportedVersion, decode_request, encode_request
from pybroker.protocol.messages import REQUESTS, RESPONSES
from pybroker.protocol.primitives import DecodeError
from tests.schema_strategies import message_cases, message_strategy

TYPED = (DecodeError, UnknownApiKey, UnsupportedVersion)
KEY_VERSIONS = [(key, v) for key, cls in sorted(REQUESTS.items()) for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]
REQUEST_CASES = message_cases(("request",))


def _decode_quietly(frame: Any) -> None:
    with contextlib.suppress(*TYPED):
        decode_request(frame)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_random_frames(frame: bytes) -> None:
    _decode_quietly(frame)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(KEY_VERSIONS), st.binary(max_size=96), st.sampled_from([b"", b"\x00\x01x", b"\xff\xff"]))
def test_random_bodies_behind_a_valid_header(key_version: tuple[int, int], body: bytes, client: bytes) -> None:
    key, version = key_version
    _decode_quietly(struct.pack(">hhi", key, version, 1) + client + body)


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytearray:
    module, message, version = draw(st.sampled_from(REQUEST_CASES))
    request = draw(message_strategy(module, message, version))
    frame = bytearray(encode_request(request, version, 7, "fuzz")[4:])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "set"]))
        at = draw(st.integers(0, max(len(frame) - 1, 0)))
        if kind == "flip" and frame:
            frame[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del frame[at:]
        elif kind == "insert":
            frame[at:at] = draw(st.binary(min_size=1, max_size=5))
        elif frame:
            frame[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
    return frame


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_frames())
def test_mutated_valid_requests(frame: bytearray) -> None:
    _decode_quietly(frame)
    _decode_quietly(memoryview(bytes(frame)))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(RESPONSES.items())), st.data())
def test_random_response_bodies(key_cls: tuple[int, Any], data: st.DataObject) -> None:
    """The client side (tests, tools) decodes with the same generated code: the same guarantee."""
    _, cls = key_cls
    version = data.draw(st.integers(cls.MIN_VERSION, cls.MAX_VERSION))
    body = data.draw(st.binary(max_size=64))
    with contextlib.suppress(DecodeError):
        cls.decode(body, version)
