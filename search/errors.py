"""Errors of the search engines, all `HwnasError`s so the server translates them in one place.

Suggested HTTP mapping: UnknownCandidate -> 404, AlreadyTold -> 409, InvalidResult and
InvalidHistory -> 422.
"""

from __future__ import annotations

from archvocab.errors import HwnasError


class SearchError(HwnasError):
    """Base of the errors raised by `search`."""


class UnknownCandidate(SearchError, LookupError):
    """An arch_id this engine never proposed."""


class AlreadyTold(SearchError):
    """A result for a candidate whose result the engine already has."""


class InvalidResult(SearchError, ValueError):
    """Told values that lack a needed objective or are not finite numbers."""


class InvalidHistory(SearchError, ValueError):
    """Persisted rows that no live engine could have produced (order, duplicates, budget)."""
