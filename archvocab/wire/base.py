"""What every wire schema a client sends builds on: `Strict` refuses unknown fields,
NaN and infinity, and NUL characters (which PostgreSQL text cannot hold)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

# A device class names one kind of hardware; it is matched case-insensitively, so it is kept
# in one canonical form, lower case, from the moment a request is read (`CPU` is `cpu`).
DeviceClass = Annotated[
    str,
    Field(
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="the kind of device; matched case-insensitively (kept in lower case)",
    ),
    AfterValidator(str.lower),
]


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
