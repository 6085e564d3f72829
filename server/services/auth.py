"""Who may do what: API tokens and agent credentials.

Three kinds of secret, each shown once and stored only as its SHA-256 (they are 256 random
bits, so a fast hash is enough; there is nothing to brute-force):

- a **user token** (`hwnas_u_...`): start and cancel searches, and read results when reads
  are private;
- an **agent enrollment token** (`hwnas_e_...`): register agents, nothing else;
- an **agent credential** (`hwnas_a_...`): issued to one agent when it registers; claims,
  heartbeats and results for that agent's own jobs only.

Admins create and revoke tokens on the server's host with `hwnas token`, straight in the
database: no token is needed to make the first one.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Row, or_, select
from sqlalchemy.orm import Session

from server.errors import Forbidden, Unauthenticated
from server.store.rows import AgentRow, TokenRow
from server.store.store import Store

TokenKind = Literal["user", "agent"]
PREFIX = {"user": "hwnas_u_", "agent": "hwnas_e_", "credential": "hwnas_a_"}
HOW_TO_CREATE = {
    "user": "create one with `hwnas token create --kind user --name NAME --db DATABASE`",
    "agent": "create one with `hwnas token create --kind agent --name NAME --db DATABASE`",
}


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret(kind: str) -> str:
    return PREFIX[kind] + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Caller:
    """Who made a request: a token's kind and id, or an agent; `open` when auth is off."""

    kind: Literal["open", "user", "agent", "credential"]
    token_id: int | None = None
    agent_id: str | None = None
    # An agent credential not looked up yet (`claimed_agent`): the request's own transaction
    # checks it against the agent row it loads anyway (`check_agent`).
    credential_hash: str | None = None

    def may_act_for(self, agent_id: str) -> None:
        """Raise unless this caller may claim, beat and report as `agent_id`."""
        if self.kind == "open":
            return
        if self.kind != "credential":
            raise Forbidden(
                f"{_described(self.kind)} cannot act for an agent: agents send the credential "
                "the server issued when they registered (AgentInfo.credential)"
            )
        if self.agent_id != agent_id:
            raise Forbidden(
                f"this agent credential belongs to agent {self.agent_id!r}, not {agent_id!r}"
            )


def check_agent(session: Session, caller: Caller, agent_id: str, agent: Row[Any] | None) -> None:
    """Raise unless `caller` may act for `agent_id`, whose row's columns (its credential
    hash among them; None: no such agent) the request's transaction has read: what
    `identify` and `Caller.may_act_for` would say, with the credential looked up only when
    it is not the agent's own."""
    if caller.credential_hash is None:
        caller.may_act_for(agent_id)
        return
    if agent is not None and agent.credential_hash == caller.credential_hash:
        return
    owner = session.scalar(
        select(AgentRow.id).where(AgentRow.credential_hash == caller.credential_hash)
    )
    if owner is None:
        raise _unknown_credential()
    Caller("credential", agent_id=owner).may_act_for(agent_id)


def _unknown_credential() -> Unauthenticated:
    return Unauthenticated(
        "agent credential not recognised: the agent was removed or its enrollment "
        "token revoked; register again with a valid enrollment token"
    )


# The caller of a service function called from within the process (a test, a benchmark, the
# server's own schedule), as when authentication is off.
TRUSTED = Caller("open")


def _described(kind: str) -> str:
    """The kind of credential, with its article, for messages."""
    return {"user": "a user token", "agent": "an agent enrollment token"}.get(
        kind, "an agent credential"
    )


def create_token(
    session: Session, name: str, kind: TokenKind, now: datetime, secret: str | None = None
) -> tuple[TokenRow, str]:
    """A new token and its secret (generated unless given: a deployment may set its own)."""
    secret = secret or new_secret(kind)
    row = TokenRow(name=name, kind=kind, token_hash=digest(secret), created_at=now)
    session.add(row)
    session.flush()
    return row, secret


def list_tokens(session: Session) -> list[TokenRow]:
    return list(session.scalars(select(TokenRow).order_by(TokenRow.id)))


def revoke_token(session: Session, name_or_id: str, now: datetime) -> list[TokenRow]:
    """Revoke the live tokens with this name (or id); the agents they enrolled lose their
    credentials too. Returns what was revoked (empty: nothing matched)."""
    match = [TokenRow.name == name_or_id]
    if name_or_id.isdigit():
        match.append(TokenRow.id == int(name_or_id))
    rows = list(session.scalars(select(TokenRow).where(or_(*match), TokenRow.revoked_at.is_(None))))
    for row in rows:
        row.revoked_at = now
        if row.kind == "agent":
            for agent in session.scalars(select(AgentRow).where(AgentRow.enrolled_by == row.id)):
                agent.credential_hash = None
    return rows


def _bearer_secret(authorization: str) -> str:
    scheme, _, secret = authorization.partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        raise Unauthenticated(
            "the Authorization header must be 'Bearer <token>', got scheme "
            f"{scheme[:20]!r}" + ("" if secret else " with no token")
        )
    return secret


def claimed_agent(authorization: str) -> Caller | None:
    """The caller an agent credential in the header claims to be, not looked up yet
    (`check_agent` does that in the request's transaction); None for any other secret."""
    secret = _bearer_secret(authorization)
    if not secret.startswith(PREFIX["credential"]):
        return None
    return Caller("credential", credential_hash=digest(secret))


def identify(session: Session, authorization: str | None) -> Caller | None:
    """The caller a `Authorization: Bearer ...` header names; None without one."""
    if not authorization:
        return None
    secret = _bearer_secret(authorization)
    hashed = digest(secret)
    if secret.startswith(PREFIX["credential"]):
        agent = session.scalar(select(AgentRow).where(AgentRow.credential_hash == hashed))
        if agent is None:
            raise _unknown_credential()
        return Caller("credential", agent_id=agent.id)
    token = session.scalar(select(TokenRow).where(TokenRow.token_hash == hashed))
    if token is None:
        raise Unauthenticated("token not recognised: it was never issued by this server")
    if token.revoked_at is not None:
        raise Unauthenticated(
            f"token {token.name!r} was revoked at {token.revoked_at:%Y-%m-%d %H:%M} UTC"
        )
    return Caller(token.kind, token_id=token.id)  # type: ignore[arg-type]


OPEN = Caller("open")


def caller(store: Store, authorization: str | None) -> Caller | None:
    """The caller the Authorization header names (None: no header); OPEN when auth is off."""
    if not store.settings.auth:
        return OPEN
    with store.read() as session:
        return identify(session, authorization)


def agent_caller(store: Store, authorization: str | None) -> Caller:
    """The caller of a claim, heartbeat or result: an agent's credential, checked against the
    agent's row in the request's own transaction (`check_agent`), which saves every request a
    read of its own; any other secret is identified here. OPEN when auth is off."""
    if not store.settings.auth:
        return OPEN
    if not authorization:
        raise Unauthenticated(
            "claims, heartbeats and results need the agent's credential: send "
            "'Authorization: Bearer <credential>', the credential this server issued when the "
            "agent registered with an enrollment token"
        )
    who = claimed_agent(authorization)
    if who is None:
        with store.read() as session:
            who = identify(session, authorization)
    return who


def require(caller: Caller | None, kind: Literal["user", "agent"], action: str) -> Caller:
    """The caller if it holds a token of `kind`; 401 without a credential, 403 with another."""
    if caller is None:
        raise Unauthenticated(
            f"{action} needs {_described(kind)}: send 'Authorization: Bearer <token>'; "
            f"{HOW_TO_CREATE[kind]}"
        )
    if caller.kind in ("open", kind):
        return caller
    raise Forbidden(
        f"{action} needs {_described(kind)}; this request carries {_described(caller.kind)}"
    )


def enroller(caller: Caller | None) -> Caller:
    """Registering an agent: an agent enrollment token."""
    return require(caller, "agent", "registering an agent")


AGENT_TOKEN_ENV = "HWNAS_AGENT_TOKEN"


def bootstrap(
    session: Session, now: datetime, agent_secret: str | None
) -> list[tuple[TokenRow, str]]:
    """First start with authentication: make the tokens nobody could otherwise make without
    the command line (a user token "admin", an enrollment token "agents"), so that a new
    server is usable at once. `agent_secret` (from $HWNAS_AGENT_TOKEN: a deployment's shared
    secret, e.g. docker-compose's) becomes an enrollment token if it is not one yet.
    Returns what was made, with the secrets, to be shown once."""
    made = []
    if (
        agent_secret
        and session.scalar(select(TokenRow).where(TokenRow.token_hash == digest(agent_secret)))
        is None
    ):
        made.append(create_token(session, f"${AGENT_TOKEN_ENV}", "agent", now, agent_secret))
    live = {
        kind for kind in session.scalars(select(TokenRow.kind).where(TokenRow.revoked_at.is_(None)))
    }
    if "user" not in live:
        made.append(create_token(session, "admin", "user", now))
    if "agent" not in live:
        made.append(create_token(session, "agents", "agent", now))
    return made
