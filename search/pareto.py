"""Exact Pareto (non-dominated) sets for k minimised objectives.

Callers negate maximised objectives first. ``a`` dominates ``b`` iff ``a <= b`` in every
objective and ``a < b`` in at least one, so identical points never dominate each other and
all copies of a non-dominated point stay on the front.

Every algorithm here rests on one fact: after a lexicographic sort, a point can only be
dominated by points before it (a dominator is lexicographically strictly smaller). Two
objectives get a vectorised O(n log n) sweep, three a staircase sweep (O(n log n) plus list
moves done in C), more a blocked sweep costing O(n x front size) in vectorised numpy.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

# Rows compared at once in the blocked sweep: large enough to amortise numpy call overhead,
# small enough that a (block x block x k) boolean temporary stays in cache.
_BLOCK = 256
# Front rows compared against one block at a time, which caps temporaries at a few MB when
# nearly every point is on the front.
_FRONT_BLOCK = 4096


def dominates(a: ArrayLike, b: ArrayLike) -> bool:
    """True iff ``a`` Pareto-dominates ``b`` (all objectives minimised)."""
    a_arr, b_arr = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_arr.shape != b_arr.shape or a_arr.ndim != 1:
        raise ValueError(
            f"need two 1-D vectors of equal length, got {a_arr.shape} and {b_arr.shape}"
        )
    return bool(np.all(a_arr <= b_arr) and np.any(a_arr < b_arr))


def non_dominated_mask(points: ArrayLike) -> NDArray[np.bool_]:
    """Boolean mask over the rows of an (n, k) array: True where no row dominates it.

    All objectives are minimised. NaN is rejected because it makes dominance undefined;
    infinities are ordinary values.
    """
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2:
        raise ValueError(f"points must be a 2-D (n, k) array, got shape {pts.shape}")
    n, k = pts.shape
    if n == 0 or k == 0:
        # With no objectives, "a < b in at least one" never holds: nothing is dominated.
        return np.ones(n, dtype=bool)
    if np.isnan(pts).any():
        raise ValueError("points contain NaN; dominance is undefined for NaN objectives")
    order = np.lexsort(pts.T[::-1])  # lexsort's primary key is the last one given
    ordered = pts[order]
    if k == 1:
        kept = ordered[:, 0] == ordered[0, 0]
    elif k == 2:
        kept = _sweep_2d(ordered)
    elif k == 3:
        kept = _sweep_3d(ordered)
    else:
        kept = _sweep_blocked(ordered)
    mask = np.empty(n, dtype=bool)
    mask[order] = kept
    return mask


def non_dominated_indices(points: ArrayLike) -> NDArray[np.intp]:
    """Ascending row indices of the non-dominated points (see `non_dominated_mask`)."""
    return np.flatnonzero(non_dominated_mask(points))


def _sweep_2d(pts: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Non-dominated rows of lexicographically sorted 2-D points.

    A row is dominated by an earlier row with a strictly smaller x and y <= its y, or by a
    row with the same x and a strictly smaller y (the first row of its x-group).
    """
    x, y = pts[:, 0], pts[:, 1]
    n = len(x)
    starts = np.ones(n, dtype=bool)
    starts[1:] = x[1:] != x[:-1]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    best_before = np.empty(n)
    best_before[0] = np.inf  # never read: group_start > 0 guards it (y may itself be inf)
    best_before[1:] = np.minimum.accumulate(y)[:-1]
    by_smaller_x = (group_start > 0) & (best_before[group_start] <= y)
    return ~(by_smaller_x | (y > y[group_start]))


def _sweep_3d(pts: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Non-dominated rows of lexicographically sorted 3-D points.

    Every earlier row has x <= this row's x, so this row is dominated iff some earlier,
    different row has y' <= y and z' <= z. The (y, z) staircase of the rows kept so far
    (y ascending, z strictly descending) answers that with one bisection: its last step with
    y' <= y has the smallest such z'. Copies of a row share its answer and are not compared
    with each other.
    """
    n = len(pts)
    ys, zs = pts[:, 1].tolist(), pts[:, 2].tolist()
    repeats = np.zeros(n, dtype=bool)
    repeats[1:] = (pts[1:] == pts[:-1]).all(axis=1)
    repeat_list = repeats.tolist()
    kept = [False] * n
    stair_y: list[float] = []
    stair_z: list[float] = []
    for i in range(n):
        if repeat_list[i]:
            kept[i] = kept[i - 1]
            continue
        y, z = ys[i], zs[i]
        j = bisect_right(stair_y, y)
        if j and stair_z[j - 1] <= z:
            continue
        kept[i] = True
        # The steps this row covers (y' >= y, z' >= z) form one run starting at y's slot.
        lo = hi = bisect_left(stair_y, y)
        while hi < len(stair_z) and stair_z[hi] >= z:
            hi += 1
        stair_y[lo:hi] = [y]
        stair_z[lo:hi] = [z]
    return np.array(kept, dtype=bool)


def _sweep_blocked(pts: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Non-dominated rows of lexicographically sorted points, any k.

    A dominated row is also dominated by some non-dominated earlier row (follow the chain of
    dominators; the order is strict and finite), so each block is checked against the front
    found so far and against itself, and the front only ever grows.
    """
    n, k = pts.shape
    kept = np.zeros(n, dtype=bool)
    front = np.empty((0, k))
    for start in range(0, n, _BLOCK):
        block = pts[start : start + _BLOCK]
        dominated = dominated_by(block, block)
        for f in range(0, len(front), _FRONT_BLOCK):
            dominated |= dominated_by(block, front[f : f + _FRONT_BLOCK])
        kept[start : start + len(block)] = ~dominated
        front = np.concatenate([front, block[~dominated]])
    return kept


def dominated_by(rows: NDArray[np.float64], others: NDArray[np.float64]) -> NDArray[np.bool_]:
    """For each row: does any of `others` dominate it?"""
    if len(others) == 0:
        return np.zeros(len(rows), dtype=bool)
    return dominated_pairs(rows, others).any(axis=1)


def weakly_dominated(point: ArrayLike, others: NDArray[np.float64]) -> bool:
    """Whether any of `others` is at least as good as `point` in every objective (minimised).
    Column by column, as `dominated_pairs`: comparing whole rows and reducing each costs
    about eight times as much on a frontier of thousands."""
    point = np.asarray(point, dtype=float)
    if len(others) == 0:
        return False
    covered = others[:, 0] <= point[0]
    for j in range(1, len(point)):
        covered &= others[:, j] <= point[j]
    return bool(covered.any())


def weakly_dominated_rows(
    rows: NDArray[np.float64], others: NDArray[np.float64]
) -> NDArray[np.bool_]:
    """`weakly_dominated` for each of `rows`."""
    if len(others) == 0 or len(rows) == 0:
        return np.zeros(len(rows), dtype=bool)
    covered = others[None, :, 0] <= rows[:, None, 0]
    for j in range(1, rows.shape[1]):
        covered &= others[None, :, j] <= rows[:, None, j]
    return covered.any(axis=1)


def dominated_pairs(rows: NDArray[np.float64], others: NDArray[np.float64]) -> NDArray[np.bool_]:
    """(rows x others): does other j dominate row i?"""
    # Column by column: numpy reduces a short trailing axis much more slowly.
    le = others[None, :, 0] <= rows[:, None, 0]
    lt = others[None, :, 0] < rows[:, None, 0]
    for j in range(1, rows.shape[1]):
        le &= others[None, :, j] <= rows[:, None, j]
        lt |= others[None, :, j] < rows[:, None, j]
    return le & lt


def _dominated_by_any(rows: NDArray[np.float64], others: NDArray[np.float64]) -> NDArray[np.bool_]:
    """`dominated_by` over any number of rows: for two and three objectives a sweep
    (O((rows + others) log)), for more a block at a time (bounded temporaries). Only the
    others within the rows' bounding box can dominate any of them: the rest are left out
    first (a few rows near each other against a whole frontier meet a small part of it)."""
    k = rows.shape[1] if rows.ndim == 2 else 0
    if len(rows) and len(others):
        others = others[(others <= rows.max(axis=0)).all(axis=1)]
    if len(rows) and len(others) and k in (2, 3) and len(rows) * len(others) > _SWEEP_FROM:
        return _swept_2d(rows, others) if k == 2 else _swept_3d(rows, others)
    out = np.zeros(len(rows), dtype=bool)
    for start in range(0, len(rows), _BLOCK):
        block = rows[start : start + _BLOCK]
        for f in range(0, len(others), _FRONT_BLOCK):
            out[start : start + len(block)] |= dominated_by(block, others[f : f + _FRONT_BLOCK])
    return out


# Below this many row-other pairs, comparing them all in numpy is quicker than a sweep.
_SWEEP_FROM = 200_000


def _swept_2d(rows: NDArray[np.float64], others: NDArray[np.float64]) -> NDArray[np.bool_]:
    """`_dominated_by_any` for two objectives: others sorted by (x, y); a row is dominated by
    one with a smaller x and y at most its own, or by the first with its x and a smaller y."""
    others = others[np.lexsort(others.T[::-1])]
    x, y = others[:, 0], others[:, 1]
    smaller = np.searchsorted(x, rows[:, 0], side="left")  # others with a strictly smaller x
    best = np.minimum.accumulate(y)
    by_smaller_x = (smaller > 0) & (best[np.maximum(smaller - 1, 0)] <= rows[:, 1])
    first_equal = np.minimum(smaller, len(x) - 1)
    by_equal_x = (x[first_equal] == rows[:, 0]) & (y[first_equal] < rows[:, 1])
    return by_smaller_x | by_equal_x


def _swept_3d(rows: NDArray[np.float64], others: NDArray[np.float64]) -> NDArray[np.bool_]:
    """`_dominated_by_any` for three objectives, by the staircase sweep of `_sweep_3d`: rows
    and others in one lexicographic order, a row before an equal other (an equal point does
    not dominate). Every other before a row is lexicographically smaller, so it dominates the
    row iff it is no worse in y and z: the staircase of those seen says so in one bisection."""
    points = np.vstack([others, rows])
    is_row = np.zeros(len(points), dtype=np.int8)
    is_row[len(others) :] = 1
    order = np.lexsort((-is_row, points[:, 2], points[:, 1], points[:, 0]))
    ys, zs = points[order, 1].tolist(), points[order, 2].tolist()
    out = np.zeros(len(rows), dtype=bool)
    found = []
    stair_y: list[float] = []
    stair_z: list[float] = []
    first_row = len(others)
    for position, index in enumerate(order.tolist()):
        y, z = ys[position], zs[position]
        j = bisect_right(stair_y, y)
        covered = j > 0 and stair_z[j - 1] <= z
        if index >= first_row:
            if covered:
                found.append(index - first_row)
            continue
        if covered:
            continue
        lo = hi = bisect_left(stair_y, y)
        while hi < len(stair_z) and stair_z[hi] >= z:
            hi += 1
        stair_y[lo:hi] = [y]
        stair_z[lo:hi] = [z]
    out[found] = True
    return out


def front_beyond_noise(
    nominal: ArrayLike, low: ArrayLike, high: ArrayLike
) -> tuple[NDArray[np.bool_], NDArray[np.intp]]:
    """The frontier when values are known only to within intervals (all minimised).

    A point is off it only when dominated beyond the uncertainty: some other point's worst
    case (`high`) dominates this point's best case (`low`). Returns (mask, group): `group[i]`
    is the index of the nominal frontier point that point i cannot be told apart from (itself
    for a nominal frontier point; for a point kept only by the uncertainty, the first nominal
    frontier point that nominally dominates it); -1 off the frontier.

    The worst cases' own frontier suffices as dominators: whatever dominates a best case is
    dominated (or equalled) by a worst case on that frontier.
    """
    values, lo, hi = (np.asarray(a, dtype=float) for a in (nominal, low, high))
    if not (values.shape == lo.shape == hi.shape) or values.ndim != 2:
        raise ValueError(
            f"nominal, low and high must be (n, k) arrays of one shape, got "
            f"{values.shape}, {lo.shape}, {hi.shape}"
        )
    if np.any(lo > values) or np.any(hi < values):
        raise ValueError("every interval must contain its nominal value (low <= nominal <= high)")
    n = len(values)
    group = np.full(n, -1, dtype=np.intp)
    if n == 0:
        return np.zeros(0, dtype=bool), group
    plain = non_dominated_mask(values)
    worst_front = hi[non_dominated_mask(hi)]
    # Nothing dominates a nominal frontier point beyond the noise (a worst case that did
    # would dominate it nominally too), and no point's own worst case strictly dominates its
    # best case.
    mask = ~_dominated_by_any(lo, worst_front)
    front_idx = np.flatnonzero(plain)
    group[front_idx] = front_idx
    kept_by_noise = np.flatnonzero(mask & ~plain)
    group[kept_by_noise] = front_idx[_first_dominator(values[kept_by_noise], values[front_idx])]
    return mask, group


@dataclass(frozen=True)
class NoisyFront:
    """A frontier beyond noise (`front_beyond_noise`) with what each member's place rests on,
    members in arrival order: their arrival keys, values and intervals, `group` (the index of
    the member's nominal frontier point, itself for one) and `certain` (`beyond_doubt`).

    `insert` adds one point and `remove` takes one away at the cost of a few comparisons per
    member, so that a table whose results arrive, or move when measured again, one at a time
    need not rebuild its frontier each time. Each gives the front `of` would build from every
    point there is then. Two fronts of the members' own are kept for them: `worst`, the
    members whose worst case no other's dominates (they suffice to hold anything off the
    front), and `leading`, those whose best case no other's dominates (they suffice to doubt
    any member but themselves).
    """

    keys: NDArray[np.intp]  # ascending: the arrival order
    nominal: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    group: NDArray[np.intp]
    certain: NDArray[np.bool_]
    leading: NDArray[np.bool_]
    worst: NDArray[np.bool_]

    @classmethod
    def of(
        cls, nominal: ArrayLike, low: ArrayLike, high: ArrayLike, keys: ArrayLike | None = None
    ) -> tuple[NDArray[np.bool_], NoisyFront]:
        """(which rows are members, the front they make); rows in arrival order, their keys
        ascending (by default their indices)."""
        values, lo, hi = (np.asarray(a, dtype=float) for a in (nominal, low, high))
        keyed = np.arange(len(values)) if keys is None else np.asarray(keys, dtype=np.intp)
        mask, group = front_beyond_noise(values, lo, hi)
        certain = beyond_doubt(lo, hi, mask)
        rows = np.flatnonzero(mask)
        position = np.full(len(values), -1, dtype=np.intp)
        position[rows] = np.arange(len(rows))
        lo, hi = lo[rows], hi[rows]
        front = cls(
            keyed[rows],
            values[rows],
            lo,
            hi,
            position[group[rows]],
            certain[rows],
            non_dominated_mask(lo),
            non_dominated_mask(hi),
        )
        return mask, front

    def __len__(self) -> int:
        return len(self.nominal)

    @property
    def plain(self) -> NDArray[np.bool_]:
        """Members on the nominal frontier."""
        return self.group == np.arange(len(self.group))

    def insert(
        self, key: int, nominal: ArrayLike, low: ArrayLike, high: ArrayLike
    ) -> tuple[NoisyFront, NDArray[np.bool_]] | None:
        """The front of the members and one more point arriving as `key` (not a member's),
        and which members stay on it; None when the point does not join (then nothing
        changes). Only the members need be known: every other point is dominated beyond
        noise by one of them.

        Members suffice as rivals throughout: whatever dominates the point beyond noise, or
        nominally, is dominated by a member (`front_beyond_noise`, `beyond_doubt`); a member
        the point pushes off doubted no one the point does not doubt itself; and a nominal
        frontier point the point pushes off was nominally dominated by it.
        """
        x, x_lo, x_hi = (np.asarray(a, dtype=float)[None, :] for a in (nominal, low, high))
        if dominated_by(x_lo, self.high)[0]:
            return None
        stays = ~dominated_pairs(self.low, x_hi)[:, 0]
        plain = self.plain
        x_plain = not dominated_by(x, self.nominal[plain])[0]
        under = dominated_pairs(self.nominal, x)[:, 0]  # what the point nominally dominates
        lost = plain & under
        certain = self.certain & ~dominated_pairs(self.high, x_lo)[:, 0]
        keep = np.flatnonzero(stays)
        x_certain = not dominated_by(x_hi, self.low[keep])[0]
        # The members' own fronts: a member the point pushes off dominated nothing the point
        # does not, so none joins them.
        leading = self.leading & stays & ~dominated_pairs(self.low, x_lo)[:, 0]
        x_leading = not dominated_by(x_lo, self.low[leading])[0]
        worst = self.worst & stays & ~dominated_pairs(self.high, x_hi)[:, 0]
        x_worst = not dominated_by(x_hi, self.high[worst])[0]
        at = int(np.searchsorted(self.keys[keep], key))
        n = len(keep) + 1
        rest = np.arange(n) != at  # the kept members' places in the new front
        position = np.full(len(self), -1, dtype=np.intp)
        position[keep] = np.flatnonzero(rest)

        def placed(kept: NDArray, new: Any) -> NDArray:
            out = np.empty((n, *kept.shape[1:]), dtype=kept.dtype)
            out[rest], out[at] = kept, new
            return out

        values = placed(self.nominal[keep], x[0])
        group = placed(position[self.group[keep]], at)
        still_plain = placed((plain & ~lost)[keep], x_plain)
        leaders = np.flatnonzero(still_plain)
        # Grouped anew: a member whose nominal frontier point the new one pushed off (perhaps
        # itself), any member a new frontier point dominates (it may come first now), and the
        # new point unless it leads.
        regroup = placed(lost[self.group[keep]] | (x_plain & under[keep]), not x_plain)
        if regroup.any():
            rows = np.flatnonzero(regroup)
            group[rows] = leaders[_first_dominator(values[rows], values[leaders])]
        front = NoisyFront(
            placed(self.keys[keep], key),
            values,
            placed(self.low[keep], x_lo[0]),
            placed(self.high[keep], x_hi[0]),
            group,
            placed(certain[keep], x_certain),
            placed(leading[keep], x_leading),
            placed(worst[keep], x_worst),
        )
        return front, stays

    def remove(
        self,
        key: int,
        rivals: tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike],
    ) -> NoisyFront:
        """The front without the member `key`. `rivals` (keys, nominal, low, high) must hold
        every point off the front whose best case the member's worst case dominates (only
        these can come back: every other point stays dominated beyond noise by another
        member); the others are left out."""
        at = int(np.searchsorted(self.keys, key))
        if at == len(self) or self.keys[at] != key:
            raise ValueError(f"{key} is not a member")
        k = self.nominal.shape[1]
        r_keys = np.asarray(rivals[0], dtype=np.intp).reshape(-1)
        r_values, r_lo, r_hi = (np.asarray(a, dtype=float).reshape(-1, k) for a in rivals[1:])
        m_values, m_lo, m_hi = (a[at : at + 1] for a in (self.nominal, self.low, self.high))
        others = np.arange(len(self)) != at
        # The members' own fronts lose it; only what it dominated there may take its place.
        worst, leading = self.worst & others, self.leading & others
        worse = others & dominated_pairs(self.high, m_hi)[:, 0] if self.worst[at] else None
        behind = others & dominated_pairs(self.low, m_lo)[:, 0] if self.leading[at] else None
        if len(r_keys):  # none of them pushes a member off, since the removed one held them
            rivals_of = self.high[worst if worse is None else worst | worse]
            back = ~_dominated_by_any(r_lo, np.vstack([rivals_of, r_hi]))
            r_keys, r_values, r_lo, r_hi = r_keys[back], r_values[back], r_lo[back], r_hi[back]
        keys = np.concatenate([self.keys[others], r_keys])
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        values = np.vstack([self.nominal[others], r_values])[order]
        low = np.vstack([self.low[others], r_lo])[order]
        high = np.vstack([self.high[others], r_hi])[order]
        old = np.flatnonzero(others)
        place = np.empty(len(keys), dtype=np.intp)
        place[order] = np.arange(len(keys))  # where each of [members..., returners...] went
        position = np.full(len(self), -1, dtype=np.intp)
        position[old] = place[: len(old)]
        came_back = place[len(old) :]
        back_mask = _mask(came_back, len(keys))

        def moved(mask: NDArray[np.bool_]) -> NDArray[np.bool_]:
            out = np.zeros(len(keys), dtype=bool)
            out[position[old[mask[old]]]] = True
            return out

        plain = moved(self.plain)
        group = np.full(len(keys), -1, dtype=np.intp)
        group[position[old]] = position[self.group[old]]  # -1 where it was the removed one
        certain = moved(self.certain)
        # A returner's worst and best cases lie beyond the removed one's: it may join the
        # members' fronts only where the removed one left them, and pushes none off them.
        new_worst, new_leading = moved(worst), moved(leading)
        for kept, dominated, ends in ((new_worst, worse, high), (new_leading, behind, low)):
            if dominated is None:
                continue
            rows = np.flatnonzero(_mask(position[old[dominated[old]]], len(keys)) | back_mask)
            if len(rows):
                kept[rows] = ~_dominated_by_any(ends[rows], ends[kept | _mask(rows, len(keys))])
        # What the removed point nominally dominated (the returners among it) may lead now,
        # or be grouped with another: nothing else was grouped with it or can be now.
        under = dominated_pairs(values, m_values)[:, 0]
        if under.any():
            rows = np.flatnonzero(under)
            plain[rows] = ~_dominated_by_any(values[rows], values[plain | under])
            leaders = np.flatnonzero(plain)
            group[rows] = rows
            led = rows[~plain[rows]]
            group[led] = leaders[_first_dominator(values[led], values[leaders])]
        # Doubted by the removed point's best case: perhaps certain now (a returner's best
        # case lies beyond it and doubts nothing it did not); a returner: checked too. The
        # members' best-case front suffices as rivals but for its own members.
        doubted = position[old[dominated_pairs(self.high[old], m_lo)[:, 0]]]
        recheck = np.flatnonzero(_mask(doubted, len(keys)) | back_mask)
        if len(recheck):
            ahead = new_leading[recheck]
            certain[recheck[~ahead]] = ~_dominated_by_any(high[recheck[~ahead]], low[new_leading])
            lead = recheck[ahead]
            certain[lead] = ~_dominated_by_other(high, lead, low, np.arange(len(keys)))
        return NoisyFront(keys, values, low, high, group, certain, new_leading, new_worst)


def _mask(rows: NDArray[np.intp], n: int) -> NDArray[np.bool_]:
    """A boolean mask of length `n`, True at `rows`."""
    out = np.zeros(n, dtype=bool)
    out[rows] = True
    return out


def _first_dominator(rows: NDArray[np.float64], front: NDArray[np.float64]) -> NDArray[np.intp]:
    """For each row, the index in `front` of the first point that dominates it (each row must
    have one). The front is walked in short runs, and a row leaves once one dominates it: most
    rows are dominated early on, so few meet the whole front."""
    out = np.full(len(rows), -1, dtype=np.intp)
    for start in range(0, len(rows), _FRONT_BLOCK):
        left = np.arange(start, min(start + _FRONT_BLOCK, len(rows)))
        for f in range(0, len(front), _FIRST_RUN):
            hit = dominated_pairs(rows[left], front[f : f + _FIRST_RUN])
            found = hit.any(axis=1)
            out[left[found]] = f + hit[found].argmax(axis=1)
            left = left[~found]
            if not len(left):
                break
    return out


# Front points a row meets at once in `_first_dominator`.
_FIRST_RUN = 64


def beyond_doubt(low: ArrayLike, high: ArrayLike, members: ArrayLike) -> NDArray[np.bool_]:
    """Which `members` (a boolean mask, usually `front_beyond_noise`'s) stay on the frontier
    whatever the noise: no other member's best case (`low`) dominates their worst case
    (`high`). The rest of the frontier beyond noise cannot be told on or off it.

    Members suffice as rivals: a point off that frontier is dominated beyond noise by some
    worst case, which then dominates this point's worst case too, and following such points
    ends at a member (the order is strict and finite).
    """
    lo, hi = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    inside = np.asarray(members, dtype=bool)
    if lo.shape != hi.shape or lo.ndim != 2 or inside.shape != (len(lo),):
        raise ValueError(
            f"low and high must be (n, k) arrays of one shape and members an (n,) mask, got "
            f"{lo.shape}, {hi.shape}, {inside.shape}"
        )
    out = np.zeros(len(lo), dtype=bool)
    idx = np.flatnonzero(inside)
    if len(idx) == 0:
        return out
    # Rivals whose best case no other member's best case dominates (the "leaders") suffice for
    # every member but themselves: a best case that dominates a worst case is dominated or
    # equalled by a leader's, which dominates that worst case too. A leader is checked against
    # every member, since the best case dominating its worst case may be one only its own
    # best case dominates. That is (members x leaders) comparisons, not members squared.
    rivals = lo[idx]
    leading = non_dominated_mask(rivals)
    leaders = idx[leading]
    out[idx[~leading]] = ~_dominated_by_any(hi[idx[~leading]], lo[leaders])
    out[leaders] = ~_dominated_by_other(hi, leaders, lo, idx)
    return out


def _dominated_by_other(
    high: NDArray[np.float64],
    rows: NDArray[np.intp],
    low: NDArray[np.float64],
    others: NDArray[np.intp],
) -> NDArray[np.bool_]:
    """For each index in `rows`: does any index of `others` but itself have a `low` that
    dominates the row's `high`?"""
    out = np.zeros(len(rows), dtype=bool)
    if len(rows) * len(others) > _SWEEP_FROM and high.shape[1] in (2, 3):
        # The others that are not rows in one sweep; then the rows among them.
        is_row = _mask(rows, len(high))[others]
        out |= _dominated_by_any(high[rows], low[others[~is_row]])
        others = others[is_row]
        if len(others) == len(rows):
            return out | _dominated_within(high, rows, low)
    for start in range(0, len(rows), _BLOCK):
        block = rows[start : start + _BLOCK]
        for f in range(0, len(others), _FRONT_BLOCK):
            rival = others[f : f + _FRONT_BLOCK]
            hit = dominated_pairs(high[block], low[rival])
            hit &= block[:, None] != rival[None, :]
            out[start : start + len(block)] |= hit.any(axis=1)
    return out


def _dominated_within(
    high: NDArray[np.float64], rows: NDArray[np.intp], low: NDArray[np.float64]
) -> NDArray[np.bool_]:
    """For each index in `rows`: does another of them have a `low` that dominates the row's
    `high`? Halves against each other by sweeps, each half within itself again, and few rows
    pair by pair: not rows squared comparisons when nearly all of a frontier leads."""
    if len(rows) <= _WITHIN_PAIRS:
        hit = dominated_pairs(high[rows], low[rows])
        np.fill_diagonal(hit, False)
        return hit.any(axis=1)
    half = len(rows) // 2
    first, second = rows[:half], rows[half:]
    return np.concatenate(
        [
            _dominated_by_any(high[first], low[second]) | _dominated_within(high, first, low),
            _dominated_by_any(high[second], low[first]) | _dominated_within(high, second, low),
        ]
    )


# Rows `_dominated_within` compares pair by pair.
_WITHIN_PAIRS = 512
