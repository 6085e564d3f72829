"""A search's told results as a table: what every read of a search (its summary, frontier,
convergence, the dashboard's table) is computed from: the frontier beyond the device's noise,
each point's interval, the drift-corrected values.

A table only grows: results are told once, re-measurements are added as they finish. How
tables are read from the rows and kept per process: server.services.result_tables.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

import numpy as np

from archvocab.wire import OBJECTIVE_SENSE, JobStatus, SearchCreate
from search.noise import METRICS, NoiseModel, drift_factor, fit
from search.objectives import interval_bounds
from search.pareto import NoisyFront
from server.services.frontier import feasibility


@dataclass
class Told:
    """One told result: a measurement or a failure."""

    arch_id: str
    seq: int
    generation: int
    status: str  # measured | failed
    reused: bool
    feasible: bool | None  # None unless measured
    values: dict[str, float | None]  # every objective the search may read, by name
    hypervolume: float | None
    agent_id: str | None
    spec: dict[str, Any]
    device_s: float  # the agent's time for it (0 when reused)
    finished_at: datetime | None
    prediction: dict[str, float] | None
    busy: bool = False  # measured while the machine looked busy (after the agent's retries)
    reference: tuple[float, float] | None = None  # (latency, memory) of the nearest reference
    reference_key: tuple[str, str] | None = None  # (agent, when): one reading, many results


@dataclass(frozen=True)
class Again:
    """A re-measurement of a told candidate (a job of round > 0, server.services.remeasure)."""

    id: int
    arch_id: str
    latency: float | None  # None: the re-measurement failed
    memory: float | None
    busy: bool
    reference: tuple[float, float] | None
    reference_key: tuple[str, str] | None


@dataclass(frozen=True)
class Uncertainty:
    """A measured result's best estimate: its hardware values (the geometric mean of its
    quiet measurements), intervals meant to contain a re-measurement, drift-corrected values,
    and the frontier group it belongs to."""

    values: dict[str, float]
    measurements: int
    intervals: dict[str, tuple[float, float]]
    corrected: dict[str, float]
    group: str | None  # arch id of the nominal frontier point it cannot be told apart from
    certain: bool = False  # on the frontier whatever the noise (`search.pareto.beyond_doubt`)


T = TypeVar("T")


@dataclass(frozen=True)
class FrontierPoint:
    """What choosing one architecture reads of a frontier point (server.services.choosing),
    from the table alone, no row loaded: its best estimates, their intervals and its group."""

    arch_id: str
    objectives: dict[str, float | None]
    intervals: dict[str, tuple[float, float]]
    frontier_group: str | None


@dataclass
class ResultTable:
    """A search's told results and, derived from them and their re-measurements, its noise
    model and frontier.

    The frontier is the frontier beyond noise (`search.pareto.front_beyond_noise`): a
    result is off it only when another's interval lies wholly better; a result with no quiet
    measurement (all busy) never enters it. New results join it one at a time while the noise
    model stays put; a reference reading or re-measurement moves every interval, and the
    frontier is rebuilt. Each change is numbered (`revision`, `frontier_token`), so that a
    reader can ask what changed since a state it read (`changed_since`).
    """

    search_id: int
    request: SearchCreate
    rows: list[Told] = field(default_factory=list)
    frontier: list[Told] = field(default_factory=list)
    uncertainty: dict[str, Uncertainty] = field(default_factory=dict)  # frontier members
    noise: NoiseModel | None = None
    plain_frontier: int = 0  # size of the nominal frontier, for comparison
    stamp: Any = None  # the normalisation the hypervolumes were read under
    seen_again: set[int] = field(default_factory=set)  # ids of the re-measurements read
    _readings: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    # Reference readings that came with earlier searches' results on this device class with
    # these settings, by reference arch id: the device's noise is not the search's alone.
    _earlier: dict[tuple[str, str], tuple[str, tuple[float, float]]] = field(
        default_factory=dict
    )  # (agent, when) -> (reference arch id, reading)
    _again: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # quiet ones
    _by_arch: dict[str, Told] = field(default_factory=dict)
    _level: tuple[float, float] | None = None  # the median reference reading, once per refit
    _front: NoisyFront | None = None  # what `frontier`'s places rest on, member by member
    # Each change of the frontier: (revision, arch ids whose place changed), since the last
    # rebuild (which changes every place) and at most CHANGES_KEPT of them.
    revision: int = 0
    _changes: list[tuple[int, frozenset[str]]] = field(default_factory=list)
    _rebuilt: int = 0
    _name: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    _views: tuple[int, dict[str, Any]] = (-1, {})  # (revision, `per_frontier` values by name)

    @property
    def objectives(self) -> list[str]:
        return list(self.request.objectives)

    @property
    def confidence(self) -> float:
        return self.request.noise.confidence

    @property
    def epoch(self) -> str:
        """Names the normalisation the rows' hypervolumes were computed under."""
        canonical = json.dumps(self.stamp, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    @property
    def last(self) -> int:
        return self.rows[-1].seq if self.rows else 0

    def per_frontier(self, name: str, make: Callable[[], T]) -> T:
        """`make()`, made once per state of the frontier and kept under `name` until it
        changes: views of the frontier that many reads share."""
        revision, views = self._views
        if revision != self.revision:
            revision, views = self.revision, {}
            self._views = revision, views
        if name not in views:
            views[name] = make()
        return views[name]

    def frontier_points(self) -> list[FrontierPoint]:
        """The frontier's points in result order."""

        def make() -> list[FrontierPoint]:
            uncertainty = self.uncertainty  # one another result just pushed off is left out
            return [
                FrontierPoint(t.arch_id, {**t.values, **u.values}, u.intervals, u.group)
                for t in self.frontier
                if (u := uncertainty.get(t.arch_id))
            ]

        return self.per_frontier("points", make)

    def told(self, arch_id: str) -> Told:
        """The told result of an architecture."""
        return self._by_arch[arch_id]

    @property
    def frontier_token(self) -> str:
        """Names the frontier's state in this table: another table (another process, or a
        rebuilt cache) never gives the same name."""
        return f"{self._name}.{self.revision}"

    def changed_since(self, token: str) -> set[str] | None:
        """The arch ids whose place on the frontier (membership, interval, group, certainty)
        changed since the state `token` names; None when this table cannot tell (another
        table's token, or one from before its last rebuild)."""
        name, _, revision = token.partition(".")
        if name != self._name or not revision.isdigit() or int(revision) > self.revision:
            return None
        since = int(revision)
        if since < self._rebuilt:
            return None
        changed: set[str] = set()
        for at, archs in reversed(self._changes):
            if at <= since:
                break
            changed |= archs
        return changed

    def add(self, new: list[Told], again: list[Again] | tuple = ()) -> None:
        """Append results and re-measurements; refit the noise model and the frontier when
        any came."""
        again = [a for a in again if a.id not in self.seen_again]  # each one counts once
        if not new and not again and self.noise is not None:
            return
        self.rows.extend(new)
        for t in new:
            self._by_arch[t.arch_id] = t
            if t.reference_key is not None and t.reference is not None:
                self._readings[t.reference_key] = t.reference
        for a in again:
            self.seen_again.add(a.id)
            if a.reference_key is not None and a.reference is not None:
                self._readings[a.reference_key] = a.reference
            if a.latency is not None and not a.busy:
                self._again.setdefault(a.arch_id, []).append((a.latency, a.memory))
        references, candidates = self._groups()
        noise = fit(references, self.request.measurement.device, candidates=candidates)
        level = self._median_reading()
        # With the same intervals, whatever is dominated beyond the noise stays so, and a
        # dominator can be found among the frontier: only the frontier and the new results
        # need looking at. A new reading or re-measurement moves every interval: all of them.
        same = noise == self.noise and level == self._level and not again
        self.noise, self._level = noise, level
        if same and self._front is not None and len(new) <= JOIN_AT_MOST:
            self._join(new)
        else:
            self._frontier(self.frontier + new if same else self.rows)

    def quiet_measurements(self, t: Told) -> list[tuple[float, float]]:
        """(latency, memory) of every measurement of `t` not flagged busy."""
        first = t.values.get("latency_ms"), t.values.get("memory_mb")
        mine = (
            [first]
            if t.status == JobStatus.MEASURED and not t.busy and first[0] is not None
            else []
        )
        return mine + self._again.get(t.arch_id, [])

    def add_earlier(self, readings: dict[tuple[str, str], tuple[str, tuple[float, float]]]) -> None:
        """Reference readings from earlier searches of the device class (by reference arch):
        they widen the evidence of the noise model, not the drift level."""
        self._earlier = readings
        self.noise = None  # refit at the next add

    def _groups(self) -> tuple[dict[str, list[list[float]]], dict[str, list[list[float]]]]:
        """Repeated measurements by metric: (the reference readings, each reference
        architecture's a group, this search's and earlier searches'; every candidate
        measured more than once, each a group)."""
        earlier: dict[str, list[tuple[float, float]]] = {}
        for key, (arch, reading) in self._earlier.items():
            if key not in self._readings:  # a reused measurement brings its reading along
                earlier.setdefault(arch, []).append(reading)
        references = [list(self._readings.values()), *earlier.values()]
        candidates = []
        for arch in self._again:  # only a re-measured candidate has more than one
            t = self._by_arch.get(arch)
            if t is not None and len(m := self.quiet_measurements(t)) > 1:
                candidates.append(m)

        def by_metric(groups: list[list[tuple[float, float]]]) -> dict[str, list[list[float]]]:
            return {metric: [[v[i] for v in g] for g in groups] for i, metric in enumerate(METRICS)}

        return by_metric(references), by_metric(candidates)

    def reference_level(self) -> tuple[float, float] | None:
        """The median reference reading (latency, memory): what drift is corrected to."""
        return self._level

    def _median_reading(self) -> tuple[float, float] | None:
        if not self._readings:
            return None
        readings = np.array(list(self._readings.values()), dtype=float)
        return float(np.median(readings[:, 0])), float(np.median(readings[:, 1]))

    def reference_readings(self) -> int:
        return len(self._readings)

    def earlier_readings(self) -> int:
        return sum(1 for key in self._earlier if key not in self._readings)

    def describe(
        self, arch_id: str, group: str | None = None, certain: bool = False
    ) -> Uncertainty | None:
        """The best estimate of a told architecture's hardware values, their intervals (at
        the search's confidence) and drift-corrected values; None without a quiet
        measurement. Drift is corrected by the reference reading beside the first one."""
        t = self._by_arch.get(arch_id)
        if t is None:
            return None
        quiet = self.quiet_measurements(t)
        measured = quiet or (
            [(t.values["latency_ms"], t.values["memory_mb"])]
            if t.status == JobStatus.MEASURED and t.values.get("latency_ms") is not None
            else []
        )  # a busy-only result still has values and intervals, just no place on the frontier
        if not measured:
            return None
        assert self.noise is not None
        level = self.reference_level()
        values, intervals, corrected = {}, {}, {}
        for i, metric in enumerate(METRICS):
            value = _geometric_mean([m[i] for m in measured])
            values[metric] = value
            intervals[metric] = self.noise.interval(metric, value, self.confidence, len(measured))
            reading = t.reference[i] if t.reference else None
            corrected[metric] = value * drift_factor(reading, level[i] if level else None)
        return Uncertainty(values, len(quiet), intervals, corrected, group, certain)

    def _frontier(self, pool: list[Told]) -> None:
        """The frontier beyond noise among `pool` (results with a quiet measurement count, in
        result order), vectorised: a search may hold 100,000 results."""
        nominal, half, usable = self._points(pool)
        rows = np.flatnonzero(usable)
        mask, front = NoisyFront.of(nominal[rows], *interval_bounds(nominal[rows], half[rows]))
        members = [pool[rows[i]] for i in np.flatnonzero(mask)]
        self._front, self.frontier = front, members
        self.plain_frontier = int(front.plain.sum())
        self.uncertainty = self._describe_members(members, front)
        # Last: a reader reads the token first, so it never names a newer state than it saw.
        self._rebuilt, self._changes = self.revision + 1, []
        self.revision += 1

    def _describe_members(self, members: list[Told], front: NoisyFront) -> dict[str, Uncertainty]:
        """`describe` of every member, with its group and certainty. A member measured once
        (most of a large frontier) takes a shorter way to the same values: its one quiet
        measurement, the intervals' factors computed once."""
        assert self.noise is not None
        level = self.reference_level() or (None, None)
        factors = []
        for metric in METRICS:
            half = self.noise.half_width(metric, self.confidence, 1)
            factors.append((math.exp(-half), math.exp(half)))
        out = {}
        for t, g, c in zip(members, front.group, front.certain, strict=True):
            group, certain = members[g].arch_id, bool(c)
            if t.arch_id in self._again:
                out[t.arch_id] = self.describe(t.arch_id, group, certain)
                continue
            values, intervals, corrected = {}, {}, {}
            for i, metric in enumerate(METRICS):
                value = float(t.values[metric])
                values[metric] = value
                intervals[metric] = (value * factors[i][0], value * factors[i][1])
                reading = t.reference[i] if t.reference else None
                corrected[metric] = value * drift_factor(reading, level[i])
            out[t.arch_id] = Uncertainty(values, 1, intervals, corrected, group, certain)
        return out

    def _join(self, new: list[Told]) -> None:
        """Add newer results to the frontier one at a time (`NoisyFront.extend`) with the noise
        model unchanged: a few comparisons per member each, not a rebuild. The table's lists
        are replaced, never changed in place, since readers may hold them."""
        assert self._front is not None
        front, members, uncertainty = self._front, self.frontier, dict(self.uncertainty)
        changes: list[tuple[int, frozenset[str]]] = []
        for t in new:
            nominal, half, usable = self._points([t])
            if not usable[0]:
                continue
            joined = front.extend(nominal[0], *(b[0] for b in interval_bounds(nominal, half)))
            if joined is None:
                continue
            before, (front, stays) = front, joined
            keep = np.flatnonzero(stays)
            gone = [members[i].arch_id for i in np.flatnonzero(~stays)]
            for arch in gone:
                del uncertainty[arch]
            members = (
                [*members, t] if len(keep) == len(members) else [*(members[i] for i in keep), t]
            )
            position = np.full(len(before), -1, dtype=np.intp)
            position[keep] = np.arange(len(keep))
            moved = (position[before.group[keep]] != front.group[:-1]) | (
                before.certain[keep] != front.certain[:-1]
            )
            for i in np.flatnonzero(moved):
                arch = members[i].arch_id
                group = members[front.group[i]].arch_id
                uncertainty[arch] = replace(
                    uncertainty[arch], group=group, certain=bool(front.certain[i])
                )
            uncertainty[t.arch_id] = self.describe(
                t.arch_id, members[front.group[-1]].arch_id, bool(front.certain[-1])
            )
            touched = {t.arch_id, *gone, *(members[i].arch_id for i in np.flatnonzero(moved))}
            changes.append((self.revision + len(changes) + 1, frozenset(touched)))
        self._front, self.frontier, self.uncertainty = front, members, uncertainty
        self._record(changes)
        self.plain_frontier = int(front.plain.sum())

    def _record(self, changes: list[tuple[int, frozenset[str]]]) -> None:
        """Keep the changes a join made (after the frontier they describe is in place, so a
        reader never sees a token newer than the frontier)."""
        if not changes:
            return
        kept = [*self._changes, *changes]
        if len(kept) > CHANGES_KEPT:
            kept = kept[-CHANGES_KEPT:]
            self._rebuilt = kept[0][0] - 1
        self._changes = kept
        self.revision = changes[-1][0]

    def _points(self, pool: list[Told]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(values as `search.pareto` wants them, log half-widths, usable) of `pool`'s rows,
        in objective order. With `noise.frontier_values = "corrected"` the measured values are
        the drift-corrected ones, and the bounds are checked on them."""
        objectives, request = self.objectives, self.request
        assert self.noise is not None
        corrected = request.noise.frontier_values == "corrected"
        n, k = len(pool), len(objectives)
        nominal = np.full((n, k), np.nan)  # in objective order
        for j, objective in enumerate(objectives):
            nominal[:, j] = [_number(t.values.get(objective)) for t in pool]
        usable = np.array([bool(t.feasible) and not t.busy for t in pool], dtype=bool)
        if corrected and self._level is not None:
            self._correct(pool, nominal, usable)
        repeats = np.ones(n)
        if self._again:
            index = {t.arch_id: i for i, t in enumerate(pool)}
            for arch in self._again:  # re-measured: the mean of its quiet measurements
                i = index.get(arch)
                u = self.describe(arch) if i is not None else None
                if u is None or not u.measurements:
                    continue
                values = {**pool[i].values, **(u.corrected if corrected else u.values)}
                nominal[i] = [_number(values.get(o)) for o in objectives]
                repeats[i] = u.measurements
                usable[i] = bool(
                    feasibility(
                        request, JobStatus.MEASURED, values["latency_ms"], values["memory_mb"]
                    )
                )
        usable &= ~np.isnan(nominal).any(axis=1)
        half = np.zeros_like(nominal)
        for j, objective in enumerate(objectives):
            if objective in METRICS:  # measured: known to within the noise; the rest exact
                widths = {
                    r: self.noise.half_width(objective, self.confidence, int(r))
                    for r in np.unique(repeats)
                }
                half[:, j] = [widths[r] for r in repeats]
        signs = np.array([-1.0 if OBJECTIVE_SENSE[o] == "max" else 1.0 for o in objectives])
        return nominal * signs, half, usable

    def _correct(self, pool: list[Told], nominal: np.ndarray, usable: np.ndarray) -> None:
        """Drift-correct `pool`'s measured objectives in place (as `describe` does for one)
        and re-check the bounds on the corrected values."""
        assert self._level is not None
        factors = np.ones((len(pool), len(METRICS)))
        for i, t in enumerate(pool):
            if t.reference is not None:
                factors[i] = [drift_factor(t.reference[m], self._level[m]) for m in (0, 1)]
        for j, objective in enumerate(self.objectives):
            if objective in METRICS:
                nominal[:, j] *= factors[:, METRICS.index(objective)]
        for i, t in enumerate(pool):
            if t.reference is not None and t.status == JobStatus.MEASURED and not t.busy:
                latency, memory = (
                    _number(t.values.get(m)) * factors[i, c] for c, m in enumerate(METRICS)
                )
                usable[i] = bool(feasibility(self.request, JobStatus.MEASURED, latency, memory))


# New results added one at a time (`ResultTable._join`) up to this many at once; more are
# cheaper to add by rebuilding the frontier from the members and them.
JOIN_AT_MOST = 256
# Frontier changes a table remembers, for readers that ask what changed since a state.
CHANGES_KEPT = 5000


def _number(value: float | None) -> float:
    return np.nan if value is None else float(value)


def _geometric_mean(values: list[float]) -> float:
    """exp(mean(log)); a single value as it is (no round trip through the logarithm)."""
    if len(values) == 1:
        return float(values[0])
    return float(np.exp(np.mean(np.log(values))))
