"""The result table's frontier beyond noise: kept up to date result by result, it is the one a
table built from all the results at once has; busy results and re-measurements count as the
API says."""

from __future__ import annotations

import random

import pytest

from archvocab.wire import SearchCreate
from bench.frontier_join import REQUEST, told
from server.services import remeasure
from server.services.results import Again, ResultTable, Told, evidence_used, joins_together


def read_again(held: dict, table: ResultTable, changed: set[str] | None) -> dict:
    """A reader's copy of the frontier's uncertainty brought up to date by what
    `changed_since` named: those members read again (None: the whole frontier)."""
    if changed is None:
        return dict(table.uncertainty)
    held = dict(held)
    for arch in changed:
        held.pop(arch, None)
        if arch in table.uncertainty:
            held[arch] = table.uncertainty[arch]
    return held


def snapshot(table: ResultTable) -> tuple:
    return (
        [t.arch_id for t in table.frontier],
        {arch: (u.group, u.certain, u.intervals) for arch, u in table.uncertainty.items()},
        table.plain_frontier,
    )


@pytest.mark.parametrize(("seed", "every"), [(0, 7), (1, 7), (2, 7), (3, 50), (4, 50), (5, 400)])
@pytest.mark.parametrize("values", ["measured", "corrected"])
def test_the_frontier_kept_result_by_result_is_the_one_built_at_once(
    seed: int, every: int, values: str
) -> None:
    # Between reference readings (one every `every` results) the noise model stays put and
    # results join the frontier one at a time; a reading rebuilds it.
    request = REQUEST.model_copy(
        update={"noise": REQUEST.noise.model_copy(update={"frontier_values": values})}
    )
    rng = random.Random(seed)
    rows = [told(i, rng, reading=i % every == 0, busy=i % 13 == 5) for i in range(400)]
    live = ResultTable(1, request)
    position = 0
    while position < len(rows):  # arrivals in uneven batches, some bringing a new reading
        step = rng.randint(1, 9)
        live.add(rows[position : position + step])
        position += step
    whole = ResultTable(1, request)
    whole.add(rows)
    assert snapshot(live) == snapshot(whole)
    assert len(live.frontier) > live.plain_frontier > 0  # the noise keeps some dominated ones
    assert len(live.frontier) < len(rows)
    assert 0 < sum(u.certain for u in live.uncertainty.values()) < len(live.frontier)
    assert not any(t.busy for t in live.frontier)


def test_the_changes_a_table_names_rebuild_its_frontier_from_an_earlier_one() -> None:
    rng = random.Random(11)
    rows = [told(i, rng, reading=i % 60 == 0) for i in range(300)]
    table = ResultTable(1, REQUEST)
    table.add(rows[:5])
    held = dict(table.uncertainty)
    token, deltas, left = table.frontier_token, 0, 0
    for t in rows[5:]:
        table.add([t])
        changed = table.changed_since(token)
        if changed is None:  # a new reading rebuilt the frontier: read it whole
            held = dict(table.uncertainty)
        else:
            deltas += 1
            left += sum(arch not in table.uncertainty for arch in changed)
            for arch in changed:
                held.pop(arch, None)
                if arch in table.uncertainty:
                    held[arch] = table.uncertainty[arch]
        token = table.frontier_token
        assert held == table.uncertainty
    assert deltas > 250 and left > 0
    assert table.changed_since(token) == set()
    assert table.changed_since("another.1") is None
    assert ResultTable(1, REQUEST).frontier_token != ResultTable(1, REQUEST).frontier_token


def test_every_member_is_described_as_describe_describes_it() -> None:
    rng = random.Random(12)
    rows = [told(i, rng, reading=i % 3 == 0) for i in range(200)]
    table = ResultTable(1, REQUEST)
    table.add(rows)
    point = table.frontier[0]
    again = Again(7, point.arch_id, point.values["latency_ms"] * 1.1, 1.0, False, None, None)
    table.add([], [again])  # one member measured twice: the long way
    assert table.uncertainty[point.arch_id].measurements == 2
    for arch, u in table.uncertainty.items():
        assert u == table.describe(arch, u.group, u.certain)


def test_results_after_a_re_measurement_join_as_in_a_table_built_at_once() -> None:
    rng = random.Random(9)
    rows = [told(i, rng, reading=i == 0) for i in range(300)]
    live = ResultTable(1, REQUEST)
    live.add(rows[:100])
    point = live.frontier[0]
    again = Again(1, point.arch_id, point.values["latency_ms"] * 0.9, 1.0, False, None, None)
    live.add([], [again])
    for t in rows[100:]:
        live.add([t])
    whole = ResultTable(1, REQUEST)
    whole.add([], [again])
    whole.add(rows)
    assert snapshot(live) == snapshot(whole)
    assert live.uncertainty[point.arch_id].measurements == 2


def test_the_noise_model_is_refitted_on_a_ladder_of_readings() -> None:
    # Each result brings a new reading; the model (and every interval with it) moves only
    # when their count reaches the next rung, and is then the one a table built at once fits.
    rng = random.Random(13)
    rows = [told(i, rng, reading=True) for i in range(300)]
    table, fits, model = ResultTable(1, REQUEST), 0, None
    for t in rows:
        table.add([t])
        fits += table.noise is not model
        model = table.noise
    assert fits == len({evidence_used(n) for n in range(1, 301)}) < 40
    whole = ResultTable(1, REQUEST)
    whole.add(rows)
    assert whole.noise == table.noise and snapshot(whole) == snapshot(table)


def test_re_measured_results_move_on_the_frontier_as_a_table_built_at_once_places_them() -> None:
    rng = random.Random(21)
    rows = [told(i, rng, reading=i % 10 == 0) for i in range(400)]
    behind = []  # larger than the rest, each with a shadow only it holds off beyond noise
    for i in range(20):
        leader, shadow = told(400 + 2 * i, rng, reading=False), told(401 + 2 * i, rng, False)
        leader.values.update(decoder_params=2e8 * (1 + i / 20), latency_ms=10 * 1.4**i)
        leader.values.update(memory_mb=100.0)
        shadow.values.update(decoder_params=leader.values["decoder_params"] * 0.999)
        shadow.values.update(latency_ms=leader.values["latency_ms"] * 1.45, memory_mb=115.0)
        rows += [leader, shadow]
        behind.append(leader)
    live = ResultTable(1, REQUEST)
    live.add(rows)
    assert all(t.arch_id in live.uncertainty for t in behind)
    held, token, again, refits, back = dict(live.uncertainty), live.frontier_token, [], 0, 0
    for j in range(60):
        point = live.frontier[rng.randrange(len(live.frontier))]
        # Some jump behind (what they held off comes back), some ahead; some re-measurements
        # are busy (they count for nothing) and some re-measure a point off the frontier.
        factor, memory_factor = rng.choice([0.8, 0.97, 1.03, 1.5]), rng.uniform(0.98, 1.02)
        if j % 9 == 4:
            point = rows[rng.randrange(len(rows))]
        if j % 3 == 0 and behind:  # measured again, it falls back: its shadow comes back
            point, factor, memory_factor = behind.pop(), 1.7, 1.3
        latency = point.values["latency_ms"] * factor
        memory = point.values["memory_mb"] * memory_factor
        again.append(Again(j, point.arch_id, latency, memory, j % 17 == 3, None, None))
        model, size = live.noise, len(live.frontier)
        live.add([], [again[-1]])
        refits += live.noise is not model
        back += len(live.frontier) > size
        whole = ResultTable(1, REQUEST)
        whole.add(rows, again)
        assert snapshot(live) == snapshot(whole), j
        for arch, u in live.uncertainty.items():
            assert u == live.describe(arch, u.group, u.certain)
        held = read_again(held, live, live.changed_since(token))
        assert held == live.uncertainty
        token = live.frontier_token
    assert refits < 20 and back > 0  # most moved without a refit; some points came back


def test_a_re_measurement_moves_its_point_and_narrows_its_interval() -> None:
    rng = random.Random(1)
    rows = [told(i, rng, reading=True) for i in range(50)]
    table = ResultTable(1, REQUEST)
    table.add(rows)
    point = table.frontier[0]
    before = table.uncertainty[point.arch_id]
    latency = point.values["latency_ms"]
    again = Again(
        id=1000,
        arch_id=point.arch_id,
        latency=latency * 1.0201,
        memory=point.values["memory_mb"],
        busy=False,
        reference=None,
        reference_key=None,
    )
    table.add([], [again])
    after = table.describe(point.arch_id)
    assert after.measurements == 2 and before.measurements == 1
    assert after.values["latency_ms"] == pytest.approx(latency * 1.01)  # the geometric mean
    width = lambda u: u.intervals["latency_ms"][1] / u.intervals["latency_ms"][0]  # noqa: E731
    assert width(after) < width(before)
    table.add([], [again])  # read again: nothing changes
    assert table.describe(point.arch_id).measurements == 2


def test_a_busy_result_enters_the_frontier_only_with_a_quiet_re_measurement() -> None:
    rng = random.Random(2)
    rows = [told(i, rng, reading=True) for i in range(30)]
    best = told(99, rng, reading=False, busy=True)
    best.values.update(latency_ms=0.001, memory_mb=0.001, decoder_params=2e8)  # beats them all
    table = ResultTable(1, REQUEST)
    table.add([*rows, best])
    assert best.arch_id not in table.uncertainty
    quiet = Again(1, best.arch_id, 0.001, 0.001, busy=False, reference=None, reference_key=None)
    table.add([], [quiet])
    assert [t.arch_id for t in table.frontier] == [best.arch_id]


def drifted_pair(request: SearchCreate) -> tuple[ResultTable, Told, Told]:
    """Two equal models: `steady` measured at the usual reference level, `slowed` 20% slower
    while the reference read twice its level (the machine ran at half speed then)."""
    rng = random.Random(3)
    filler = []
    for i in range(12):  # dominated results whose readings set the level (about 10 ms)
        t = told(i, rng, reading=True)
        t.values.update(decoder_params=1e6, latency_ms=100.0, memory_mb=500.0)
        filler.append(t)
    steady, slowed = told(20, rng, reading=True), told(21, rng, reading=True)
    for t, latency in ((steady, 10.0), (slowed, 12.0)):
        t.values.update(decoder_params=5e7, latency_ms=latency, memory_mb=100.0)
        t.feasible = latency <= (request.constraints.max_latency_ms or latency)
    steady.reference, slowed.reference = (10.0, 50.0), (20.0, 50.0)
    table = ResultTable(1, request)
    table.add([*filler, steady, slowed])
    return table, steady, slowed


def test_the_frontier_ranks_drift_corrected_values_when_asked() -> None:
    measured, steady, slowed = drifted_pair(REQUEST)
    assert measured.uncertainty[steady.arch_id].group == steady.arch_id
    assert slowed.arch_id not in measured.uncertainty or (
        measured.uncertainty[slowed.arch_id].group == steady.arch_id
    )
    corrected_request = REQUEST.model_copy(
        update={"noise": REQUEST.noise.model_copy(update={"frontier_values": "corrected"})}
    )
    corrected, steady, slowed = drifted_pair(corrected_request)
    u = corrected.uncertainty[slowed.arch_id]
    assert u.group == slowed.arch_id  # 12 ms at half speed is about 6 ms: it leads now
    assert u.corrected["latency_ms"] == pytest.approx(12.0 * 10.0 / 20.0, rel=0.05)
    left = corrected.uncertainty.get(steady.arch_id)
    assert left is None or left.group == slowed.arch_id


def test_bounds_are_checked_on_the_values_the_frontier_ranks() -> None:
    bounded = REQUEST.model_copy(
        update={"constraints": REQUEST.constraints.model_copy(update={"max_latency_ms": 11.0})}
    )
    table, _, slowed = drifted_pair(bounded)
    assert slowed.arch_id not in table.uncertainty  # 12 ms measured: over the bound
    corrected = bounded.model_copy(
        update={"noise": bounded.noise.model_copy(update={"frontier_values": "corrected"})}
    )
    table, _, slowed = drifted_pair(corrected)
    assert slowed.arch_id in table.uncertainty  # about 6 ms once corrected: within it


def test_re_measurements_go_to_crowded_groups_fewest_measurements_first() -> None:
    rng = random.Random(31)
    rows = [told(i, rng, reading=i % 10 == 0) for i in range(300)]
    table = ResultTable(1, REQUEST)
    table.add(rows)
    sizes: dict[str, int] = {}
    for u in table.uncertainty.values():
        sizes[u.group] = sizes.get(u.group, 0) + 1
    crowded = [t for t in table.frontier if sizes[table.uncertainty[t.arch_id].group] > 1]
    assert 3 < len(crowded) < len(table.frontier)  # some groups of one are left alone
    twice, thrice = crowded[-1], crowded[-2]  # the last told, measured again: they go last
    again = [
        Again(1, twice.arch_id, twice.values["latency_ms"], 1.0, False, None, None),
        Again(2, thrice.arch_id, thrice.values["latency_ms"], 1.0, False, None, None),
        Again(3, thrice.arch_id, thrice.values["latency_ms"], 1.0, False, None, None),
    ]
    table.add([], again)
    sizes = {}
    for u in table.uncertainty.values():
        sizes[u.group] = sizes.get(u.group, 0) + 1
    expected = sorted(
        (u.measurements, t.seq, t.arch_id)
        for t in table.frontier
        if sizes[(u := table.uncertainty[t.arch_id]).group] > 1 and u.measurements < 3
    )
    chosen = remeasure.choose(table, max_measurements=3)
    assert chosen == [arch for _, _, arch in expected]
    assert thrice.arch_id not in chosen  # at the most measurements allowed
    assert remeasure.choose(table, max_measurements=3, most=2) == chosen[:2]
    assert remeasure.choose(table, max_measurements=1) == []
    if twice.arch_id in chosen:
        assert chosen[-1] == twice.arch_id


def test_a_result_re_measured_off_the_frontier_keeps_its_estimate() -> None:
    rng = random.Random(3)
    rows = [told(i, rng, reading=i % 10 == 0) for i in range(100)]
    # Larger than the rest (a larger proxy is better): the fast one is on the frontier until
    # measured again much slower, when the larger one holds it off beyond noise.
    fast, large = told(100, rng, reading=False), told(101, rng, reading=False)
    fast.values.update(decoder_params=2e8, latency_ms=50.0, memory_mb=100.0)
    large.values.update(decoder_params=2.1e8, latency_ms=60.0, memory_mb=110.0)
    rows += [fast, large]
    table = ResultTable(1, REQUEST)
    table.add(rows)
    assert fast.arch_id in table.uncertainty
    assert table.estimates(t.arch_id for t in rows) == {}  # each measured once: its row
    table.add([], [Again(1, fast.arch_id, 50.0 * 3**2, 100.0 * 1.3**2, False, None, None)])
    assert fast.arch_id not in table.uncertainty
    estimates = table.estimates(t.arch_id for t in rows)
    assert estimates == {fast.arch_id: table.describe(fast.arch_id).values}
    # the geometric mean of its two measurements
    assert estimates[fast.arch_id] == pytest.approx({"latency_ms": 150.0, "memory_mb": 130.0})


def test_results_that_join_together_name_their_changes_as_joins_one_at_a_time_do() -> None:
    # Batches large enough to join together (the front built from its members and them) give
    # the frontier a table built at once has, and one change each that names what a reader of
    # the state before must read again; neither way rebuilds (which would name nothing).
    rng = random.Random(31)
    rows = [told(i, rng, reading=i == 0) for i in range(1200)]
    ways = {}
    for together in (True, False):
        table = ResultTable(1, REQUEST)
        table.add(rows[:100])
        held, token, position, joined = dict(table.uncertainty), table.frontier_token, 100, 0
        batches = random.Random(32)
        while position < len(rows):
            step = batches.randint(30, 80)
            batch = rows[position : position + step]
            joined += joins_together(len(batch), len(table.frontier))
            if together:
                table.add(batch)
            else:
                for t in batch:
                    table.add([t])
            position += step
            changed = table.changed_since(token)
            assert changed is not None
            held = read_again(held, table, changed)
            assert held == table.uncertainty
            token = table.frontier_token
        assert joined > 10  # most batches of this table join together
        ways[together] = table
    whole = ResultTable(1, REQUEST)
    whole.add(rows)
    assert snapshot(ways[True]) == snapshot(whole) == snapshot(ways[False])
    assert ways[True].revision < ways[False].revision  # one change a batch, not one a joiner
