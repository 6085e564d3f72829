"""Answers from pieces compressed once: one gzip member that any decoder reads whole."""

from __future__ import annotations

import gzip
import random
import zlib

import pytest

from server.api.encoded import _takes_gzip
from server.services.compressed import Piece, Pieces


def _text(rng: random.Random, size: int) -> bytes:
    words = [b'"arch"', b"12.5", b"[", b"]", b",", b'{"n_layer":', b"null", b"true"]
    return b"".join(rng.choice(words) for _ in range(size))


@pytest.mark.parametrize("seed", range(20))
def test_kept_pieces_and_fresh_bytes_make_one_gzip_member_of_the_whole(seed):
    rng = random.Random(seed)
    parts: list[Piece | bytes] = []
    for _ in range(rng.randint(0, 8)):
        raw = _text(rng, rng.choice([0, 1, 50, 5000]))
        parts.append(Piece.of(raw) if rng.random() < 0.5 else raw)
    answer = Pieces(parts)
    whole = b"".join(p.raw if isinstance(p, Piece) else p for p in parts)
    assert answer.plain() == whole and len(answer) == len(whole)
    assert gzip.decompress(answer.gzip()) == whole
    reader = zlib.decompressobj(16 + zlib.MAX_WBITS)  # one member: nothing left after it
    assert reader.decompress(answer.gzip()) == whole and reader.eof and reader.unused_data == b""


def test_a_kept_piece_is_sent_as_it_was_deflated():
    kept = Piece.of(b"[1.5,2.5]" * 1000)
    compressed = Pieces([b"{", kept, b"}"]).gzip()
    assert kept.deflated in compressed
    assert gzip.decompress(compressed) == b"{" + b"[1.5,2.5]" * 1000 + b"}"


@pytest.mark.parametrize(
    ("header", "takes"),
    [
        ("gzip, deflate", True),
        ("GZIP;q=0.3", True),
        ("br, *;q=0.5", True),
        ("*;q=0, gzip", True),
        ("gzip;q=0", False),
        ("gzip;q=0, *", False),
        ("gzip;q=nonsense", False),
        ("identity", False),
        ("br", False),
        ("", False),
        (None, False),
    ],
)
def test_gzip_is_sent_to_clients_whose_accept_encoding_takes_it(header, takes):
    assert _takes_gzip(header) is takes
