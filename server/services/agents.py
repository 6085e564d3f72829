"""Agents: registration (with a credential of its own when authentication is on), the
fleet's view, and what an agent can measure. (The jobs they do: server.services.jobs.)"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from archvocab.wire import AgentInfo, AgentRegistration, AgentView, DeviceFingerprint
from server.errors import NotFound
from server.services.auth import Caller, digest, new_secret
from server.services.events import log_event
from server.settings import as_utc
from server.store.cache import fingerprint_key
from server.store.rows import AgentRow
from server.store.store import Store


def register_agent(
    store: Store, registration: AgentRegistration, enrolled_by: Caller | None = None
) -> AgentInfo:
    """A new agent; with authentication on it gets its own credential, shown only here."""
    credential = new_secret("credential") if store.settings.auth else None
    with store.write_rows() as session:
        now = store.now()
        agent = AgentRow(
            id=uuid.uuid4().hex,
            name=registration.name,
            device_class=registration.device_class,
            fingerprint=registration.fingerprint.model_dump(mode="json"),
            fingerprint_key=fingerprint_key(registration.fingerprint),
            registered_at=now,
            last_seen_at=now,
            jobs_done=0,
            failures=0,
            credential_hash=digest(credential) if credential else None,
            enrolled_by=enrolled_by.token_id if enrolled_by else None,
        )
        session.add(agent)
    log_event(
        "agent.registered",
        agent_id=agent.id,
        device_class=agent.device_class,
        agent_name=agent.name,
    )
    return AgentInfo(
        agent_id=agent.id,
        device_class=agent.device_class,
        name=agent.name,
        heartbeat_interval_s=store.settings.heartbeat_interval_s,
        lease_seconds=store.settings.lease_seconds,
        credential=credential,
    )


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


def seen(session: Session, agent_id: str, now: datetime) -> AgentRow:
    agent = session.get(AgentRow, agent_id)
    if agent is None:
        raise NotFound("agent", agent_id)
    agent.last_seen_at = now
    return agent


def capabilities(agent: AgentRow) -> tuple[list[str], list[str]]:
    """(runtimes, devices) the agent can measure with: only jobs it can do are offered."""
    return fingerprint_capabilities(agent.fingerprint)


def fingerprint_capabilities(fingerprint: dict) -> tuple[list[str], list[str]]:
    """(runtimes, devices) an agent with this stored fingerprint can measure with."""
    parsed = DeviceFingerprint.model_validate(fingerprint)
    devices = ["cpu", "cuda"] if parsed.accelerator else ["cpu"]
    return list(parsed.runtimes), devices


def online_since(store: Store) -> datetime:
    """Agents seen since this moment are online: within a lease period (as /metrics counts
    hwnas_agents_online and the fleet's view shows them)."""
    return store.now() - timedelta(seconds=store.settings.lease_seconds)
