"""What every space kind's specs and spaces share: identity by content, membership as a test.

A spec's canonical JSON (sorted keys, no whitespace) and its stable id (the first 16 hex
digits of that JSON's SHA-256) are defined once here, from the spec's own `to_dict()`, so that
equal specs of any kind give byte-equal JSON and the same id everywhere.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any


class SpecIdentity:
    """Mixin for spec classes with a canonical `to_dict()`."""

    kind: str

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def _plain_fields(self, names: tuple[str, ...]) -> dict[str, Any]:
        """{"kind", then each named field}, tuples as lists: a flat spec's `to_dict()`."""
        out: dict[str, Any] = {"kind": self.kind}
        for name in names:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out

    def canonical_json(self) -> str:
        """Sorted keys, no whitespace: equal specs give byte-equal JSON."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @functools.cached_property
    def arch_id(self) -> str:
        """Stable id: the first 16 hex digits of the SHA-256 of the canonical JSON (computed
        once per spec: an engine looks ids up on every result)."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:16]


class Membership:
    """Mixin for space classes with a `check_member(spec)` that raises InvalidSpec."""

    def check_member(self, spec: Any) -> None:
        raise NotImplementedError

    def contains(self, spec: Any) -> bool:
        from archvocab.errors import InvalidSpec

        try:
            self.check_member(spec)
        except InvalidSpec:
            return False
        return True
