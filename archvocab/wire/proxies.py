"""Wire schemas of the proxy catalogue and of checking proxies against a user's own trained
results (`POST /api/v1/proxies/check`)."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from archvocab.proxy_catalog import PROXY_CATALOG
from archvocab.wire.base import Strict


class ProxyInfo(BaseModel):
    name: str
    cost: str = Field(description="zero: analytic, on the server; low: computed by the agents")
    kinds: list[str] | None = Field(description="the space kinds it applies to (null: all)")
    description: str


class TrainedResult(Strict):
    arch_id: str = Field(min_length=1, max_length=64)
    value: float = Field(description="the trained metric: perplexity, loss, accuracy...")


class ProxyCheck(Strict):
    """Trained results of architectures hwnas has seen (by arch id), to rank proxies by."""

    results: list[TrainedResult] = Field(min_length=3, max_length=100_000)
    target: str = Field("target", min_length=1, max_length=100, description="the metric's name")
    lower_is_better: bool = Field(description="true for perplexity or loss, false for accuracy")
    proxies: list[str] | None = Field(
        None, max_length=64, description="default: every proxy that applies and has values"
    )
    top_k: float = Field(0.1, gt=0, le=1, description="the top fraction for LTS's common ratio")

    @field_validator("results")
    @classmethod
    def _distinct(cls, value: list[TrainedResult]) -> list[TrainedResult]:
        seen: set[str] = set()
        for result in value:
            if result.arch_id in seen:
                raise ValueError(f"arch_id {result.arch_id!r} appears twice")
            seen.add(result.arch_id)
        return value

    @field_validator("proxies")
    @classmethod
    def _known(cls, value: list[str] | None) -> list[str] | None:
        for name in value or ():
            if name not in PROXY_CATALOG:
                raise ValueError(f"unknown proxy {name!r}; allowed: {', '.join(PROXY_CATALOG)}")
        if value is not None and len(set(value)) != len(value):
            raise ValueError("proxies must not repeat")
        return value


class ProxyAgreement(BaseModel):
    proxy: str
    cost: str
    models: int = Field(description="architectures with both a trained result and a value")
    spearman: float | None
    kendall: float | None
    top_k_common: float | None
    note: str | None = Field(None, description="why a figure is missing, or a caveat")


class ProxyCheckResult(BaseModel):
    target: str
    lower_is_better: bool
    models: int
    top_k: float
    proxies: list[ProxyAgreement]
