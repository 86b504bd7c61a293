"""The generated codecs against the reference interpreter, for every message (headers and stored records too) and version.

The interpreter (`tests/reference_codec.py`) walks the same schema tables one field at a time; the
generated code merges fixed-width runs, special-cases empty tagged-field sections and so on. They must
produce the same bytes, and each must read back what the other wrote.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.schema.dsl import Message
from tests import reference_codec
from tests.schema_strategies import case_id, message_cases, message_strategy, to_plain

CASES = message_cases(("request", "response", "header", "data"))


def _generated_class(module: str, message: Message) -> Any:
    return getattr(importlib.import_module(f"pybroker.protocol.messages.{module}"), message.name)


@pytest.mark.parametrize(("module", "message", "version"), CASES, ids=case_id)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_codec_matches_the_reference(module: str, message: Message, version: int, data: Any) -> None:
    obj = data.draw(message_strategy(module, message, version))
    plain = to_plain(obj, message.fields, version)
    ours = obj.encode(version)
    assert ours == reference_codec.encode(message, plain, version)
    assert reference_codec.decode(message, ours, version) == plain
    again = type(obj).decode(ours, version)
    assert to_plain(again, message.fields, version) == plain


@pytest.mark.parametrize(("module", "message", "version"), CASES, ids=case_id)
def test_default_object_round_trips(module: str, message: Message, version: int) -> None:
    """Every field has a default, and the all-defaults object encodes in every version."""
    cls = _generated_class(module, message)
    obj = cls()
    data = obj.encode(version)
    assert data == reference_codec.encode(message, {}, version)
    assert cls.decode(data, version) == obj


@pytest.mark.parametrize(("module", "message", "version"), CASES, ids=case_id)
def test_truncated_encodings_raise_decode_error(module: str, message: Message, version: int) -> None:
    """Every proper prefix of a valid encoding fails cleanly (and so does one extra byte)."""
    cls = _generated_class(module, message)
    data = cls().encode(version)
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            cls.decode(data[:cut], version)
    with pytest.raises(DecodeError):
        cls.decode(data + b"\x00", version)
