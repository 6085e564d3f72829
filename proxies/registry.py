"""Proxies by name. A proxy maps a spec to a score where larger predicts a better model.

Cost classes: "zero" proxies are analytic (no model built: the server computes them); "low"
proxies build the model and run forward and backward passes on a seeded minibatch
(`proxies.lowcost`, torch imported only when one is scored, never by this module).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec
from proxies import params

# LTS section 3.1; defined in proxies.lowcost. Language-model kinds only (gpt2, transxl).
LOW_COST_PROXIES = {
    "grad_norm": "sum of the decoder's gradient norms",
    "snip": "sum |w * dL/dw| over the decoder",
    "grasp": "-w * (H g) over the decoder",
    "fisher": "per-channel Fisher information of the decoder's linear outputs",
    "synflow": "synaptic flow of the decoder with |w| and all-ones input",
    "jacob_cov": "correlation of per-example input Jacobians",
    "relu_log_det": "log-determinant of the activation-code kernel",
}


@dataclass(frozen=True)
class Proxy:
    name: str
    cost: str  # "zero": analytic, no model built; "low": forward and backward passes
    score: Callable[[ArchSpec], float]
    description: str
    kinds: tuple[str, ...] | None = None  # the space kinds it applies to (None: all)


def _low_cost(name: str) -> Callable[[ArchSpec], float]:
    def score(spec: ArchSpec) -> float:
        from proxies.lowcost import score_spec  # torch comes with it

        return score_spec(name, spec)

    return score


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
        *(
            Proxy(name, "low", _low_cost(name), text, ("gpt2", "transxl"))
            for name, text in LOW_COST_PROXIES.items()
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
