"""The tables (SQLAlchemy 2 rows). The database is the source of truth."""

from __future__ import annotations

import functools
import json
from datetime import datetime

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from archvocab.wire import SearchCreate


@functools.lru_cache(maxsize=256)
def _parse_request(canonical: str) -> SearchCreate:
    return SearchCreate.model_validate(json.loads(canonical))


class Base(DeclarativeBase):
    pass


class SearchRow(Base):
    __tablename__ = "searches"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), index=True)  # running | finished | cancelled
    device_class: Mapped[str] = mapped_column(String(100), index=True)
    request: Mapped[dict] = mapped_column(JSON)  # the validated SearchCreate
    # Copied out of `request` so that claims can match agents in SQL.
    runtime: Mapped[str] = mapped_column(String(32))
    device: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    # The hypervolume's normalisation once fixed: {"ideal", "reference", "source"}
    # (server.services.quality)
    normalisation: Mapped[dict | None] = mapped_column(JSON)
    # Bumped by every write that changes what the search's engine knows (proposals, results,
    # cancellation): a server process whose cached engine has another revision rebuilds it.
    revision: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    @property
    def parsed_request(self) -> SearchCreate:
        """`request` as the typed model (read only), parsed once per process and request: a
        search's request never changes after it is created, validation costs about 0.2 ms,
        and every claim and result loads the row afresh."""
        cached = self.__dict__.get("_parsed_request")
        if cached is None or cached[0] is not self.request:
            canonical = json.dumps(self.request, sort_keys=True, separators=(",", ":"))
            cached = (self.request, _parse_request(canonical))
            self.__dict__["_parsed_request"] = cached
        return cached[1]


class ArchitectureRow(Base):
    """One architecture, shared by every search that proposes it (keyed by its stable id)."""

    __tablename__ = "architectures"
    arch_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    spec: Mapped[dict] = mapped_column(JSON)
    decoder_params: Mapped[int] = mapped_column(Integer)
    total_params: Mapped[int] = mapped_column(Integer)


class CandidateRow(Base):
    """An architecture proposed by a search; also the job an agent claims to measure it.

    `round` 0 is the candidate the engine proposed; round k > 0 is the k-th re-measurement of
    it, a job of its own that the search queues to tell frontier points apart
    (server.services.remeasure). Only round 0 is told to the engine and numbered as a result.
    """

    __tablename__ = "candidates"
    __table_args__ = (
        UniqueConstraint("search_id", "arch_id", "round", name="one_arch_per_search"),
        # A search's results in order: the next number, the results after N (server reads
        # and the dashboard's poll) without a scan of the search's rows.
        Index("ix_candidates_search_result_seq", "search_id", "result_seq"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    search_id: Mapped[int] = mapped_column(ForeignKey("searches.id"), index=True)
    arch_id: Mapped[str] = mapped_column(ForeignKey("architectures.arch_id"))
    round: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    generation: Mapped[int] = mapped_column(Integer)
    # queued | running | measured | failed | cancelled
    status: Mapped[str] = mapped_column(String(16), index=True)
    # When it last went into the queue (proposed, or requeued after its lease ran out): with
    # its lease's issue time, how long it waited for an agent. None in rows from before 0007.
    queued_at: Mapped[datetime | None] = mapped_column(DateTime)
    lease_id: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime)
    agent_id: Mapped[str | None] = mapped_column(String(64))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    failure_kind: Mapped[str | None] = mapped_column(String(32))
    failure_message: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    measurement_id: Mapped[int | None] = mapped_column(ForeignKey("measurements.id"))
    reused: Mapped[bool] = mapped_column(Boolean, default=False)  # measurement from the cache
    # What the strategy's cost models predicted for the measurement (strategy hwnas).
    prediction: Mapped[dict | None] = mapped_column(JSON)
    # Set when the result is told: its rank among the search's results, and the hypervolume
    # of the search's measured frontier with it (None until the normalisation is fixed).
    result_seq: Mapped[int | None] = mapped_column(Integer)
    hypervolume: Mapped[float | None] = mapped_column(Float)
    # The lease whose result was accepted: a repeated submission from it is a duplicate.
    result_lease_id: Mapped[str | None] = mapped_column(String(64))

    architecture: Mapped[ArchitectureRow] = relationship(lazy="joined")
    measurement: Mapped[MeasurementRow | None] = relationship(lazy="joined")


class MeasurementRow(Base):
    """One measurement of an architecture on a device, shared by every search it serves.

    The cache key is (arch_id, fingerprint_key, settings_key): the same architecture, on a
    device with the same fingerprint, measured with the same runtime and settings.
    """

    __tablename__ = "measurements"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    arch_id: Mapped[str] = mapped_column(ForeignKey("architectures.arch_id"), index=True)
    settings_key: Mapped[str] = mapped_column(Text)
    fingerprint_key: Mapped[str] = mapped_column(String(64))
    runtime: Mapped[str] = mapped_column(String(32))
    agent_id: Mapped[str] = mapped_column(String(64))
    search_id: Mapped[int] = mapped_column(ForeignKey("searches.id"))  # the search that asked
    latency_ms: Mapped[float] = mapped_column(Float)
    peak_memory_mb: Mapped[float] = mapped_column(Float)
    busy: Mapped[bool] = mapped_column(Boolean)
    result: Mapped[dict] = mapped_column(JSON)  # the MeasurementResult as the agent sent it
    created_at: Mapped[datetime] = mapped_column(DateTime)


class AgentRow(Base):
    __tablename__ = "agents"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(100))
    device_class: Mapped[str] = mapped_column(String(100), index=True)
    fingerprint: Mapped[dict] = mapped_column(JSON)
    fingerprint_key: Mapped[str] = mapped_column(String(64), index=True)
    registered_at: Mapped[datetime] = mapped_column(DateTime)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime)
    jobs_done: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    # The agent's own credential (its hash), issued at registration; None when registered
    # on a server without authentication.
    credential_hash: Mapped[str | None] = mapped_column(String(64), index=True)
    enrolled_by: Mapped[int | None] = mapped_column(
        ForeignKey("tokens.id", name="fk_agents_enrolled_by")
    )


class ArrivalRow(Base):
    """A result recorded and not yet told to its search (server.services.arrivals): the
    result request only stores it, and its search's engine hears of it afterwards, off the
    request, in the order results arrived (the `id`)."""

    __tablename__ = "arrivals"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    search_id: Mapped[int] = mapped_column(ForeignKey("searches.id"), index=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"), unique=True)


class LeaseRow(Base):
    """Every lease ever issued: proves that a late result comes from an agent that was given
    the job, after its lease expired and the job went to another agent or back to the queue."""

    __tablename__ = "leases"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"), index=True)
    agent_id: Mapped[str] = mapped_column(String(64))
    issued_at: Mapped[datetime] = mapped_column(DateTime)


class TokenRow(Base):
    """An API token: a user's (searches, results) or an agent enrollment token (registering
    agents). Only the SHA-256 of the secret is stored; the secret is shown once."""

    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    kind: Mapped[str] = mapped_column(String(16))  # user | agent
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)
