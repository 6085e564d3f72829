"""The domain error tree. The server maps these to HTTP statuses in one place."""

from __future__ import annotations


class HwnasError(Exception):
    """Base of every error hwnas raises on purpose."""


class InvalidSpec(HwnasError, ValueError):
    """A spec or search-space setting is not allowed; names the field and what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
