"""Hypervolume of a frontier in normalised objective space, and what one more point adds.

Objectives are mapped so that every one is minimised and lies at 0 at its `ideal` value and
at 1 at its `reference` value (for a maximised proxy the ideal is the larger number). The
hypervolume is measured against the point (1, ..., 1), so it is comparable across searches
that share a normalisation, and a point beyond the reference in any objective adds nothing.
The volumes themselves come from moocore (the library pymoo's own indicator calls).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import moocore
import numpy as np
from numpy.typing import ArrayLike, NDArray

from search.pareto import non_dominated_mask


class Normaliser:
    """Objective values -> minimised coordinates, 0 at `ideal` and 1 at `reference`."""

    def __init__(
        self,
        objectives: Sequence[str],
        ideal: Mapping[str, float],
        reference: Mapping[str, float],
    ) -> None:
        missing = [o for o in objectives if o not in ideal or o not in reference]
        if missing:
            raise ValueError(f"ideal and reference need a value for {', '.join(missing)}")
        same = [o for o in objectives if ideal[o] == reference[o]]
        if same:
            raise ValueError(f"ideal equals reference for {', '.join(same)}")
        self.objectives = tuple(objectives)
        self.ideal = {o: float(ideal[o]) for o in objectives}
        self.reference = {o: float(reference[o]) for o in objectives}
        self._low = np.array([self.ideal[o] for o in objectives])
        self._span = np.array([self.reference[o] - self.ideal[o] for o in objectives])

    def __call__(self, values: Mapping[str, float]) -> NDArray[np.float64]:
        return self.points([values])[0]

    def points(self, rows: Sequence[Mapping[str, float]]) -> NDArray[np.float64]:
        """An (n, k) array of normalised, minimised coordinates."""
        raw = np.array([[row[o] for o in self.objectives] for row in rows], dtype=float)
        return self.scale(raw.reshape(len(rows), len(self.objectives)))

    def scale(self, raw: NDArray[np.float64]) -> NDArray[np.float64]:
        """`points` of an (n, k) array of values in objective order."""
        return (raw - self._low) / self._span

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {"ideal": dict(self.ideal), "reference": dict(self.reference)}


def _inside(points: ArrayLike) -> NDArray[np.float64]:
    """The non-dominated points that strictly dominate the reference (1, ..., 1)."""
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2:
        raise ValueError(f"points must be a 2-D (n, k) array, got shape {pts.shape}")
    pts = pts[(pts < 1.0).all(axis=1)]
    return pts[non_dominated_mask(pts)] if len(pts) else pts


def hypervolume(points: ArrayLike) -> float:
    """Volume dominated by normalised points and bounded by (1, ..., 1)."""
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2:
        raise ValueError(f"points must be a 2-D (n, k) array, got shape {pts.shape}")
    # Dominated points add nothing to the union moocore measures: no need to filter them.
    pts = pts[(pts < 1.0).all(axis=1)]
    if len(pts) == 0:
        return 0.0
    return float(moocore.hypervolume(pts, ref=np.ones(pts.shape[1])))


def added_volume(points: ArrayLike, point: ArrayLike) -> float:
    """What `point` adds to the hypervolume of `points` (all normalised): its box up to the
    reference less the part the points cover already, which is the volume of the points
    each moved up to `point` where it is better. Cheaper than the volume of all the points
    with it: only the points `shaping` the covered part are moved and measured."""
    pts = np.asarray(points, dtype=float)
    new = np.asarray(point, dtype=float)
    if not (new < 1.0).all():
        return 0.0
    box = float(np.prod(1.0 - new))
    if not len(pts):
        return box
    return box - hypervolume(np.maximum(pts[shaping(pts, new)], new))


def shaping(points: ArrayLike, point: ArrayLike) -> NDArray[np.bool_]:
    """Which of `points` shape the part of `point`'s box they cover (see `added_volume`):
    the others add nothing to it. A point better than `point` everywhere but in objective m
    moves onto its line along m, and the lowest of those on that line covers all that any
    point at least as high in m covers there. (A large frontier is mostly such points.)
    Comparisons only, so the same in any coordinates that keep each objective's order."""
    cols = np.ascontiguousarray(np.asarray(points, dtype=float).T)  # one row per objective
    new = np.asarray(point, dtype=float)
    k = len(cols)
    better = cols < new[:, None]
    all_but_one = better.sum(axis=0) == k - 1
    keep = np.ones(cols.shape[1], dtype=bool)
    lines = []
    for m in range(k):
        on_line = np.flatnonzero(all_but_one & ~better[m])
        if len(on_line):
            lowest = on_line[np.argmin(cols[m, on_line])]
            keep &= cols[m] < cols[m, lowest]
            lines.append(lowest)
    keep[lines] = True
    return keep


def contributions(front: ArrayLike) -> NDArray[np.float64]:
    """Each point's exclusive hypervolume contribution (0 outside the reference box).

    `front` should be mutually non-dominated; dominated points get 0.
    """
    pts = np.asarray(front, dtype=float)
    out = np.zeros(len(pts))
    if len(pts) == 0:
        return out
    inside = (pts < 1.0).all(axis=1)
    if pts.shape[1] == 1 and inside.any():  # moocore needs two columns; on a line only the
        order = np.argsort(pts[:, 0], kind="stable")  # best point holds anything exclusively
        best, rest = order[0], pts[order[1:], 0]
        out[best] = min(float(rest.min()) if len(rest) else 1.0, 1.0) - pts[best, 0]
    elif inside.sum() == 1:
        out[inside] = np.prod(1.0 - pts[inside][0])
    elif inside.any():
        out[inside] = moocore.hv_contributions(pts[inside], ref=np.ones(pts.shape[1]))
    return np.maximum(out, 0.0)


def improvements(front: ArrayLike, candidates: ArrayLike) -> NDArray[np.float64]:
    """The hypervolume each candidate would add to `front` on its own (0 if dominated)."""
    base_pts = _inside(front)
    cand = np.asarray(candidates, dtype=float)
    gains = np.zeros(len(cand))
    if len(cand) == 0:
        return gains
    useful = (cand < 1.0).all(axis=1)
    if len(base_pts):
        # Weakly dominated by the front: adds nothing, skip the volume computation.
        covered = (base_pts[None, :, :] <= cand[:, None, :]).all(axis=2).any(axis=1)
        useful &= ~covered
    for i in np.flatnonzero(useful):
        gains[i] = added_volume(base_pts, cand[i])
    return np.maximum(gains, 0.0)


def epsilon_gaps(front: ArrayLike, candidates: ArrayLike) -> NDArray[np.float64]:
    """Additive epsilon by which each candidate misses being non-dominated by `front`:
    negative means no front point weakly dominates it (at 0 one may); smaller is closer."""
    pts = np.asarray(front, dtype=float)
    cand = np.asarray(candidates, dtype=float)
    if len(pts) == 0:
        return np.full(len(cand), -np.inf)
    # f weakly dominates c iff min_j (c_j - f_j) >= 0, and c must improve by that much in
    # every objective to escape it; the gap is the largest such amount over the front.
    diff = cand[:, None, :] - pts[None, :, :]
    return diff.min(axis=2).max(axis=1)
