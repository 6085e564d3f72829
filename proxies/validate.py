"""How well a proxy ranks architectures, on published ground truth: Spearman's rho, Kendall's
tau, LTS's top-k common ratio, and the proxy's compute time per architecture.

Correlations keep the target's sign (decoder parameters against perplexity should be near
-1, against GLUE positive); the top-k ratio compares the proxy's best (highest scores) with
the target's best (lowest perplexity or loss, highest accuracy), so 1.0 is perfect either way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from archvocab.errors import InvalidSpec
from proxies.agreement import agreement
from proxies.ground_truth import GroundTruthSet
from proxies.inputs import ProxyInputs
from proxies.registry import get_proxy


@dataclass(frozen=True)
class Validation:
    set: str
    kind: str
    models: int
    proxy: str
    target: str
    spearman: float
    kendall: float
    top_k: float  # the fraction of models counted as "top"
    top_k_common: float
    ms_per_arch: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def validate(data: GroundTruthSet, proxy_name: str, top_k: float = 0.1) -> Validation:
    """Score every architecture of `data` with the named proxy and compare with the target."""
    return validate_many(data, [proxy_name], top_k)[0]


def validate_many(
    data: GroundTruthSet,
    proxy_names: Sequence[str],
    top_k: float = 0.1,
    inputs: ProxyInputs | None = None,
) -> list[Validation]:
    """`validate` for several proxies, scoring architecture by architecture: low-cost proxies
    then build each model once for all of them."""
    proxies = [get_proxy(name) for name in proxy_names]
    for proxy in proxies:
        if proxy.kinds is not None and data.kind not in proxy.kinds:
            raise InvalidSpec(
                "proxy",
                f"{proxy.name} does not apply to space kind {data.kind!r} ({data.name}); "
                f"it applies to: {', '.join(proxy.kinds)}",
            )
    if len(data.specs) < 2:
        raise InvalidSpec("set", f"{data.name}: need at least 2 models, got {len(data.specs)}")
    scores: dict[str, list[float]] = {p.name: [] for p in proxies}
    seconds = dict.fromkeys(scores, 0.0)
    for spec in data.specs:
        for proxy in proxies:
            start = time.perf_counter()
            scores[proxy.name].append(proxy.score(spec, inputs))
            seconds[proxy.name] += time.perf_counter() - start
    return [_compare(data, name, scores[name], seconds[name], top_k) for name in scores]


def _compare(
    data: GroundTruthSet, name: str, scores: list[float], seconds: float, top_k: float
) -> Validation:
    agreed = agreement(scores, data.targets, top_k, data.lower_is_better)
    return Validation(
        set=data.name,
        kind=data.kind,
        models=len(scores),
        proxy=name,
        target=data.target,
        spearman=math.nan if agreed.spearman is None else agreed.spearman,
        kendall=math.nan if agreed.kendall is None else agreed.kendall,
        top_k=top_k,
        top_k_common=agreed.top_k_common,
        ms_per_arch=seconds * 1000 / len(scores),
    )
