"""The proxy names a search may optimise: part of the vocabulary, so that the wire can
validate a search's objectives (and refuse a proxy its space kind cannot have) without
importing the implementations, which live in `proxies` and may need torch.

Cost classes: "zero" proxies are analytic and scored by the server when a candidate is
proposed; "low" proxies build the model and run forward/backward passes on a seeded
minibatch, so agents compute them next to their measurement (never the API process).
Every proxy is maximised: larger predicts a better-trained model.
"""

from __future__ import annotations

from dataclasses import dataclass

DECODERS = ("gpt2", "transxl")
TRANSFORMERS = ("gpt2", "transxl", "flexibert")
CELLS = ("nasbench_nlp",)
ALL_KINDS = None  # every registered kind


@dataclass(frozen=True)
class ProxyEntry:
    name: str
    cost: str  # "zero" | "low"
    kinds: tuple[str, ...] | None  # None: every kind

    def applies_to(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds


def _entries(cost: str, kinds: tuple[str, ...] | None, *names: str) -> list[ProxyEntry]:
    return [ProxyEntry(name, cost, kinds) for name in names]


def _with_normalized(*names: str) -> tuple[str, ...]:
    return tuple(n for name in names for n in (name, f"{name}_normalized"))


PROXY_CATALOG: dict[str, ProxyEntry] = {
    e.name: e
    for e in (
        *_entries("zero", ALL_KINDS, "decoder_params", "total_params"),
        *_entries("zero", DECODERS, "flops"),
        # LTS section 3.1, on the decoder of a language model.
        *_entries(
            "low",
            DECODERS,
            "grad_norm",
            "snip",
            "grasp",
            "fisher",
            "synflow",
            "jacob_cov",
            "relu_log_det",
        ),
        # The training-free NAS paper (Serianni & Kalita 2023), sections 3.1-3.6.
        *_entries(
            "low",
            TRANSFORMERS,
            *_with_normalized(
                "attention_confidence",
                "softmax_confidence",
                "attention_importance",
                "synaptic_diversity",
            ),
        ),
        *_entries(
            "low",
            TRANSFORMERS + CELLS,
            *_with_normalized("synaptic_saliency", "activation_distance", "jacobian_covariance"),
            "jacobian_cosine",  # already a mean over example pairs
        ),
        *_entries(
            "low",
            CELLS,
            *_with_normalized(
                "hidden_covariance_l1", "hidden_covariance_l2", "hidden_covariance_l3"
            ),
        ),
    )
}


def proxy_names() -> tuple[str, ...]:
    return tuple(PROXY_CATALOG)


def check_proxy_for_kind(name: str, kind: str) -> str | None:
    """None when proxy `name` applies to space kind `kind`, else the reason it does not."""
    entry = PROXY_CATALOG.get(name)
    if entry is None:
        return f"unknown proxy {name!r}; allowed: {', '.join(PROXY_CATALOG)}"
    if not entry.applies_to(kind):
        return (
            f"proxy {name!r} does not apply to space kind {kind!r}; "
            f"it applies to: {', '.join(entry.kinds or ())}"
        )
    return None
