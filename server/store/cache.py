"""The measurement cache: a result keyed by (architecture, device fingerprint, runtime and
settings) is reused by later searches instead of being measured again.

A search targets a device class; the fingerprints that class stands for are those of the
agents registered under it. Measurements flagged busy are never reused: they are kept, and
shown, but a later search measures again.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, select
from sqlalchemy.orm import Session

from archvocab.wire import DeviceFingerprint
from server.store.rows import AgentRow, MeasurementRow, SearchRow

# Who the machine is called does not change what it measures.
_NOT_IN_KEY = {"hostname"}


def fingerprint_key(fingerprint: DeviceFingerprint) -> str:
    """A stable id of the device's performance-relevant fingerprint."""
    fields = fingerprint.model_dump(mode="json", exclude=_NOT_IN_KEY)
    fields["runtimes"] = sorted(fields.get("runtimes") or [])
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def settings_key(search: SearchRow) -> str:
    return search.parsed_request.measurement.cache_key()


def find_cached(session: Session, search: SearchRow, arch_ids: list[str]) -> dict[str, int]:
    """arch id -> the id of the latest reusable measurement for this search's devices and
    settings.

    A search whose proxy objective the agents compute reuses only measurements that carry
    that proxy on the same minibatch (otherwise it is measured, and computed, again). Only
    ids, and those two members, are read, not the measurements: a round replayed in parts
    looks up each part's proposals and writes the first few the cache holds, and reading
    whole measurements (their raw samples dominate a row) took 0.9 s of the 5 s a replay of
    1,000 held the write lock under cProfile (docs/benchmarks.md, "A replayed search's table
    off the write lock").
    """
    if not arch_ids:
        return {}
    request = search.parsed_request
    needed, inputs_key = request.agent_proxies, request.proxy_inputs.key()
    rows = session.execute(
        _cached(bool(needed)),
        {"arch_ids": arch_ids, "settings": settings_key(search), "device": search.device_class},
    )
    return {  # later rows win: the latest measurement
        row[1]: row[0] for row in rows if not needed or _has_proxies(*row[2:], needed, inputs_key)
    }


@cache
def _cached(with_proxies: bool) -> Select:
    """The lookup, built once (each part of a replay runs it under the write lock): ids and
    arch ids of the reusable measurements of `arch_ids` taken with `settings` on a device of
    class `device`, oldest first; `with_proxies`: and the members that say which proxies
    each carries."""
    devices = select(AgentRow.fingerprint_key).where(AgentRow.device_class == bindparam("device"))
    columns = [MeasurementRow.id, MeasurementRow.arch_id]
    if with_proxies:
        columns += [MeasurementRow.result["proxies"], MeasurementRow.result["proxy_inputs"]]
    return (
        select(*columns)
        .where(
            MeasurementRow.arch_id.in_(bindparam("arch_ids", expanding=True)),
            MeasurementRow.settings_key == bindparam("settings"),
            MeasurementRow.fingerprint_key.in_(devices),
            MeasurementRow.busy.is_(False),
        )
        .order_by(MeasurementRow.id)
    )


def _has_proxies(
    values: dict[str, Any] | None, inputs: str | None, names: list[str], inputs_key: str
) -> bool:
    """Whether a measurement's `proxies` hold each of `names`, computed on `inputs_key`."""
    return inputs == inputs_key and all(n in (values or {}) for n in names)


def measurement_columns(
    search: SearchRow, arch_id: str, agent: Any, result: dict[str, Any], now: Any
) -> dict[str, Any]:
    """A new measurement's row, as columns (`agent`: its id and fingerprint_key)."""
    return {
        "arch_id": arch_id,
        "settings_key": settings_key(search),
        "fingerprint_key": agent.fingerprint_key,
        "runtime": search.runtime,
        "agent_id": agent.id,
        "search_id": search.id,
        "latency_ms": result["latency_ms"],
        "peak_memory_mb": result["peak_memory_mb"],
        "busy": bool(result["provenance"].get("busy", False)),
        "result": result,
        "created_at": now,
    }
