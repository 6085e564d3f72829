"""Rank correlation of a proxy with trained perplexity on LTS's released training logs.

Pure functions: a log file in, values out. The `hwnas proxies correlate` command
(`proxies.cli`) only formats what these return.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

from archvocab.errors import InvalidSpec
from archvocab.spaces.gpt2.spec import GPT2Spec
from proxies.registry import get_proxy

# The logged count a proxy is meant to reproduce exactly; proxies not listed have none.
LOGGED_COUNTERPART = {"decoder_params": "nonembedding", "total_params": "total"}


class LoggedModel(NamedTuple):
    """One trained model of an LTS log: its spec, validation perplexity and logged counts."""

    spec: GPT2Spec
    valid_ppl: float
    params: Mapping[str, float]


@dataclass(frozen=True)
class Correlation:
    """Spearman's rho of proxy score vs valid_ppl over one log file.

    Larger proxy scores should predict lower perplexity, so a good proxy has rho near -1.
    `matches` counts models whose score equals the logged `logged_field` exactly
    (None when the proxy has no logged counterpart).
    """

    file: str
    models: int
    proxy: str
    rho: float
    p_value: float
    logged_field: str | None
    matches: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_lts_log(path: str | Path) -> list[LoggedModel]:
    """Read an LTS log JSON (`{"set", "models": [{"config", "perplexity", "params"}]}`).

    Models without a logged `valid_ppl` (a few unfinished runs) are left out. A config that
    is not a valid GPT-2 spec raises InvalidSpec naming the model.
    """
    path = Path(path)
    data = json.loads(path.read_text())
    if not isinstance(data, Mapping) or not isinstance(data.get("models"), list):
        raise InvalidSpec("file", f"{path}: not an LTS log (expected an object with 'models')")
    models = []
    for entry in data["models"]:
        ppl = (entry.get("perplexity") or {}).get("valid_ppl")
        if ppl is None:
            continue
        try:
            spec = GPT2Spec.from_lts_config(entry["config"])
        except (InvalidSpec, KeyError, TypeError, ValueError) as exc:
            raise InvalidSpec("file", f"{path}: model {entry.get('id')!r}: {exc}") from None
        models.append(LoggedModel(spec, float(ppl), dict(entry.get("params") or {})))
    return models


def spearman(scores: Sequence[float], valid_ppl: Sequence[float]) -> tuple[float, float]:
    """Spearman's rho and its two-sided p-value (scipy.stats.spearmanr)."""
    if len(scores) < 2:
        raise InvalidSpec("models", f"need at least 2 models to correlate, got {len(scores)}")
    from scipy import stats  # about a second to import: paid only when correlating

    result = stats.spearmanr(scores, valid_ppl)
    return float(result.statistic), float(result.pvalue)


def count_matches(scores: Sequence[float], models: Sequence[LoggedModel], field: str) -> int:
    """How many scores equal the logged count `field` exactly."""
    return sum(
        field in model.params and score == model.params[field]
        for score, model in zip(scores, models, strict=True)
    )


def correlate_models(models: Sequence[LoggedModel], proxy_name: str, file: str = "") -> Correlation:
    """Score every model with the named proxy and correlate with valid_ppl."""
    proxy = get_proxy(proxy_name)
    scores = [proxy.score(model.spec) for model in models]
    rho, p_value = spearman(scores, [model.valid_ppl for model in models])
    field = LOGGED_COUNTERPART.get(proxy.name)
    matches = count_matches(scores, models, field) if field else None
    return Correlation(file, len(models), proxy.name, rho, p_value, field, matches)


def correlate_file(path: str | Path, proxy_name: str) -> Correlation:
    """`correlate_models` over one LTS log file."""
    get_proxy(proxy_name)  # an unknown name fails before the file is read
    return correlate_models(load_lts_log(path), proxy_name, file=str(path))
