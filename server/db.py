"""SQLAlchemy 2 tables and engine creation. The database is the source of truth."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class SearchRow(Base):
    __tablename__ = "searches"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), index=True)  # running | finished | cancelled
    device_class: Mapped[str] = mapped_column(String(100), index=True)
    request: Mapped[dict] = mapped_column(JSON)  # the validated SearchCreate
    created_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    finish_reason: Mapped[str | None] = mapped_column(String(32))


class ArchitectureRow(Base):
    """One architecture, shared by every search that proposes it (keyed by its stable id)."""

    __tablename__ = "architectures"
    arch_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    spec: Mapped[dict] = mapped_column(JSON)
    decoder_params: Mapped[int] = mapped_column(Integer)
    total_params: Mapped[int] = mapped_column(Integer)


class CandidateRow(Base):
    """An architecture proposed by a search; also the job an agent claims to measure it."""

    __tablename__ = "candidates"
    __table_args__ = (UniqueConstraint("search_id", "arch_id", name="one_arch_per_search"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    search_id: Mapped[int] = mapped_column(ForeignKey("searches.id"), index=True)
    arch_id: Mapped[str] = mapped_column(ForeignKey("architectures.arch_id"))
    generation: Mapped[int] = mapped_column(Integer)
    # queued | running | measured | failed | cancelled
    status: Mapped[str] = mapped_column(String(16), index=True)
    lease_id: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime)
    agent_id: Mapped[str | None] = mapped_column(String(64))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    failure_kind: Mapped[str | None] = mapped_column(String(32))
    failure_message: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)

    architecture: Mapped[ArchitectureRow] = relationship(lazy="joined")
    measurement: Mapped[MeasurementRow | None] = relationship(
        back_populates="candidate", lazy="joined", uselist=False
    )


class MeasurementRow(Base):
    __tablename__ = "measurements"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"), unique=True)
    agent_id: Mapped[str] = mapped_column(String(64))
    latency_ms: Mapped[float] = mapped_column(Float)
    latency_iqr_ms: Mapped[float] = mapped_column(Float)
    latency_samples_ms: Mapped[list] = mapped_column(JSON)
    peak_memory_mb: Mapped[float] = mapped_column(Float)
    memory_method: Mapped[str] = mapped_column(String(200))
    baseline_memory_mb: Mapped[float] = mapped_column(Float)
    weights_mb: Mapped[float] = mapped_column(Float)
    build_s: Mapped[float] = mapped_column(Float)
    details: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime)

    candidate: Mapped[CandidateRow] = relationship(back_populates="measurement")


class AgentRow(Base):
    __tablename__ = "agents"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(100))
    device_class: Mapped[str] = mapped_column(String(100), index=True)
    fingerprint: Mapped[dict] = mapped_column(JSON)
    registered_at: Mapped[datetime] = mapped_column(DateTime)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime)
    jobs_done: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)


def make_engine(database_url: str) -> Engine:
    """Create the engine and the tables; SQLite gets WAL and a busy timeout."""
    is_sqlite = database_url.startswith("sqlite")
    engine = create_engine(
        database_url,
        connect_args={"check_same_thread": False, "timeout": 30} if is_sqlite else {},
    )
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    Base.metadata.create_all(engine)
    return engine


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001 - DBAPI objects
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
