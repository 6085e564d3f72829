"""A device replayed from a table of real measurements, for searches at CI-sized cost.

`bench/device_table.py` measured a few hundred architectures on a real device through the
agent's own path. An architecture in the table replays exactly what was measured. Any other
one gets a value interpolated from the table, in three parts:

- a physical base: latency and memory as linear functions of analytic counts (FLOPs, depth,
  parameters), fitted by least squares on relative error over the whole table;
- the table's structure the base misses: the base's relative residuals of the nearest table
  rows (inverse-distance weighted, in standardised architecture features);
- measurement noise: a log-normal factor seeded by the arch id, with the spread of the
  repeat-to-repeat variation measured on this machine (docs/benchmarks.md: CV about 1.5%).

So unseen architectures are as noisy and as structured as measured ones, the same
architecture always replays the same values, and the replay is not the linear model a
search's own surrogate might fit. The device-seconds of a measurement (the agent's wall time
for it) replay the same way, on top of a base linear in latency.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from archvocab.registry import ArchSpec, parse_spec
from proxies.flops import flops
from proxies.params import decoder_params, total_params

HERE = Path(__file__).resolve().parent
DEFAULT_TABLE = HERE / "data" / "device_table_gpt2_cpu.json"
NOISE_CV = 0.015  # repeat-to-repeat CV of a median latency here (bench/measurement.py)
NEIGHBOURS = 6


@dataclass(frozen=True)
class Replayed:
    latency_ms: float
    memory_mb: float
    wall_s: float  # device-seconds the agent spent on the measurement
    from_table: bool


def counts(spec: ArchSpec) -> dict[str, float]:
    """The analytic counts the base models and the neighbour distance use."""
    return {
        "flops": float(flops(spec)),
        "n_layer": float(spec.n_layer),
        "decoder_params": float(decoder_params(spec)),
        "total_params": float(total_params(spec)),
        "d_model": float(getattr(spec, "d_model", 0)),
    }


def _base_design(c: Mapping[str, float], target: str) -> list[float]:
    if target == "latency_ms":
        return [1.0, c["flops"], c["n_layer"], c["total_params"]]
    return [1.0, c["total_params"], c["n_layer"], c["d_model"] * c["n_layer"]]


def _neighbour_features(c: Mapping[str, float]) -> list[float]:
    return [
        math.log(c["flops"]),
        c["n_layer"],
        math.log(c["decoder_params"]),
        math.log(c["total_params"]),
        c["d_model"],
    ]


def _noise(arch_id: str, what: str) -> float:
    """A log-normal factor with CV about NOISE_CV, the same for the same arch id."""
    digest = hashlib.sha256(f"{arch_id}:{what}".encode()).digest()
    u1 = (int.from_bytes(digest[:8], "big") + 1) / (2**64 + 1)
    u2 = int.from_bytes(digest[8:16], "big") / 2**64
    z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
    return math.exp(NOISE_CV * z)


class DeviceReplay:
    """Replay a device table: exact for measured architectures, interpolated for the rest."""

    def __init__(self, table: Mapping[str, Any]) -> None:
        rows = table["rows"]
        if len(rows) < 20:
            raise ValueError(f"a device table needs at least 20 rows, got {len(rows)}")
        self.table = table
        self.settings = table.get("settings", {})
        self.space = table.get("space", {})
        self._exact = {r["arch_id"]: r for r in rows}
        self._counts = [counts(parse_spec(r["spec"])) for r in rows]
        self._models: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for target in ("latency_ms", "memory_mb"):
            y = np.array([r[target] for r in rows])
            x = np.array([_base_design(c, target) for c in self._counts])
            self._models[target] = self._fit(x, y)
        latency = np.array([r["latency_ms"] for r in rows])
        walls = np.array([r["wall_s"] for r in rows])
        self._models["wall_s"] = self._fit(np.column_stack([np.ones(len(rows)), latency]), walls)
        features = np.array([_neighbour_features(c) for c in self._counts])
        self._mean, self._scale = features.mean(axis=0), features.std(axis=0) + 1e-12
        self._features = (features - self._mean) / self._scale

    @classmethod
    def load(cls, path: Path | str = DEFAULT_TABLE) -> DeviceReplay:
        return cls(json.loads(Path(path).read_text()))

    @staticmethod
    def _fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Least squares on relative error; returns (coefficients, log residual per row)."""
        coef, *_ = np.linalg.lstsq(x / y[:, None], np.ones(len(y)), rcond=None)
        base = np.maximum(x @ coef, 1e-9)
        return coef, np.log(y / base)

    def __len__(self) -> int:
        return len(self._exact)

    def measure(self, spec: ArchSpec | Mapping[str, Any]) -> Replayed:
        if isinstance(spec, Mapping):
            spec = parse_spec(spec)
        row = self._exact.get(spec.arch_id)
        if row is not None:
            return Replayed(row["latency_ms"], row["memory_mb"], row["wall_s"], True)
        c = counts(spec)
        weights, near = self._neighbours(c)
        values = {}
        for target in ("latency_ms", "memory_mb"):
            coef, residual = self._models[target]
            base = max(float(np.dot(_base_design(c, target), coef)), 1e-6)
            values[target] = base * math.exp(float(weights @ residual[near]))
            values[target] *= _noise(spec.arch_id, target)
        coef, residual = self._models["wall_s"]
        wall = max(float(coef[0] + coef[1] * values["latency_ms"]), 0.1)
        wall *= math.exp(float(weights @ residual[near]))
        return Replayed(values["latency_ms"], values["memory_mb"], wall, False)

    def _neighbours(self, c: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
        point = (np.array(_neighbour_features(c)) - self._mean) / self._scale
        distance = np.sqrt(((self._features - point) ** 2).sum(axis=1))
        near = np.argsort(distance)[:NEIGHBOURS]
        weights = 1.0 / (distance[near] + 0.05)
        return weights / weights.sum(), near
