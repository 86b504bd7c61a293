"""The base of every generated request and response class: version dispatch and error typing.

Generated modules fill `_DECODERS` / `_ENCODERS` with their flat per-version functions; this class turns
any low-level failure into `DecodeError` and refuses versions we have no codec for.

It may be compiled (setup.py) while some generated modules are not: those subclass it as interpreted
classes, which a compiled class must allow explicitly (`mypyc_attr`).
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar, Self

from mypy_extensions import mypyc_attr

from pybroker.protocol.primitives import DecodeError, UnsupportedVersion, materialize


@mypyc_attr(allow_interpreted_subclasses=True)
class ApiMessage:
    __slots__ = ()
    API_KEY: ClassVar[int | None] = None
    MIN_VERSION: ClassVar[int] = 0
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_MIN: ClassVar[int | None] = None
    _DECODERS: ClassVar[dict[int, Any]] = {}
    _ENCODERS: ClassVar[dict[int, Any]] = {}

    @classmethod
    def decode(cls, data: Any, version: int, offset: int = 0, strict: bool = True) -> Self:
        """Decode `data[offset:]`, which must hold exactly one message of `version`.

        `strict=False` ignores bytes after the message, as Kafka's broker does with requests (librdkafka
        sends some requests with trailing bytes).
        """
        obj, pos = cls.decode_prefix(data, version, offset)
        if strict and pos != len(data):
            raise DecodeError(f"{cls.__name__} v{version}: {len(data) - pos} bytes left over")
        return obj

    @classmethod
    def decode_prefix(cls, data: Any, version: int, offset: int = 0) -> tuple[Self, int]:
        """Decode one message of `version` at `data[offset:]` that may be followed by more bytes (a header
        before its body): the message and the offset just past it."""
        fn = cls._DECODERS.get(version)
        if fn is None:
            raise UnsupportedVersion(cls.API_KEY if cls.API_KEY is not None else -1, version)
        try:
            result: tuple[Self, int] = fn(data, offset)
        except DecodeError:
            raise
        except (struct.error, IndexError, ValueError, TypeError, OverflowError) as exc:
            raise DecodeError(f"{cls.__name__} v{version}: {exc}") from None
        return result

    def encode_chunks(self, version: int, out: bytearray | None = None) -> list[Any]:
        """The encoding as chunks: bytes, with any non-bytes `records` value (a file region) as its own chunk.

        `out` may already hold a header; the encoding is appended to it.
        """
        fn = self._ENCODERS.get(version)
        if fn is None:
            raise UnsupportedVersion(self.API_KEY if self.API_KEY is not None else -1, version)
        out = bytearray() if out is None else out
        chunks: list[Any] = []
        fn(self, out, chunks)
        chunks.append(out)
        return chunks

    def encode(self, version: int) -> bytes:
        return materialize(self.encode_chunks(version))
