"""Proxies by name. A proxy maps a spec to a score where larger predicts a better model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from archvocab.errors import InvalidSpec
from archvocab.spec import GPT2Spec
from proxies import params


@dataclass(frozen=True)
class Proxy:
    name: str
    cost: str  # "zero": analytic, no model built
    score: Callable[[GPT2Spec], float]
    description: str


PROXIES: dict[str, Proxy] = {
    p.name: p
    for p in (
        Proxy(
            "decoder_params",
            "zero",
            params.decoder_params,
            "attention + feed-forward + layer-norm parameters (LTS)",
        ),
        Proxy(
            "total_params",
            "zero",
            params.total_params,
            "all parameters, embeddings and output head included",
        ),
    )
}


def get_proxy(name: str) -> Proxy:
    try:
        return PROXIES[name]
    except KeyError:
        raise InvalidSpec(
            "proxy", f"unknown proxy {name!r}; allowed: {', '.join(PROXIES)}"
        ) from None
