"""A search's told results as a table: what every read of a search (its summary, frontier,
convergence, the dashboard's table) is computed from: the frontier beyond the device's noise,
each point's interval, the drift-corrected values.

A table only grows: results are told once, re-measurements are added as they finish. How
tables are read from the rows and kept per process: server.services.result_tables.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from archvocab.summary import spec_summary
from archvocab.wire import OBJECTIVE_SENSE, JobStatus, SearchCreate
from search.noise import METRICS, NoiseModel, drift_factor, fit
from search.objectives import interval_bounds
from search.pareto import NoisyFront, dominated_by
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

    @functools.cached_property
    def summary(self) -> str:
        """The spec in one line (tables and hovers), made on the first read: a large search's
        first /points?spec=summary makes 100,000 of them, later reads reuse them."""
        return spec_summary(self.spec)


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
    measurement (all busy) never enters it. While the noise model stays put, new results join
    it one at a time, or together where that is cheaper (`joins_together`); a reference
    reading or re-measurement that refits the model moves every interval, and the frontier is
    rebuilt. Each change is numbered (`revision`, `frontier_token`), so that a
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
    _quiet_again: list[tuple[int, str, tuple[float, float]]] = field(default_factory=list)
    _by_arch: dict[str, Told] = field(default_factory=dict)
    _index: dict[str, int] = field(default_factory=dict)  # arch id -> its place in `rows`
    _level: tuple[float, float] | None = None  # the median reference reading, once per refit
    # The counts of readings and re-measurements the noise model and level were fitted to.
    _evidence: tuple[int, int] | None = None
    _front: NoisyFront | None = None  # what `frontier`'s places rest on, member by member
    _at: RowPoints | None = None  # every row, as the frontier ranks it
    # Each change of the frontier: (revision, arch ids whose place changed), since the last
    # rebuild (which changes every place) and at most CHANGES_KEPT of them.
    revision: int = 0
    _changes: list[tuple[int, frozenset[str]]] = field(default_factory=list)
    _rebuilt: int = 0
    _name: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    _views: tuple[int, dict[str, Any]] = (-1, {})  # (revision, `per_frontier` values by name)
    _kept: dict[str, dict[Any, Any]] = field(default_factory=dict)  # `per_rows` values by name

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

    def per_rows(self, name: str, key: Any, make: Callable[[], T]) -> T:
        """`make()`, made once and kept under (`name`, `key`) as long as the table: views of
        rows, which never change once added (a new normalisation makes a new table). Two
        readers may both make one; they make the same."""
        kept = self._kept.setdefault(name, {})
        if key not in kept:
            kept[key] = make()
        return kept[key]

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

    @property
    def remeasured(self) -> dict[str, list[tuple[float, float]]]:
        """The quiet re-measurements of each result measured again, by arch id."""
        return self._again

    def estimates(self, arch_ids: Iterable[str]) -> dict[str, dict[str, float]]:
        """The best estimates of the hardware values of the re-measured among `arch_ids`:
        only theirs differ from their rows' first measurement."""
        again = self._again
        return {
            arch: dict(u.values)
            for arch in arch_ids
            if arch in again and (u := self.describe(arch))
        }

    def crowded(self) -> list[Told]:
        """The frontier's members that share their group with another, in result order."""
        front = self._front
        if front is None or not len(front):
            return []
        sizes = np.bincount(front.group, minlength=len(front))
        assert self._at is not None
        return self._at.rows[front.keys[sizes[front.group] > 1]].tolist()

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
        """Append results and re-measurements, and bring the frontier up to date: new results
        join it and re-measured ones move on it one at a time while the noise model stays
        put; when it is refitted (`evidence_used`), every interval moves and the frontier is
        rebuilt from all the results."""
        again = [a for a in again if a.id not in self.seen_again]  # each one counts once
        if not new and not again and self.noise is not None:
            return
        first = len(self.rows)
        self.rows.extend(new)
        for i, t in enumerate(new, start=first):
            self._by_arch[t.arch_id] = t
            self._index[t.arch_id] = i
            if t.reference_key is not None and t.reference is not None:
                self._readings[t.reference_key] = t.reference
        for a in again:
            self.seen_again.add(a.id)
            if a.reference_key is not None and a.reference is not None:
                self._readings[a.reference_key] = a.reference
            if a.latency is not None and not a.busy:
                self._again.setdefault(a.arch_id, []).append((a.latency, a.memory))
                self._quiet_again.append((a.id, a.arch_id, (a.latency, a.memory)))
        evidence = evidence_used(len(self._readings)), evidence_used(len(self._quiet_again))
        if self.noise is None or evidence != self._evidence or self._front is None:
            self._refit(evidence)
            self._rebuild()
            return
        if joins_together(len(new), len(self._front)):
            self._join_together(first, new)
            new = []
        moved = sorted({a.arch_id for a in again if a.arch_id in self._index})
        self._update(first, new, moved)

    def quiet_measurements(self, t: Told) -> list[tuple[float, float]]:
        """(latency, memory) of every measurement of `t` not flagged busy."""
        return self._first_quiet(t) + self._again.get(t.arch_id, [])

    @staticmethod
    def _first_quiet(t: Told) -> list[tuple[float, float]]:
        first = t.values.get("latency_ms"), t.values.get("memory_mb")
        quiet = t.status == JobStatus.MEASURED and not t.busy and first[0] is not None
        return [first] if quiet else []

    def add_earlier(self, readings: dict[tuple[str, str], tuple[str, tuple[float, float]]]) -> None:
        """Reference readings from earlier searches of the device class (by reference arch):
        they widen the evidence of the noise model, not the drift level."""
        self._earlier = readings
        self.noise = None  # refit at the next add

    def _refit(self, evidence: tuple[int, int]) -> None:
        """Fit the noise model and the drift level to the first `evidence` readings (by
        when they were taken) and re-measurements (by job): the same results give the same
        model however they arrived."""
        readings, again = evidence
        ordered = sorted(self._readings.items(), key=lambda kv: (kv[0][1], kv[0][0]))[:readings]
        used = dict(ordered)
        earlier: dict[str, list[tuple[float, float]]] = {}
        for key, (arch, reading) in self._earlier.items():
            if key not in used:  # a reused measurement brings its reading along
                earlier.setdefault(arch, []).append(reading)
        references = [list(used.values()), *earlier.values()]
        repeats: dict[str, list[tuple[float, float]]] = {}
        for _, arch, values in sorted(self._quiet_again)[:again]:
            repeats.setdefault(arch, []).append(values)
        candidates = []
        for arch, values in repeats.items():  # only a re-measured candidate has more than one
            t = self._by_arch.get(arch)
            if t is not None and len(m := self._first_quiet(t) + values) > 1:
                candidates.append(m)

        def by_metric(groups: list[list[tuple[float, float]]]) -> dict[str, list[list[float]]]:
            return {metric: [[v[i] for v in g] for g in groups] for i, metric in enumerate(METRICS)}

        device = self.request.measurement.device
        self.noise = fit(by_metric(references), device, candidates=by_metric(candidates))
        self._level = _median(list(used.values()))
        self._evidence = evidence

    def reference_level(self) -> tuple[float, float] | None:
        """The median reference reading (latency, memory): what drift is corrected to."""
        return self._level

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

    def _rebuild(self) -> None:
        """The noise model moved: every row's place worked out again, and the frontier beyond
        noise built from all of them (those with a quiet measurement count), vectorised: a
        search may hold 100,000 results."""
        at = self._at = RowPoints(len(self.objectives))
        at.extend(*self._points(self.rows), self.rows)
        keys = np.flatnonzero(at.usable)
        _, front = NoisyFront.of(at.nominal[keys], at.low[keys], at.high[keys], keys=keys)
        members = at.rows[front.keys].tolist()
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

    def _update(self, first: int, new: list[Told], moved: list[str]) -> None:
        """With the noise model unchanged: add the rows from `first` on (`new`) to the
        frontier one at a time, then move the re-measured results `moved` (their old place
        taken away, their new one added): a few comparisons per member each, not a rebuild.
        The table's lists are replaced, never changed in place, since readers may hold them."""
        assert self._front is not None
        front, uncertainty = self._front, dict(self.uncertainty)
        changes: list[tuple[int, frozenset[str]]] = []

        def step(after: NoisyFront, arch: str) -> None:
            nonlocal front
            touched = self._apply(front, after, uncertainty, arch)
            changes.append((self.revision + len(changes) + 1, touched))
            front = after

        at = self._at
        assert at is not None
        for i, t in enumerate(new, start=first):
            nominal, half, usable = self._points([t])
            at.extend(nominal, half, usable, [t])
            joined = front.insert(i, at.nominal[i], at.low[i], at.high[i]) if usable[0] else None
            if joined is not None:
                step(joined[0], t.arch_id)
        for arch in moved:
            i = self._index[arch]
            after = front
            member = np.searchsorted(front.keys, i)
            if member < len(front) and front.keys[member] == i:
                # What its old worst case held off may come back.
                off = np.ones(len(at), dtype=bool)
                off[front.keys] = False
                held = np.flatnonzero(off & at.usable & dominated_by(at.low, at.high[i : i + 1]))
                after = front.remove(i, (held, at.nominal[held], at.low[held], at.high[held]))
            nominal, half, usable = self._points([self.rows[i]])
            at.set(i, nominal, half, usable)
            joined = after.insert(i, at.nominal[i], at.low[i], at.high[i]) if usable[0] else None
            step(after if joined is None else joined[0], arch)
        self._front, self.uncertainty = front, uncertainty
        self.frontier = at.rows[front.keys].tolist()
        self._record(changes)
        self.plain_frontier = int(front.plain.sum())

    def _join_together(self, first: int, new: list[Told]) -> None:
        """With the noise model unchanged: the rows from `first` on (`new`) join the frontier
        at once, which is then built from its members and them (the front `insert` would
        reach one at a time); only the places that changed are described anew, and they make
        one change."""
        assert self._front is not None and self._at is not None
        at, before = self._at, self._front
        at.extend(*self._points(new), new)
        keys = np.concatenate([before.keys, np.arange(first, len(self.rows))])
        keys = keys[at.usable[keys]]
        _, after = NoisyFront.of(at.nominal[keys], at.low[keys], at.high[keys], keys=keys)
        uncertainty = dict(self.uncertainty)
        touched = self._apply(before, after, uncertainty)
        self._front, self.uncertainty = after, uncertainty
        self.frontier = at.rows[after.keys].tolist()
        self._record([(self.revision + 1, touched)] if touched else [])
        self.plain_frontier = int(after.plain.sum())

    def _apply(
        self,
        before: NoisyFront,
        after: NoisyFront,
        uncertainty: dict[str, Uncertainty],
        arch: str | None = None,
    ) -> frozenset[str]:
        """Bring `uncertainty` from `before` to `after`, where `arch` joined or moved (None:
        new rows joined, each a member of `after` not of `before`), and name the arch ids
        whose place changed."""
        assert self._at is not None
        rows = self._at.rows
        old, new = before.keys, after.keys
        where = np.searchsorted(new, old)
        stays = where < len(new)
        stays[stays] = new[where[stays]] == old[stays]
        came = np.ones(len(new), dtype=bool)
        came[where[stays]] = False
        same = where[stays]
        differs = (old[before.group][stays] != new[after.group][same]) | (
            before.certain[stays] != after.certain[same]
        )
        touched = set() if arch is None else {arch}
        for key in old[~stays]:
            gone = rows[key].arch_id
            del uncertainty[gone]
            touched.add(gone)
        if arch is not None:
            uncertainty.pop(arch, None)  # a moved one is described anew, if it stays
        for j in same[differs]:
            member = rows[new[j]].arch_id
            group = rows[new[after.group[j]]].arch_id
            certain = bool(after.certain[j])
            touched.add(member)
            if member in uncertainty:
                uncertainty[member] = replace(uncertainty[member], group=group, certain=certain)
        described = [*np.flatnonzero(came)]
        if arch is not None and arch in self._index:
            k = np.searchsorted(new, self._index[arch])
            if k < len(new) and new[k] == self._index[arch]:
                described.append(k)
        for j in described:
            member = rows[new[j]].arch_id
            group = rows[new[after.group[j]]].arch_id
            uncertainty[member] = self.describe(member, group, bool(after.certain[j]))
            touched.add(member)
        return frozenset(touched)

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
            again = self._again  # re-measured: the mean of its quiet measurements
            for i in [i for i, t in enumerate(pool) if t.arch_id in again]:
                u = self.describe(pool[i].arch_id)
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


def joins_together(new: int, members: int) -> bool:
    """Whether `new` results join a frontier of `members` more cheaply together (the front
    built from the members and them) than one at a time. In CPU (bench/frontier_join.py):
    one joining costs about 0.25 ms plus 0.04 us a member, and a build 0.5 ms plus 4.3 us a
    member; at 1,500 members the two meet at about 20 results, at 14,000 at about 75."""
    one = 0.25 + 0.04e-3 * members
    build = 0.5 + 4.3e-3 * members
    return new * one > build


# The noise model is refitted when the count of readings (or of re-measurements) has grown by
# REFIT_STEP since the last fit, or by REFIT_GROWTH once that is more. A refit moves every
# interval and rebuilds the frontier from all the results, which at 20,000 of them takes a
# quarter of a second; a quarter more readings move the fitted spread by well under its own
# uncertainty (its relative standard error is about 1/sqrt(2 dof)), and the priors count as
# 2 and 4 readings (search.noise). So a search refits some tens of times in all, not with
# every fifth result of each agent.
REFIT_STEP = 4
REFIT_GROWTH = 1.25
# Frontier changes a table remembers, for readers that ask what changed since a state.
CHANGES_KEPT = 5000


def _number(value: float | None) -> float:
    return np.nan if value is None else float(value)


def _geometric_mean(values: list[float]) -> float:
    """exp(mean(log)); a single value as it is (no round trip through the logarithm)."""
    if len(values) == 1:
        return float(values[0])
    return float(np.exp(np.mean(np.log(values))))


def evidence_used(count: int) -> int:
    """How many of `count` readings (or re-measurements) the noise model is fitted to: the
    last rung that `count` reached of a ladder from 0 whose steps are REFIT_STEP or, once
    that is more, a REFIT_GROWTH share. A function of the count alone, so that a table built
    at once and one kept up to date result by result fit the same model."""
    used = 0
    while (rung := max(used + REFIT_STEP, math.ceil(used * REFIT_GROWTH))) <= count:
        used = rung
    return used


def _median(readings: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The median reading, metric by metric; None without one."""
    if not readings:
        return None
    values = np.array(readings, dtype=float)
    return float(np.median(values[:, 0])), float(np.median(values[:, 1]))


class RowPoints:
    """Every told result as the frontier ranks it, by row: its values (`ResultTable._points`),
    their bounds and whether it may rank at all. Kept beside the frontier so that a result
    measured again can find what its old values held off the frontier."""

    def __init__(self, objectives: int) -> None:
        self._n = 0
        self._nominal = self._low = self._high = np.empty((0, objectives))
        self._usable = np.empty(0, dtype=bool)
        self._rows = np.empty(0, dtype=object)

    def __len__(self) -> int:
        return self._n

    def extend(self, nominal: NDArray, half: NDArray, usable: NDArray, rows: list[Told]) -> None:
        """Append rows (their values and half-widths as `_points` gives them)."""
        n, more = self._n, len(rows)
        if n + more > len(self._usable):  # room for twice as many, copied once
            size = max(2 * (n + more), 64)
            grown = [np.empty((size, self._nominal.shape[1])) for _ in range(3)]
            for old, new in zip((self._nominal, self._low, self._high), grown, strict=True):
                new[:n] = old[:n]
            self._nominal, self._low, self._high = grown
            usable_rows = np.zeros(size, dtype=bool)
            usable_rows[:n] = self._usable[:n]
            self._usable = usable_rows
            objects = np.empty(size, dtype=object)
            objects[:n] = self._rows[:n]
            self._rows = objects
        self._n = n + more
        self._put(slice(n, n + more), nominal, half, usable)
        self._rows[n : n + more] = rows

    def set(self, i: int, nominal: NDArray, half: NDArray, usable: NDArray) -> None:
        """Replace row `i`'s values (one row as `_points` gives it)."""
        self._put(slice(i, i + 1), nominal, half, usable)

    def _put(self, rows: slice, nominal: NDArray, half: NDArray, usable: NDArray) -> None:
        low, high = interval_bounds(nominal, half)
        self._nominal[rows], self._low[rows], self._high[rows] = nominal, low, high
        self._usable[rows] = usable

    @property
    def nominal(self) -> NDArray:
        return self._nominal[: self._n]

    @property
    def low(self) -> NDArray:
        return self._low[: self._n]

    @property
    def high(self) -> NDArray:
        return self._high[: self._n]

    @property
    def usable(self) -> NDArray:
        return self._usable[: self._n]

    @property
    def rows(self) -> NDArray:
        """The told results themselves, as an object array (for fancy indexing)."""
        return self._rows[: self._n]
