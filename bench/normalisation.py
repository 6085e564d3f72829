"""The yardstick of the replayed-search benchmarks: the three objectives, the engines'
zero-cost scorer, and one fixed hypervolume normalisation that every strategy is judged (and
hwnas steered) by: decoder_params from the space's smallest member (reference) to its largest
(ideal); latency and memory from 0 (ideal) to the replayed cost of the largest member."""

from __future__ import annotations

from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec
from bench.replay import DeviceReplay
from proxies.flops import flops
from proxies.params import decoder_params, total_params
from search.hypervolume import Normaliser

OBJECTIVES = ["decoder_params", "latency_ms", "memory_mb"]


def score(spec: GPT2Spec) -> dict[str, float]:
    """The engines' zero-cost scorer."""
    return {
        "decoder_params": float(decoder_params(spec)),
        "total_params": float(total_params(spec)),
        "flops": float(flops(spec)),
    }


def extremes(space: GPT2Space) -> tuple[GPT2Spec, GPT2Spec]:
    """The space's largest member (every dimension at its top, the widest embedding) and its
    smallest (every dimension at its bottom, the narrowest embedding); both checked members."""
    top, bottom = space.n_layer.max, space.n_layer.min
    d_big, d_small = max(space._d_models), min(space._d_models)
    largest = space._make(
        n_layer=top,
        d_model=d_big,
        d_inner=[space._inners_for(d_big)[-1]] * top,
        n_head=[max(space._heads_for(d_big))] * top,
        d_embed=max(space.d_embed),
        div_val=min(space.div_val),
    )
    smallest = space._make(
        n_layer=bottom,
        d_model=d_small,
        d_inner=[space._inners_for(d_small)[0]] * bottom,
        n_head=[min(space._heads_for(d_small))] * bottom,
        d_embed=min(space.d_embed),
        div_val=max(space.div_val),
    )
    space.check_member(largest)
    space.check_member(smallest)
    return largest, smallest


def make_normaliser(replay: DeviceReplay, space: GPT2Space) -> Normaliser:
    """The fixed normalisation every strategy is judged (and hwnas steered) by."""
    worst = replay.measure(extremes(space)[0])
    return normaliser_for(space, worst.latency_ms, worst.memory_mb)


def normaliser_for(space: GPT2Space, worst_latency_ms: float, worst_memory_mb: float) -> Normaliser:
    """The normalisation above with the largest member's cost as measured (on a real device)."""
    largest, smallest = extremes(space)
    return Normaliser(
        OBJECTIVES,
        ideal={
            "decoder_params": float(decoder_params(largest)),
            "latency_ms": 0.0,
            "memory_mb": 0.0,
        },
        reference={
            "decoder_params": float(decoder_params(smallest)),
            "latency_ms": worst_latency_ms,
            "memory_mb": worst_memory_mb,
        },
    )


def describe(spec: GPT2Spec) -> str:
    """A member's shape in a few words, for a report."""
    return (
        f"{spec.n_layer} layers, d_model {spec.d_model}, d_inner {spec.d_inner[0]}, "
        f"{spec.n_head[0]} heads, d_embed {spec.d_embed}, div_val {spec.div_val}"
    )
