"""Agents: registration (with a credential of its own when authentication is on), the
fleet's view, and what an agent can measure. (The jobs they do: server.services.jobs.)"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, bindparam, insert, select, update
from sqlalchemy.orm import Session

from archvocab.wire import AgentInfo, AgentRegistration, AgentView, DeviceFingerprint
from server.errors import NotFound
from server.services.auth import TRUSTED, Caller, check_agent, digest, new_secret
from server.services.context import Services
from server.services.events import log_event
from server.settings import as_utc
from server.store.cache import fingerprint_key
from server.store.rows import AgentRow
from server.store.store import Store


def register_agent(
    services: Services, registration: AgentRegistration, enrolled_by: Caller | None = None
) -> AgentInfo:
    """A new agent; with authentication on it gets its own credential, shown only here."""
    store = services.store
    credential = new_secret("credential") if store.settings.auth else None
    agent_id = uuid.uuid4().hex
    with store.write_rows() as session:
        now = store.now()
        # A Core statement: a fleet registering at once queues its first claims behind these
        # writes, and the unit of work cost more than the insert itself.
        session.execute(
            _REGISTER,
            {
                "id": agent_id,
                "name": registration.name,
                "device_class": registration.device_class,
                "fingerprint": registration.fingerprint.model_dump(mode="json"),
                "fingerprint_key": fingerprint_key(registration.fingerprint),
                "registered_at": now,
                "last_seen_at": now,
                "jobs_done": 0,
                "failures": 0,
                "credential_hash": digest(credential) if credential else None,
                "enrolled_by": enrolled_by.token_id if enrolled_by else None,
            },
        )
    services.live_counts.pop(registration.device_class, None)  # one more live agent
    log_event(
        "agent.registered",
        agent_id=agent_id,
        device_class=registration.device_class,
        agent_name=registration.name,
    )
    return AgentInfo(
        agent_id=agent_id,
        device_class=registration.device_class,
        name=registration.name,
        heartbeat_interval_s=store.settings.heartbeat_interval_s,
        lease_seconds=store.settings.lease_seconds,
        credential=credential,
    )


_REGISTER = insert(AgentRow.__table__)


def list_agents(store: Store) -> list[AgentView]:
    since = online_since(store)
    with store.read() as session:
        return [
            AgentView(
                agent_id=a.id,
                name=a.name,
                device_class=a.device_class,
                fingerprint=a.fingerprint,
                registered_at=as_utc(a.registered_at),
                last_seen_at=as_utc(a.last_seen_at),
                jobs_done=a.jobs_done,
                failures=a.failures,
                online=a.last_seen_at >= since,
            )
            for a in session.scalars(select(AgentRow).order_by(AgentRow.registered_at))
        ]


# How stale an agent's `last_seen_at` may be before a request of its writes it again, as a
# share of the lease period (online means seen within one): an idle agent polling every
# second costs a write every few seconds, not every poll.
SEEN_RESOLUTION = 1 / 20


# What a claim, a heartbeat or a result reads of its agent, as one statement built once (an
# ORM load of the whole row, its fingerprint's JSON included, cost more than the rest of the
# read); its fingerprint is read only where capabilities are worked out (`capabilities`).
_AGENTS = AgentRow.__table__
_SEEN = select(
    _AGENTS.c.id,
    _AGENTS.c.device_class,
    _AGENTS.c.fingerprint_key,
    _AGENTS.c.last_seen_at,
    _AGENTS.c.credential_hash,
).where(_AGENTS.c.id == bindparam("agent"))
_MARK_SEEN = (
    update(_AGENTS).where(_AGENTS.c.id == bindparam("agent")).values(last_seen_at=bindparam("now"))
)


def read_agent(session: Session, agent_id: str) -> Row[Any] | None:
    """The agent's id, device class, fingerprint key, last seen time and credential hash;
    None when there is no such agent."""
    return session.execute(_SEEN, {"agent": agent_id}).first()


def seen(
    session: Session,
    agent_id: str,
    now: datetime,
    lease_seconds: float,
    caller: Caller = TRUSTED,
    mark: bool = True,
) -> Row[Any]:
    """The agent's `read_agent` columns, marked seen `now` (`mark_seen`); first, whether
    `caller` may act for it (`check_agent`). Without `mark` the caller marks it."""
    agent = read_agent(session, agent_id)
    check_agent(session, caller, agent_id, agent)
    if agent is None:
        raise NotFound("agent", agent_id)
    if mark:
        mark_seen(session, agent, now, lease_seconds)
    return agent


def mark_seen(session: Session, agent: Row[Any], now: datetime, lease_seconds: float) -> None:
    """Mark the agent (its `read_agent` columns) seen `now`, unless it was within
    `SEEN_RESOLUTION` of a lease."""
    if not recently_seen(agent.last_seen_at, now, lease_seconds):
        session.execute(_MARK_SEEN, {"agent": agent.id, "now": now})


def recently_seen(last_seen_at: datetime, now: datetime, lease_seconds: float) -> bool:
    return now - last_seen_at < timedelta(seconds=SEEN_RESOLUTION * lease_seconds)


# An agent's fingerprint never changes once it registered: what it can measure is worked out
# once per process (a claim looks at up to 64 other agents' too).
_CAPABILITIES: dict[str, tuple[list[str], list[str]]] = {}
_CAPABILITIES_KEPT = 10_000


def capabilities(session: Session, agent_id: str) -> tuple[list[str], list[str]]:
    """(runtimes, devices) the agent can measure with: only jobs it can do are offered. Its
    fingerprint is read once per process."""
    known = _CAPABILITIES.get(agent_id)
    if known is not None:
        return known
    fingerprint = session.scalar(select(AgentRow.fingerprint).where(AgentRow.id == agent_id))
    return capabilities_of(agent_id, fingerprint)


def capabilities_of(agent_id: str, fingerprint: dict) -> tuple[list[str], list[str]]:
    """`capabilities` from an agent's id and stored fingerprint."""
    known = _CAPABILITIES.get(agent_id)
    if known is None:
        if len(_CAPABILITIES) >= _CAPABILITIES_KEPT:
            _CAPABILITIES.clear()
        known = _CAPABILITIES[agent_id] = fingerprint_capabilities(fingerprint)
    return known


def fingerprint_capabilities(fingerprint: dict) -> tuple[list[str], list[str]]:
    """(runtimes, devices) an agent with this stored fingerprint can measure with."""
    parsed = DeviceFingerprint.model_validate(fingerprint)
    devices = ["cpu", "cuda"] if parsed.accelerator else ["cpu"]
    return list(parsed.runtimes), devices


def online_since(store: Store) -> datetime:
    """Agents seen since this moment are online: within a lease period (as /metrics counts
    hwnas_agents_online and the fleet's view shows them)."""
    return store.now() - timedelta(seconds=store.settings.lease_seconds)
