"""How well scores rank models against a trained metric: Spearman's rho, Kendall's tau (both
keeping the metric's sign) and LTS's top-k common ratio (1.0 is perfect either way)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from archvocab.errors import InvalidSpec


@dataclass(frozen=True)
class Agreement:
    spearman: float | None  # None where it is undefined: constant scores or targets
    kendall: float | None
    top_k_common: float


def top_k_common(
    scores: Sequence[float], targets: Sequence[float], fraction: float, lower_is_better: bool
) -> float:
    """LTS's common ratio: the share of the proxy's top `fraction` of models that are also in
    the target's top `fraction` (ties broken by position)."""
    if not 0 < fraction <= 1:
        raise InvalidSpec("top_k", f"must be in (0, 1], got {fraction!r}")
    k = max(1, round(fraction * len(scores)))
    order = range(len(scores))
    by_proxy = sorted(order, key=lambda i: -scores[i])[:k]
    sign = 1.0 if lower_is_better else -1.0
    by_target = sorted(order, key=lambda i: sign * targets[i])[:k]
    return len(set(by_proxy) & set(by_target)) / k


def agreement(
    scores: Sequence[float], targets: Sequence[float], top_k: float, lower_is_better: bool
) -> Agreement:
    from scipy import stats  # about a second to import: paid only when comparing

    if len(scores) != len(targets) or len(scores) < 2:
        raise InvalidSpec("results", f"need at least 2 paired values, got {len(scores)}")
    constant = len(set(scores)) < 2 or len(set(targets)) < 2
    rho = None if constant else float(stats.spearmanr(scores, targets).statistic)
    tau = None if constant else float(stats.kendalltau(scores, targets).statistic)
    return Agreement(
        spearman=rho if rho is None or math.isfinite(rho) else None,
        kendall=tau if tau is None or math.isfinite(tau) else None,
        top_k_common=top_k_common(scores, targets, top_k, lower_is_better),
    )
