"""LTS's layer-scaled baseline as an engine: a fixed list of specs, proposed once.

LTS compares its frontier with each backbone scaled only in depth (homogeneous layers,
1..16). Measured through the same service as a search, the baseline's specs are one
generation that finishes the engine once every one is told; `restore` works as for LTS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from archvocab.registry import ArchSpec, SearchSpace
from search.records import Candidate
from search.strategies.lts import LTSEngine


class LayerScaledEngine(LTSEngine):
    """Proposes `space.baseline(n)` for each depth in `layers`, in one generation."""

    strategy = "layer_scaled"

    def __init__(self, space: SearchSpace, *, layers: Sequence[int], **kwargs: Any) -> None:
        specs: dict[str, ArchSpec] = {}
        for n_layer in layers:
            spec = space.baseline(n_layer)  # type: ignore[attr-defined]
            specs.setdefault(spec.arch_id, spec)
        kwargs["max_evaluations"] = len(specs)
        super().__init__(space, **kwargs)
        self._fixed = list(specs.values())

    def _round_size(self, slots: int) -> int:
        return 0 if self._pending or self._generation >= 0 else len(self._fixed)

    def _propose(self, slots: int, remaining: int) -> list[Candidate] | None:
        if self._pending or self._generation >= 0:
            return None
        self._generation = 0
        return [Candidate(spec, 0, self._score(spec)) for spec in self._fixed]
