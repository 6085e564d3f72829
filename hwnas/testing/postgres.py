"""A throwaway PostgreSQL cluster for tests and benchmarks.

`start()` runs `initdb` into a fresh temporary directory and starts the server on a free port
of 127.0.0.1, its unix socket in that directory, tuned to be a fast disposable test cluster
(no fsync, no synchronous commit) with room for a load test's clients (400 connections).
`Cluster.create_database(name)` returns a SQLAlchemy URL for a fresh database;
`Cluster.stop()` stops the server and deletes the directory. `start_or_skip()` is `start()`
for pytest fixtures (tests/conftest.py: `postgres_cluster`, `postgres_url`); bench/load.py
starts one with `start()`.

PostgreSQL refuses to run as root: as root the cluster runs as the `postgres` system user
(`runuser`), otherwise as the current user. Either way the superuser is named `postgres`
and local TCP logins are trusted, so URLs look the same everywhere:
`postgresql+psycopg://postgres@127.0.0.1:PORT/NAME`.

A machine without the server binaries or psycopg raises `PostgresUnavailable`, whose message
says what is missing and how to install it; anything else that goes wrong raises
`PostgresStartError` with the server's log.
"""

from __future__ import annotations

import atexit
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hwnas.testing.ports import free_port

SUPERUSER = "postgres"
MAX_CONNECTIONS = 400
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "max_connections": str(MAX_CONNECTIONS),
    # A test cluster: losing it in a crash costs nothing, so skip every disk flush.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "'128MB'",
    "log_min_messages": "warning",
}
INITDB_OPTIONS = (
    f"--username={SUPERUSER}",
    "--auth=trust",
    "--encoding=UTF8",
    "--locale=C",
    "--no-sync",  # half of initdb's time is flushing files a test cluster can lose
    "--no-instructions",
)
INSTALL_HINT = "install it with `apt-get install postgresql` (Debian) or put pg_config on PATH"
START_ATTEMPTS = 3


class PostgresUnavailable(RuntimeError):
    """This machine cannot run PostgreSQL: binaries, psycopg or a non-root user are missing."""


class PostgresStartError(RuntimeError):
    """The binaries are there but the cluster did not come up; the message has its log."""


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.name)) or (0,)


def find_bindir(
    roots: tuple[str, ...] = ("/usr/lib/postgresql",),
    pg_config: str | None = "pg_config",
    path: str | None = None,
) -> Path:
    """The directory holding initdb, pg_ctl and postgres.

    `pg_config --bindir` first, then the highest version under each of `roots` (Debian puts
    the server in /usr/lib/postgresql/VERSION/bin, off PATH), then `initdb` on `path` (PATH
    by default).
    """
    candidates: list[Path] = []
    pg_config = pg_config and shutil.which(pg_config, path=path)
    if pg_config:
        result = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if result.returncode == 0 and result.stdout.strip():
            candidates.append(Path(result.stdout.strip()))
    for root in roots:
        versions = sorted(Path(root).glob("*/bin"), key=lambda p: _version_key(p.parent))
        candidates.extend(reversed(versions))
    on_path = shutil.which("initdb", path=path)
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for bindir in candidates:
        if all(os.access(bindir / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return bindir
    looked = [str(c) for c in candidates] or ["no candidate directory"]
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in pg_config --bindir, "
        f"{', '.join(r + '/*/bin' for r in roots)} or PATH (looked in {', '.join(looked)}): "
        + INSTALL_HINT
    )


def _run_as() -> pwd.struct_passwd | None:
    """The user to run the server as: None for the current one, `postgres` when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root, which PostgreSQL refuses, and there is no {SUPERUSER!r} user to "
            f"run it as: {INSTALL_HINT} (the package creates that user)"
        ) from None


def _reachable_by_others(path: Path) -> bool:
    """Whether every directory down to `path` lets other users through (root -> postgres)."""
    return all(os.stat(p).st_mode & 0o001 for p in (path, *path.parents))


def _make_root(user: pwd.struct_passwd | None) -> Path:
    base = Path(tempfile.gettempdir()).resolve()
    if user is not None and not _reachable_by_others(base):
        base = Path("/tmp")  # TMPDIR may be private to root; /tmp is traversable by anyone
    root = Path(tempfile.mkdtemp(prefix="hwnas-pg-", dir=base))
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    return root


def _clean_env() -> dict[str, str]:
    # PGDATA, PGPORT and friends from the caller's shell must not steer initdb or pg_ctl.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    return env


@dataclass
class Cluster:
    """A running throwaway cluster. `stop()` is safe to call more than once."""

    bindir: Path
    root: Path
    port: int
    user: pwd.struct_passwd | None
    start_seconds: float = 0.0
    _stopped: bool = field(default=False, repr=False)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def pid(self) -> int | None:
        """The postmaster's process id, for CPU accounting; None when it is not running."""
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def url(self, database: str = "postgres") -> str:
        """SQLAlchemy URL of `database` on this cluster (psycopg 3 driver)."""
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres"):
        """A psycopg connection in autocommit mode (for CREATE/DROP DATABASE)."""
        import psycopg

        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=SUPERUSER, dbname=database, autocommit=True
        )

    def create_database(self, name: str) -> str:
        """Create an empty database `name` (replacing any of that name) and return its URL."""
        from psycopg import sql

        with self.connect() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop `name`, closing any connections still open to it."""
        from psycopg import sql

        with self.connect() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def stop(self) -> None:
        """Stop the server at once (nothing in it is worth a clean shutdown) and delete it."""
        if self._stopped:
            return
        self._stopped = True
        if (self.data / "postmaster.pid").exists():
            _run(
                self, ["pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w"], check=False
            )
        shutil.rmtree(self.root, ignore_errors=True)


def _command(cluster: Cluster, argv: list[str]) -> list[str]:
    argv = [str(cluster.bindir / argv[0]), *argv[1:]]
    if cluster.user is None:
        return argv
    return ["runuser", "-u", cluster.user.pw_name, "--", *argv]


def _run(cluster: Cluster, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        _command(cluster, argv),
        cwd=cluster.root,  # the server's user may not be able to enter the caller's cwd
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if check and result.returncode != 0:
        log = cluster.log.read_text() if cluster.log.exists() else ""
        raise PostgresStartError(
            f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}{result.stderr}{log}"
        )
    return result


def _initdb(cluster: Cluster) -> None:
    _run(cluster, ["initdb", "-D", str(cluster.data), *INITDB_OPTIONS])
    settings = {**SETTINGS, "unix_socket_directories": f"'{cluster.root}'"}
    with open(cluster.data / "postgresql.conf", "a") as conf:
        conf.write("".join(f"{key} = {value}\n" for key, value in settings.items()))


def _pg_ctl_start(cluster: Cluster, check: bool) -> subprocess.CompletedProcess:
    # -w: return once the server accepts connections (pg_ctl polls its pid file for "ready").
    options = ["-D", str(cluster.data), "-l", str(cluster.log), "-w", "-t", "30"]
    return _run(cluster, ["pg_ctl", "start", *options, "-o", f"-p {cluster.port}"], check=check)


def start() -> Cluster:
    """initdb and start a cluster; raises PostgresUnavailable or PostgresStartError."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise PostgresUnavailable(
            "psycopg is not installed: pip install -e '.[postgres]' (or '.[dev]')"
        ) from None
    began = time.perf_counter()
    bindir, user = find_bindir(), _run_as()
    cluster = Cluster(bindir=bindir, root=_make_root(user), port=0, user=user)
    atexit.register(cluster.stop)  # a run interrupted before its teardown leaves nothing behind
    try:
        _initdb(cluster)
        for attempt in range(START_ATTEMPTS):
            cluster.port = free_port()  # another process may take it first: then try another
            started = _pg_ctl_start(cluster, check=attempt == START_ATTEMPTS - 1)
            if started.returncode == 0:
                break
    except BaseException:
        cluster.stop()
        raise
    cluster.start_seconds = time.perf_counter() - began
    return cluster


def start_or_skip(require: bool) -> Cluster:
    """`start()` for pytest: skip when PostgreSQL is unavailable, or fail under `require`."""
    import pytest

    try:
        return start()
    except PostgresUnavailable as exc:
        if require:
            pytest.fail(f"HWNAS_REQUIRE_POSTGRES=1 but PostgreSQL is unavailable: {exc}")
        pytest.skip(f"PostgreSQL unavailable: {exc}")
