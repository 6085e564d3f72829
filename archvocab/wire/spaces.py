"""Wire schemas of space kinds and architectures as users see them: the registered kinds,
checking a spec against a space, an architecture exported to train."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from archvocab.json_value import JsonObject
from archvocab.wire.base import Strict


class SpaceKindInfo(BaseModel):
    """A registered space kind as users see it."""

    name: str
    summary: str
    runtimes: list[str]
    layer_scaled_baseline: bool
    defaults: dict[str, Any] = Field(description="the space's default settings")


class SpecCheck(Strict):
    """Is `spec` a valid architecture, and a member of `space`?"""

    space: JsonObject = Field(default_factory=dict, description="kind and settings")
    spec: JsonObject


class SpecChecked(BaseModel):
    kind: str
    arch_id: str
    decoder_params: int
    total_params: int
    member: bool = Field(description="always true: a non-member gets 422 naming the field")


class ArchitectureExport(BaseModel):
    """An architecture as a user takes it away to train: its spec and where it came from."""

    arch_id: str
    kind: str
    spec: dict[str, Any] = Field(description="the spec's canonical plain data, with its kind")
    decoder_params: int
    total_params: int = Field(description="every parameter of the built model, tied ones once")
    searches: list[int] = Field(description="ids of the searches that proposed it, ascending")
