"""Answers made of pieces that are compressed once, for gzip without compressing again.

A `Piece` is deflated on its own (raw deflate ended by a sync flush, so no back-reference
reaches outside it). Such streams laid end to end, closed by an empty final block, inside a
gzip header and the CRC-32 and length of the whole, are one valid gzip member (the way pigz
compresses in parallel). So the parts of an answer that many reads share, kept with the
result table, are compressed once, not on every read: a 100,000-result /points is 15 MB of
JSON, and level-1 gzip of it took 115 ms a read (docs/benchmarks.md).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

# Level 1, here and in the app's gzip middleware, not Starlette's 9: a 38 MB answer
# compresses in 0.29 s at 1 against 1.1 s at 6, for 12% more bytes (docs/benchmarks.md,
# "The page's first load at 100,000").
LEVEL = 1
# The gzip header: no name or time, unknown OS (RFC 1952).
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def _deflate(raw: bytes) -> bytes:
    """`raw` as raw deflate blocks that end on a byte with no final block."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(raw) + compressor.flush(zlib.Z_SYNC_FLUSH)


_FINAL = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS).flush()  # an empty last block


@dataclass(frozen=True)
class Piece:
    """Bytes of an answer with their deflated form, made once."""

    raw: bytes
    deflated: bytes

    @classmethod
    def of(cls, raw: bytes) -> Piece:
        return cls(raw, _deflate(raw))


class Pieces:
    """An answer as parts in order: kept `Piece`s and bytes made for this answer."""

    def __init__(self, parts: list[Piece | bytes]) -> None:
        self.parts = parts

    def __len__(self) -> int:
        return sum(len(_raw(p)) for p in self.parts)

    def plain(self) -> bytes:
        return b"".join(_raw(p) for p in self.parts)

    def gzip(self) -> bytes:
        """The answer as one gzip member: the kept pieces' deflated forms as they are, the
        bytes between them deflated here."""
        out, crc, size, fresh = [_HEADER], 0, 0, []
        for part in self.parts:
            raw = _raw(part)
            crc, size = zlib.crc32(raw, crc), size + len(raw)
            if isinstance(part, Piece):
                if fresh:
                    out.append(_deflate(b"".join(fresh)))
                    fresh = []
                out.append(part.deflated)
            else:
                fresh.append(part)
        if fresh:
            out.append(_deflate(b"".join(fresh)))
        out += [_FINAL, struct.pack("<II", crc, size & 0xFFFFFFFF)]
        return b"".join(out)


def _raw(part: Piece | bytes) -> bytes:
    return part.raw if isinstance(part, Piece) else part
