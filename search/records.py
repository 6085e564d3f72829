"""What an engine proposes and what a store persists about each proposal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from archvocab.registry import ArchSpec


class PendingType:
    """Type of `PENDING`: a history record whose result has not arrived yet."""

    _instance: PendingType | None = None

    def __new__(cls) -> PendingType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "PENDING"


PENDING: Final = PendingType()

# A told measurement may carry this metric besides the objectives: the agent's seconds for
# it (build, warm-up and timing), which a strategy may use as what a measurement costs.
DEVICE_SECONDS: Final = "device_s"

# A proposal's outcome as persisted: the told values, None (failed) or PENDING.
Outcome = Mapping[str, float] | None | PendingType


@dataclass(frozen=True)
class Candidate:
    """A proposed architecture, the generation that proposed it and its zero-cost proxies.

    `predicted` holds what a surrogate-assisted strategy expected the measurement to give
    (objective -> value), so its prediction error can be tracked; None for other strategies.
    """

    spec: ArchSpec
    generation: int
    proxies: dict[str, float] = field(hash=False)
    predicted: dict[str, float] | None = field(default=None, hash=False, compare=False)

    @property
    def arch_id(self) -> str:
        return self.spec.arch_id


class HistoryRecord(NamedTuple):
    """One persisted proposal: values are the told dict, None (failed) or PENDING."""

    spec: ArchSpec
    generation: int
    values: Outcome
