"""What an architecture id in a request means: the one place a full id or a unique prefix of
one (at least MIN_PREFIX characters, as the demo and the dashboard show them) becomes the id
of a stored architecture. Every route that takes an arch id resolves it here first."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from archvocab.errors import InvalidSpec
from server.errors import Conflict, NotFound
from server.store.rows import ArchitectureRow
from server.store.store import Store

MIN_PREFIX = 8
LISTED = 10  # candidates an ambiguous prefix names


def resolve_arch_id(store: Store, text: str) -> str:
    """The full id of the architecture `text` names (its id, or a unique prefix)."""
    with store.read() as session:
        return resolve(session, text)


def resolve(session: Session, text: str) -> str:
    """`resolve_arch_id` in an open session. InvalidSpec (422) for a prefix shorter than
    MIN_PREFIX, NotFound (404) for one nothing starts with, Conflict (409) listing the
    candidates for one several start with."""
    if session.get(ArchitectureRow, text) is not None:
        return text
    if len(text) < MIN_PREFIX:
        raise InvalidSpec(
            "arch_id",
            f"{text!r} is {len(text)} characters: give the full id or a prefix of at least "
            f"{MIN_PREFIX}",
        )
    found = session.scalars(
        select(ArchitectureRow.arch_id)
        .where(ArchitectureRow.arch_id.startswith(text, autoescape=True))
        .order_by(ArchitectureRow.arch_id)
        .limit(LISTED + 1)
    ).all()
    if not found:
        raise NotFound("architecture", text)
    if len(found) > 1:
        count = f"more than {LISTED}" if len(found) > LISTED else str(len(found))
        raise Conflict(
            f"arch id prefix {text!r} is ambiguous: {count} architectures start with it "
            f"({', '.join(found[:LISTED])}); give more characters"
        )
    return found[0]
