"""Users check proxies on their own task: trained results of architectures hwnas has seen,
ranked against every proxy's values.

Zero-cost proxies are computed here from the stored spec. Low-cost ones are never run in the
API process (forward and backward passes would stall it): their values are the ones agents
computed for searches that optimised them, so they cover only those architectures, and the
answer says how many it had.
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select
from sqlalchemy.orm import Session

from archvocab.errors import InvalidSpec
from archvocab.proxy_catalog import PROXY_CATALOG
from archvocab.registry import ArchSpec, parse_spec
from archvocab.wire import ProxyAgreement, ProxyCheck, ProxyCheckResult, ProxyInfo
from proxies.agreement import agreement
from proxies.registry import PROXIES
from server.store.rows import ArchitectureRow, MeasurementRow

MIN_MODELS = 3  # fewer paired values give no meaningful rank correlation


def list_proxies() -> list[ProxyInfo]:
    return [
        ProxyInfo(
            name=p.name,
            cost=p.cost,
            kinds=None if p.kinds is None else list(p.kinds),
            description=p.description,
        )
        for p in PROXIES.values()
    ]


def check_proxies(session: Session, body: ProxyCheck) -> ProxyCheckResult:
    ids = [r.arch_id for r in body.results]
    rows = {
        row.arch_id: row
        for row in session.scalars(select(ArchitectureRow).where(ArchitectureRow.arch_id.in_(ids)))
    }
    unknown = [i for i in ids if i not in rows]
    if unknown:
        shown = ", ".join(unknown[:5]) + (
            f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        )
        raise InvalidSpec("results", f"unknown arch_id: {shown} (no search here proposed them)")
    specs = {i: parse_spec(rows[i].spec) for i in ids}
    kinds = sorted({s.kind for s in specs.values()})
    names = body.proxies or [
        n for n, e in PROXY_CATALOG.items() if all(e.applies_to(k) for k in kinds)
    ]
    for name in names:
        entry = PROXY_CATALOG[name]
        wrong = [k for k in kinds if not entry.applies_to(k)]
        if wrong:
            raise InvalidSpec(
                "proxies",
                f"proxy {name!r} does not apply to space kind {wrong[0]!r}; "
                f"it applies to: {', '.join(entry.kinds or ())}",
            )
    targets = {r.arch_id: r.value for r in body.results}
    stored = _agent_values(session, ids, [n for n in names if PROXY_CATALOG[n].cost != "zero"])
    agreements = [_agreement(name, _values(name, specs, stored), targets, body) for name in names]
    if body.proxies is None:  # by default, only proxies that have something to say
        agreements = [a for a in agreements if a.models >= MIN_MODELS]
    return ProxyCheckResult(
        target=body.target,
        lower_is_better=body.lower_is_better,
        models=len(ids),
        top_k=body.top_k,
        proxies=agreements,
    )


def _values(
    name: str, specs: dict[str, ArchSpec], stored: dict[str, dict[str, float]]
) -> dict[str, float]:
    if PROXY_CATALOG[name].cost == "zero":
        proxy = PROXIES[name]
        return {i: proxy.score(spec) for i, spec in specs.items()}
    return stored.get(name, {})


def _agent_values(
    session: Session, ids: list[str], names: list[str]
) -> dict[str, dict[str, float]]:
    """proxy -> arch id -> the value agents reported, on the minibatch most architectures
    share (values on different minibatches are not comparable)."""
    if not names:
        return {}
    found: dict[str, dict[str, dict[str, float]]] = {}  # proxy -> inputs key -> arch -> value
    rows = session.scalars(select(MeasurementRow).where(MeasurementRow.arch_id.in_(ids)))
    for row in rows:
        key = row.result.get("proxy_inputs")
        for name, value in (row.result.get("proxies") or {}).items():
            if name in names and key:
                found.setdefault(name, {}).setdefault(key, {})[row.arch_id] = float(value)
    out = {}
    for name, by_key in found.items():
        counts = Counter({key: len(values) for key, values in by_key.items()})
        out[name] = by_key[counts.most_common(1)[0][0]]
    return out


def _agreement(
    name: str, values: dict[str, float], targets: dict[str, float], body: ProxyCheck
) -> ProxyAgreement:
    paired = [i for i in targets if i in values]
    cost = PROXY_CATALOG[name].cost
    if len(paired) < MIN_MODELS:
        return ProxyAgreement(
            proxy=name,
            cost=cost,
            models=len(paired),
            spearman=None,
            kendall=None,
            top_k_common=None,
            note=f"values for {len(paired)} of the architectures: computed by agents only for "
            f"searches that optimise {name}",
        )
    agreed = agreement(
        [values[i] for i in paired], [targets[i] for i in paired], body.top_k, body.lower_is_better
    )
    note = None if agreed.spearman is not None else "undefined: constant values"
    if note is None and len(paired) < len(targets):
        note = f"values for {len(paired)} of {len(targets)} architectures"
    return ProxyAgreement(
        proxy=name,
        cost=cost,
        models=len(paired),
        spearman=agreed.spearman,
        kendall=agreed.kendall,
        top_k_common=agreed.top_k_common,
        note=note,
    )
