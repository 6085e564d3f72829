"""What every wire schema a client sends builds on: `Strict` refuses unknown fields,
NaN and infinity, and NUL characters (which PostgreSQL text cannot hold)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        # PostgreSQL text cannot hold NUL: refused here, with the same answer on every store.
        texts = value if isinstance(value, (list, tuple)) else (value,)
        if any(isinstance(text, str) and "\x00" in text for text in texts):
            raise ValueError("must not contain NUL characters (\\x00)")
        return value
