"""Wire schemas of starting a search: what users send (`SearchCreate`, `BaselineCreate` and their
settings) and the objectives they choose from.

Validation happens here, once, with messages that name the field and the allowed values."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from archvocab.errors import InvalidSpec
from archvocab.json_value import JsonObject
from archvocab.proxy_catalog import PROXY_CATALOG, check_proxy_for_kind, proxy_names
from archvocab.registry import get_kind, kind_names, parse_space
from archvocab.wire.base import DeviceClass, Strict
from archvocab.wire.measurement import MeasurementSettings, ProxyInputSettings

PROXY_OBJECTIVES = proxy_names()
HARDWARE_OBJECTIVES = ("latency_ms", "memory_mb")
OBJECTIVES = PROXY_OBJECTIVES + HARDWARE_OBJECTIVES
# Proxies are maximised (more decoder parameters predict lower perplexity); cost is minimised.
OBJECTIVE_SENSE = {
    **{name: "max" for name in PROXY_OBJECTIVES},
    "latency_ms": "min",
    "memory_mb": "min",
}


class Budget(Strict):
    max_evaluations: int = Field(100, ge=1, le=100000)


class Constraints(Strict):
    """Optional bounds. Parameter bounds are checked before anything is sent to a device."""

    max_latency_ms: float | None = Field(None, gt=0)
    max_memory_mb: float | None = Field(None, gt=0)
    min_decoder_params: int | None = Field(None, ge=0)
    max_decoder_params: int | None = Field(None, ge=0)

    def hardware_bounds(self) -> dict[str, float]:
        """Measured metric -> its upper bound, for the bounds that are set."""
        bounds = {"latency_ms": self.max_latency_ms, "memory_mb": self.max_memory_mb}
        return {metric: float(b) for metric, b in bounds.items() if b is not None}

    @model_validator(mode="after")
    def _ordered(self) -> Constraints:
        lo, hi = self.min_decoder_params, self.max_decoder_params
        if lo is not None and hi is not None and lo > hi:
            raise ValueError("min_decoder_params must be <= max_decoder_params")
        return self


class Population(Strict):
    """LTS's released defaults: 100 initial samples, 20 parents, 40 mutants, 40 crossovers."""

    initial: int = Field(100, ge=1, le=10000)
    parents: int = Field(20, ge=1, le=10000)
    mutations: int = Field(40, ge=0, le=10000)
    crossovers: int = Field(40, ge=0, le=10000)
    mutation_prob: float = Field(0.3, ge=0, le=1)
    crossover_prob: float = Field(0.5, ge=0, le=1)

    @model_validator(mode="after")
    def _some_children(self) -> Population:
        if self.mutations + self.crossovers < 1:
            raise ValueError("mutations + crossovers must be >= 1")
        return self


STRATEGIES = ("lts", "nsga2", "hwnas", "layer_scaled")
# hwnas screens offspring with cost models fitted on results: it needs only a small random
# initial design, where LTS and NSGA-II start from a population of 100. Its models fit five
# counts, so 8 results are the least they take; 10 reached more hypervolume at 30, 60 and
# 120 measurements than 32 did, as much as 8 or 16 did (docs/benchmarks.md, issue 22).
HWNAS_INITIAL = 10
# What screens hwnas's offspring (search.strategies.hwnas.SURROGATES): the residual Gaussian
# process on top of the cost models was level with the plain cost models on the replay
# benchmark, not ahead (docs/benchmarks.md, issue 22), so the plain ones stay the default.
HWNAS_SURROGATE = "cost_model"
# What hwnas weighs a proposal's predicted added volume against (search.strategies.hwnas.
# VALUES_PER): nothing, or the device-seconds its measurement is predicted to take. Weighing
# them did not make its measurements cheaper on real CPU (docs/benchmarks.md, issue 22).
HWNAS_VALUE_PER = "measurement"
# How hwnas picks its initial design (search.initial_design.INITIAL_DESIGNS): at random, or
# from the analytic front of a seeded sample (the candidates no other beats on the known
# proxy and on every analytic count of cost) by added volume. On the replay the analytic
# front held more hypervolume than random samples at 10 measurements on 12 of 12 seeds
# (docs/benchmarks.md, issue 22).
HWNAS_INITIAL_DESIGN = "analytic_front"
DEFAULT_BASELINE_LAYERS = tuple(range(1, 17))  # LTS: homogeneous layers in [1, 16]


class NoiseSettings(Strict):
    """How a search deals with measurement noise (docs/reproducibility.md).

    Every latency and memory value gets an interval meant to contain a later re-measurement of
    the same architecture, in a fresh process on the same device class, with probability
    `confidence`; its width comes from the device class's noise, learned from the agents'
    repeated readings of a reference architecture (every `reference_every_jobs` jobs or
    `reference_every_s` seconds). A result taken while the machine looked busy is measured
    again up to `busy_retries` times, and a busy result never enters the frontier. When the
    budget's candidates are measured, frontier points whose intervals overlap are measured
    again (each at most `max_measurements` times in all, up to `remeasure_share` of the
    budget), in new processes and on whichever agent of the class is free, before the search
    finishes; their values become the geometric mean of their measurements.
    `frontier_values = "corrected"` ranks drift-corrected values. The engine allows for the
    device's prior noise when it picks parents (`search.noise.steering_widths`).
    """

    confidence: float = Field(0.95, ge=0.5, le=0.999, description="of every stated interval")
    busy_retries: int = Field(2, ge=0, le=5)
    reference_every_jobs: int = Field(5, ge=1, le=10000)
    reference_every_s: float = Field(300.0, ge=5, le=86400)
    remeasure_share: float = Field(
        0.1,
        ge=0,
        le=1,
        description="once the budget's candidates are measured, up to this share of the budget "
        "more measurements re-measure frontier points the noise cannot tell apart",
    )
    max_measurements: int = Field(
        4, ge=2, le=20, description="of one architecture, the first one included"
    )
    frontier_values: Literal["measured", "corrected"] = Field(
        "measured",
        description="what the frontier ranks: the measured values, or the drift-corrected ones "
        "(each scaled by the median reference reading over the reading next to it)",
    )


class HypervolumeSettings(Strict):
    """Where the search's hypervolume puts 0 (`ideal`) and 1 (`reference`) per objective.

    Unset values are fixed when the search starts: a zero-cost proxy's from the space (its
    largest and smallest values over a seeded sample), a hardware objective's ideal at 0 and
    its reference at the search's constraint bound; a reference still unknown is fixed from
    the first measurements (twice the largest of the first ten) and never moves afterwards.
    """

    ideal: dict[str, float] = Field(default_factory=dict)
    reference: dict[str, float] = Field(default_factory=dict)


class SearchCreate(Strict):
    name: str | None = Field(None, max_length=200)
    strategy: Literal["lts", "nsga2", "hwnas", "layer_scaled"] = Field(
        "lts",
        description="lts: LTS's evolutionary search (Algorithm 1, paper defaults); nsga2: "
        "pymoo's NSGA-II; hwnas: steady-state evolution whose offspring are screened by "
        "online latency/memory models, so fewer measurements are wasted on dominated "
        "candidates; layer_scaled: the space's homogeneous baseline at each depth in "
        "`layers` (LTS's comparison)",
    )
    surrogate: Literal["cost_model", "residual_gp"] | None = Field(
        None,
        description="hwnas only: what screens its offspring. cost_model: least-squares "
        "models of latency and memory on analytic counts, optimistic by one typical residual; "
        "residual_gp: those corrected by a Gaussian process of their residuals, optimistic by "
        f"each candidate's own uncertainty (default {HWNAS_SURROGATE})",
    )
    value_per: Literal["measurement", "device_second"] | None = Field(
        None,
        description="hwnas only: what a proposal's predicted added hypervolume is weighed "
        "against. device_second: the seconds its measurement is predicted to take on the "
        "agents (a model of the seconds told so far; larger models take longer to time), so "
        "a cheap candidate that adds nearly as much goes first; measurement: every "
        f"measurement alike (default {HWNAS_VALUE_PER})",
    )
    initial_design: Literal["random", "analytic_front"] | None = Field(
        None,
        description="hwnas only: how its first `population.initial` candidates are picked, "
        "before its cost models can be fitted. analytic_front: from a seeded sample of the "
        "space, those no other sample beats on the proxy known at proposal and on every "
        "analytic count of cost (FLOPs, total parameters, depth), each next one the one "
        "that adds the most hypervolume in those counts; random: random samples of the space "
        f"(default {HWNAS_INITIAL_DESIGN})",
    )
    layers: list[int] | None = Field(
        None,
        max_length=256,
        description="layer_scaled only: the depths to measure (default 1..16)",
    )
    space: JsonObject = Field(
        default_factory=dict,
        description="the space's kind (default gpt2) and overrides of its settings",
    )
    objectives: list[str] = Field(
        default_factory=lambda: ["decoder_params", "latency_ms", "memory_mb"]
    )
    device_class: DeviceClass = "cpu"
    measurement: MeasurementSettings = Field(default_factory=MeasurementSettings)
    proxy_inputs: ProxyInputSettings = Field(
        default_factory=ProxyInputSettings,
        description="the minibatch of a low-cost proxy objective (computed by the agents)",
    )
    budget: Budget = Field(default_factory=Budget)
    constraints: Constraints = Field(default_factory=Constraints)
    population: Population = Field(
        default_factory=Population,
        description="lts/nsga2: generation sizes (initial is NSGA-II's population); hwnas: "
        f"initial is the size of its initial design (default {HWNAS_INITIAL})",
    )
    hypervolume: HypervolumeSettings = Field(default_factory=HypervolumeSettings)
    noise: NoiseSettings = Field(default_factory=NoiseSettings)
    seed: int = Field(0, ge=0, le=2**63 - 1)

    @field_validator("space")
    @classmethod
    def _space_valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            return parse_space(value).to_dict()
        except InvalidSpec as exc:
            raise ValueError(str(exc)) from None
        except TypeError as exc:
            raise ValueError(f"invalid space setting: {exc}") from None

    @field_validator("objectives")
    @classmethod
    def _objectives_valid(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in OBJECTIVES:
                raise ValueError(f"unknown objective {name!r}; allowed: {', '.join(OBJECTIVES)}")
        if len(set(value)) != len(value):
            raise ValueError("objectives must not repeat")
        if sum(v in PROXY_OBJECTIVES for v in value) != 1:
            raise ValueError(
                f"exactly one proxy objective is needed, one of: {', '.join(PROXY_OBJECTIVES)}"
            )
        if not any(v in HARDWARE_OBJECTIVES for v in value):
            raise ValueError(
                f"at least one hardware objective is needed: {', '.join(HARDWARE_OBJECTIVES)}"
            )
        return value

    @model_validator(mode="after")
    def _fits_the_space(self) -> SearchCreate:
        space = parse_space(self.space)
        limit = space.max_seq_len
        if limit is not None and self.measurement.seq_len > limit:
            raise ValueError(
                f"measurement.seq_len must be <= the longest sequence the space's models take "
                f"({limit})"
            )
        kind = get_kind(space.kind)
        runtime = self.measurement.runtime
        if runtime not in kind.runtimes:
            raise ValueError(
                f"measurement.runtime {runtime!r} cannot measure space kind {kind.name!r}; "
                f"allowed: {', '.join(kind.runtimes)}"
            )
        reason = check_proxy_for_kind(self.proxy_objective, space.kind)
        if reason is not None:
            raise ValueError(f"objectives: {reason}")
        return self._check_strategy(space)

    @property
    def proxy_objective(self) -> str:
        """The one proxy among the objectives (validation guarantees exactly one)."""
        return next(name for name in self.objectives if name in PROXY_OBJECTIVES)

    @property
    def agent_proxies(self) -> list[str]:
        """Objectives the agents compute: proxies that need the model built and run."""
        catalog = PROXY_CATALOG
        return [n for n in self.objectives if n in catalog and catalog[n].cost != "zero"]

    def _check_hypervolume(self) -> None:
        for where in ("ideal", "reference"):
            for name, value in getattr(self.hypervolume, where).items():
                if name not in self.objectives:
                    raise ValueError(
                        f"hypervolume.{where}: {name!r} is not an objective of this search; "
                        f"allowed: {', '.join(self.objectives)}"
                    )
                if not math.isfinite(value):
                    raise ValueError(f"hypervolume.{where}.{name}: must be a finite number")
        for name in self.objectives:
            ideal = self.hypervolume.ideal.get(name)
            reference = self.hypervolume.reference.get(name)
            if ideal is None or reference is None:
                continue
            worse = reference < ideal if OBJECTIVE_SENSE[name] == "max" else reference > ideal
            if not worse:
                raise ValueError(
                    f"hypervolume.reference.{name}: must be worse than the ideal {ideal} "
                    f"({'smaller' if OBJECTIVE_SENSE[name] == 'max' else 'larger'})"
                )

    def _check_strategy(self, space: Any) -> SearchCreate:
        self._check_hypervolume()
        if self.strategy == "hwnas" and "population" not in self.model_fields_set:
            self.population = Population(initial=HWNAS_INITIAL)
        if self.strategy == "hwnas" and self.surrogate is None:
            self.surrogate = HWNAS_SURROGATE
        if self.strategy != "hwnas" and self.surrogate is not None:
            raise ValueError("surrogate: only for strategy 'hwnas'")
        if self.strategy == "hwnas" and self.value_per is None:
            self.value_per = HWNAS_VALUE_PER
        if self.strategy != "hwnas" and self.value_per is not None:
            raise ValueError("value_per: only for strategy 'hwnas'")
        if self.strategy == "hwnas" and self.initial_design is None:
            self.initial_design = HWNAS_INITIAL_DESIGN
        if self.strategy != "hwnas" and self.initial_design is not None:
            raise ValueError("initial_design: only for strategy 'hwnas'")
        if self.strategy == "nsga2" and self.population.initial < 2:
            raise ValueError("population.initial: NSGA-II needs a population of at least 2")
        if self.strategy != "layer_scaled":
            if self.layers is not None:
                raise ValueError("layers: only for strategy 'layer_scaled'")
            return self
        if not hasattr(space, "baseline"):
            with_one = [n for n in kind_names() if hasattr(get_kind(n).space_type, "baseline")]
            raise ValueError(
                f"strategy: space kind {space.kind!r} has no layer-scaled baseline; "
                f"kinds with one: {', '.join(with_one)}"
            )
        layers = list(DEFAULT_BASELINE_LAYERS) if self.layers is None else self.layers
        if not layers or len(set(layers)) != len(layers) or not all(1 <= n <= 256 for n in layers):
            raise ValueError("layers: distinct depths in 1..256, at least one")
        try:
            for n in layers:
                space.baseline(n)
        except InvalidSpec as exc:
            raise ValueError(f"layers: the baseline is not a valid spec: {exc}") from None
        self.layers = sorted(layers)
        self.budget = Budget(max_evaluations=len(layers))
        return self


class BaselineCreate(Strict):
    """Measure a space's layer-scaled baseline (LTS) on a device class."""

    name: str | None = Field(None, max_length=200)
    space: JsonObject = Field(default_factory=dict)
    device_class: DeviceClass = "cpu"
    measurement: MeasurementSettings = Field(default_factory=MeasurementSettings)
    layers: list[int] | None = Field(None, max_length=256, description="default 1..16")

    @model_validator(mode="after")
    def _valid_as_a_search(self) -> BaselineCreate:
        try:
            self.as_search()
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            message = str(first.get("msg", "")).removeprefix("Value error, ")
            raise ValueError(f"{where + ': ' if where else ''}{message}") from None
        return self

    def as_search(self) -> SearchCreate:
        return SearchCreate(
            name=self.name or f"layer-scaled baseline ({self.space.get('kind', 'gpt2')})",
            strategy="layer_scaled",
            layers=self.layers,
            space=self.space,
            device_class=self.device_class,
            measurement=self.measurement,
        )
