"""Hypervolume of a frontier in normalised objective space, and what one more point adds.

Objectives are mapped so that every one is minimised and lies at 0 at its `ideal` value and
at 1 at its `reference` value (for a maximised proxy the ideal is the larger number). The
hypervolume is measured against the point (1, ..., 1), so it is comparable across searches
that share a normalisation, and a point beyond the reference in any objective adds nothing.
The volumes themselves come from moocore (the library pymoo's own indicator calls).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import moocore
import numpy as np
from numpy.typing import ArrayLike, NDArray

from search.pareto import non_dominated_mask, weakly_dominated_rows


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
        useful &= ~weakly_dominated_rows(cand, base_pts)
    for i in np.flatnonzero(useful):
        gains[i] = added_volume(base_pts, cand[i])
    return np.maximum(gains, 0.0)


def best_improvement(
    front: ArrayLike,
    candidates: ArrayLike,
    eligible: ArrayLike | None = None,
    upper: NDArray[np.float64] | None = None,
    cost: ArrayLike | None = None,
) -> tuple[int, float, NDArray[np.float64]]:
    """The eligible candidate that would add the most hypervolume to `front` on its own, what
    it adds, and bounds for the next call: the first largest of `improvements` over the
    eligible ones, or (-1, 0.0) when none adds any. With `cost` (positive, one per candidate),
    the one that adds the most per unit of its cost.

    Only the candidates that might beat the best found so far are measured: a candidate adds
    at most its box less the part of it that a few front points cover (`_cover_bounds`), and
    they are measured in the order of that bound. (A proposal screens hundreds of offspring;
    most are ruled out by the bound.) `upper`: the bounds an earlier call returned for the same
    candidates against part of this front, used instead: what a point adds can only shrink as
    the front grows, so a round that picks several from one pool measures few again."""
    base_pts = _inside(front)
    cand = np.asarray(candidates, dtype=float)
    useful = (cand < 1.0).all(axis=1) if len(cand) else np.zeros(0, dtype=bool)
    if eligible is not None:
        useful &= np.asarray(eligible, dtype=bool)
    if len(base_pts) and useful.any():
        covered = np.zeros(len(cand), dtype=bool)
        covered[useful] = weakly_dominated_rows(cand[useful], base_pts)
        useful &= ~covered
    order = np.flatnonzero(useful)
    bounds = np.zeros(len(cand)) if upper is None else np.array(upper, dtype=float)
    if not len(order):
        return -1, 0.0, bounds
    if upper is None:
        bounds[order] = _cover_bounds(base_pts, cand[order])
    per = np.ones(len(cand)) if cost is None else np.asarray(cost, dtype=float)
    # Floating point: an added volume may exceed its bound by rounding; this slack keeps any
    # candidate that could tie with the best in the running.
    slack = 1e-9 * bounds + 1e-15
    best, best_gain, best_value = -1, 0.0, 0.0
    for i in order[np.argsort(-bounds[order] / per[order], kind="stable")]:
        if (bounds[i] + slack[i]) / per[i] < best_value:
            break  # the bounds only fall from here
        gain = added_volume(base_pts, cand[i])
        bounds[i] = gain
        value = gain / per[i]
        if value > best_value or (value == best_value and value > 0 and i < best):
            best, best_gain, best_value = int(i), gain, value
    return best, best_gain, bounds


# Candidates per block in `_cover_bounds`: a block's arrays stay a few megabytes against a
# frontier of thousands.
_BOUND_BLOCK = 32
# Front points whose union `_cover_bounds` subtracts (2**n - 1 terms): over 200 proposals
# beside a frontier of about 90, 1 left 178 candidates a proposal to measure and 3 left 102.
# 5 left 65, but bounding 256 candidates took 9 ms instead of 2: about what it saved.
_COVERS = 3


def _cover_bounds(front: NDArray[np.float64], cand: NDArray[np.float64]) -> NDArray:
    """For each candidate (inside the reference box), an upper bound of what it adds to
    `front`: its box less the part of it that the union of the `_COVERS` front points
    covering most of it alone cover (exact by inclusion and exclusion: the intersection of
    boxes up to the reference is the box at their elementwise maximum)."""
    box = np.prod(1.0 - cand, axis=1)
    if not len(front):
        return box
    m = min(_COVERS, len(front))
    covered = np.empty(len(cand))
    for start in range(0, len(cand), _BOUND_BLOCK):
        block = cand[start : start + _BOUND_BLOCK]
        corners = np.maximum(front[None, :, :], block[:, None, :])  # (block, front, k)
        alone = np.prod(1.0 - corners, axis=2)
        top = np.argpartition(-alone, m - 1, axis=1)[:, :m] if m < len(front) else None
        if top is not None:
            corners = np.take_along_axis(corners, top[:, :, None], axis=1)
        union = np.zeros(len(block))
        for size in range(1, m + 1):
            for subset in itertools.combinations(range(m), size):
                shared = np.prod(1.0 - corners[:, list(subset), :].max(axis=1), axis=1)
                union += shared if size % 2 else -shared
        covered[start : start + _BOUND_BLOCK] = union
    return np.maximum(box - covered, 0.0)


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
