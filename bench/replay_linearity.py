"""Whether the replayed device flatters a surrogate-screened search: how closely hwnas's cost
models fit the table's real measurements, against how closely they fit what the replay
interpolates between them."""

from __future__ import annotations

import random
from typing import Any

from archvocab.registry import parse_spec
from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec
from bench.normalisation import score
from bench.replay import DeviceReplay
from search.surrogate import CostModel, analytic_features


def linearity(replay: DeviceReplay, space: GPT2Space, count: int = 300) -> dict[str, Any]:
    """How closely hwnas's cost models (`search.surrogate.CostModel` on analytic counts, as the
    search fits them) fit latency and memory: the typical relative residual
    (`CostModel.spread`) of a fit on the table's real measurements, and of one on `count`
    random architectures the replay interpolates. Far smaller on the latter would mean the
    replay flatters a surrogate-screened search."""
    real = [parse_spec(row["spec"]) for row in replay.table["rows"]]
    # The seed keeps the name of the script these draws were first made by.
    rng = random.Random("hwnas.bench.search_efficiency")
    unseen: dict[str, GPT2Spec] = {}
    while len(unseen) < count:
        spec = space.sample(rng)
        if not replay.measure(spec).from_table:
            unseen[spec.arch_id] = spec
    out: dict[str, Any] = {}
    for name, specs in (("table", real), ("interpolated", list(unseen.values()))):
        features = [analytic_features(spec, score(spec)) for spec in specs]
        got = [replay.measure(spec) for spec in specs]
        out[name] = {
            target: CostModel(features, [getattr(g, target) for g in got]).spread
            for target in ("latency_ms", "memory_mb")
        }
    return out
