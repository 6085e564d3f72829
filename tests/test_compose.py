"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

Each service's command must be a real `hwnas` command line (it is parsed with the CLI's own
parser), each agent must point at its server service, and each role's image must be a stage
of the Dockerfile (its build target) that installs the project with the role's extras under
constraints.txt: the server's without torch, the agent's with torch's CPU wheel. The
`postgres` profile adds a PostgreSQL store, a server on it and an agent for that server;
plain `docker compose up` stays the SQLite pair.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from hwnas.cli import build_parser

yaml = pytest.importorskip("yaml", reason="PyYAML (dev extra) parses docker-compose.yml")
tomllib = pytest.importorskip("tomllib", reason="tomllib (Python 3.11+) reads pyproject.toml")

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yml"
SUBCOMMAND = {"server": "serve", "agent": "agent", "server-pg": "serve", "agent-pg": "agent"}
# Which server each agent measures for.
AGENT_OF = {"agent": "server", "agent-pg": "server-pg"}
POSTGRES_PROFILE = {"postgres", "server-pg", "agent-pg"}
# What a role's command imports at run time, so its image's extra must provide it.
NEEDS = {"serve": {"fastapi", "uvicorn", "sqlalchemy"}, "agent": {"torch", "httpx"}}
# What a server's --db URL scheme imports (SQLite's driver is in the standard library).
DRIVER_NEEDS = {"sqlite": set(), "postgresql+psycopg": {"psycopg"}}
# The Dockerfile's stage (build target) of each role.
TARGET = {"serve": "server", "agent": "agent"}
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def command_of(service: dict[str, Any]) -> list[str]:
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def parsed(service: dict[str, Any]):
    argv = command_of(service)
    assert argv[0] == "hwnas", f"command must run hwnas, got {argv}"
    return build_parser().parse_args(argv[1:])  # argparse exits on anything invalid


def mounts(service: dict[str, Any]) -> list[tuple[str | None, str]]:
    """(source, target) of each volume, short ("src:dst[:mode]") or long syntax."""
    out: list[tuple[str | None, str]] = []
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            out.append((volume.get("source"), volume["target"]))
        else:
            parts = volume.split(":")
            out.append((parts[0], parts[1]) if len(parts) > 1 else (None, parts[0]))
    return out


def interpolate(value: str) -> str:
    """`value` as compose runs it with no variables set: ${VAR:-default} becomes default."""
    return re.sub(r"\$\{\w+(?::?-([^}]*))?\}", lambda m: m.group(1) or "", value)


def extra_requirements(extras_arg: str) -> set[str]:
    """Distribution names extras install ("a" or "a,b", as the Dockerfile's EXTRAS takes them),
    following self-references like hwnas[a,b]."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names: set[str] = set()
    for extra in (e.strip() for e in extras_arg.split(",")):
        assert extra in extras, f"unknown extra {extra!r}; pyproject has {sorted(extras)}"
        for requirement in extras[extra]:
            nested = re.fullmatch(r"hwnas\[(.+)\]", requirement)
            if nested:
                names |= extra_requirements(nested.group(1))
            else:
                names.add(re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower())
    return names


def db_scheme(db: str) -> str:
    return urlparse(db).scheme if "://" in db else "sqlite"


def dockerfile_stages(text: str) -> dict[str, list[str]]:
    """Instructions per stage (`FROM image AS name`), continuation lines joined, comments
    dropped; the stage-less preamble under ""."""
    stages: dict[str, list[str]] = {"": []}
    current = ""
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        stage = re.fullmatch(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE)
        if stage:
            current = stage.group(1)
            stages[current] = []
        stages[current].append(line)
    return stages


@pytest.fixture(scope="module")
def stages() -> dict[str, list[str]]:
    return dockerfile_stages((REPO / "Dockerfile").read_text())


def stage_extras(stages: dict[str, list[str]], build: dict[str, Any]) -> str:
    """The extras a compose build installs: its EXTRAS build arg, else the stage's default."""
    if "EXTRAS" in (build.get("args") or {}):
        return build["args"]["EXTRAS"]
    (default,) = [
        line.split("=", 1)[1] for line in stages[build["target"]] if line.startswith("ARG EXTRAS=")
    ]
    return default


def pip_install(stage: list[str]) -> str:
    (install,) = [line for line in stage if "pip install" in line]
    return install


def test_every_service_exists(compose: dict[str, Any]) -> None:
    assert set(SUBCOMMAND) | {"postgres"} <= set(compose["services"])


@pytest.mark.parametrize("name", list(SUBCOMMAND))
def test_command_is_a_real_hwnas_subcommand(compose: dict[str, Any], name: str) -> None:
    args = parsed(compose["services"][name])
    assert args.command == SUBCOMMAND[name]


def test_server_keeps_its_database_on_a_named_volume(compose: dict[str, Any]) -> None:
    server = compose["services"]["server"]
    args = parsed(server)
    assert (args.host, args.port) == ("0.0.0.0", 8000)
    assert args.db == "sqlite:////data/hwnas.db"
    db_dir = str(Path(args.db.removeprefix("sqlite:///")).parent)
    named = {
        source: target
        for source, target in mounts(server)
        if source and not source.startswith((".", "/", "~"))
    }
    assert db_dir in named.values(), f"{db_dir} is not on a named volume: {server['volumes']}"
    assert set(named) <= set(compose.get("volumes") or {})
    published = [str(p).rsplit(":", 1)[-1] for p in server.get("ports", [])]
    assert not published or str(args.port) in published


@pytest.mark.parametrize("name", list(AGENT_OF))
def test_agent_points_at_its_server_service(compose: dict[str, Any], name: str) -> None:
    services = compose["services"]
    agent, server = parsed(services[name]), parsed(services[AGENT_OF[name]])
    url = urlparse(agent.server)
    assert url.scheme == "http"
    assert url.hostname == AGENT_OF[name] and url.hostname in services
    assert url.port == server.port
    assert agent.device_class == "cpu"
    depends = services[name]["depends_on"]
    assert AGENT_OF[name] in (depends if isinstance(depends, list) else list(depends))


@pytest.mark.parametrize("name", list(SUBCOMMAND))
def test_image_installs_what_the_command_needs(
    compose: dict[str, Any], stages: dict[str, list[str]], name: str
) -> None:
    build = compose["services"][name]["build"]
    context = (COMPOSE.parent / build["context"]).resolve()
    dockerfile = context / build.get("dockerfile", "Dockerfile")
    assert dockerfile.is_file(), f"{dockerfile} referenced by service {name} is missing"
    # A container image per role: the role's own stage of the Dockerfile.
    assert build["target"] == TARGET[SUBCOMMAND[name]], name
    assert build["target"] in stages, f"no stage {build['target']!r} in {dockerfile.name}"
    installed = extra_requirements(stage_extras(stages, build))
    assert NEEDS[SUBCOMMAND[name]] <= installed
    install = pip_install(stages[build["target"]])
    if SUBCOMMAND[name] == "serve":  # a server image stays free of torch
        assert "torch" not in installed and TORCH_CPU_INDEX not in install
        assert DRIVER_NEEDS[db_scheme(parsed(compose["services"][name]).db)] <= installed
    else:  # torch's CPU build: never CUDA's libraries in a CPU agent's image
        assert "--extra-index-url" in install
        assert "TORCH_INDEX_URL" in install
        assert f"ARG TORCH_INDEX_URL={TORCH_CPU_INDEX}" in stages[build["target"]]


def test_services_sharing_an_image_build_it_alike(compose: dict[str, Any]) -> None:
    builds: dict[str, dict[str, Any]] = {}
    for name, service in compose["services"].items():
        if "build" in service:
            built = builds.setdefault(service["image"], service["build"])
            assert built == service["build"], f"{name} builds {service['image']} differently"


def test_dockerfile_has_a_stage_per_role_on_one_base(stages: dict[str, list[str]]) -> None:
    assert not stages[""], f"instructions before the first stage: {stages['']}"
    assert stages["base"][0] == "FROM python:3.11-slim AS base"
    copies = " ".join(line for line in stages["base"] if line.startswith("COPY"))
    assert "constraints.txt" in copies and "pyproject.toml" in copies
    roles = {"server": "server", "agent": "agent", "all": "all"}
    assert set(stages) == {"", "base", *roles}
    for stage, extra in roles.items():
        lines = stages[stage]
        assert lines[0] == f"FROM base AS {stage}"
        assert f"ARG EXTRAS={extra}" in lines
        install = pip_install(lines)
        assert "-c constraints.txt" in install and '".[${EXTRAS}]"' in install
        # Unprivileged after the install; a command line, never an ENTRYPOINT, so that the
        # compose commands are whole `hwnas ...` command lines.
        assert lines.index("USER hwnas") > lines.index(install)
        assert not any(line.startswith("ENTRYPOINT") for line in lines)
        (cmd,) = [line for line in lines if line.startswith("CMD ")]
        argv = json.loads(cmd.removeprefix("CMD "))
        assert argv[0] == "hwnas"
        if "--help" not in argv:  # an agent needs a server and a class: its default is --help
            assert build_parser().parse_args(argv[1:]).command == "serve"
    # The last stage is what a plain `docker build .` gives: everything.
    assert list(stages)[-1] == "all"
    assert "torch==2.13.0" in (REPO / "constraints.txt").read_text().split()


def test_packages_are_copied_and_the_venv_is_not() -> None:
    text = (REPO / "Dockerfile").read_text()
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    # bench is a package for the checkout's benchmarks (an editable install puts it on the
    # path), not a role: the image leaves it out.
    for pattern in (p for p in packages if p != "bench*"):
        assert f"COPY {pattern.rstrip('*')} " in text, pattern
    assert "COPY bench" not in text
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", ".venv"} <= set(ignored)


def test_default_profile_is_the_sqlite_pair(compose: dict[str, Any]) -> None:
    services = compose["services"]
    default = {name for name, service in services.items() if not service.get("profiles")}
    assert default == {"server", "agent"}
    for name in POSTGRES_PROFILE:
        assert services[name]["profiles"] == ["postgres"], name


def test_postgres_service_keeps_its_data_and_reports_health(compose: dict[str, Any]) -> None:
    postgres = compose["services"]["postgres"]
    assert re.fullmatch(r"postgres:16(\.\d+)*(-\w+)?", postgres["image"])
    # The password comes from the environment, with a default for a local try-out.
    assert re.fullmatch(
        r"\$\{HWNAS_PG_PASSWORD:-\w+\}", postgres["environment"]["POSTGRES_PASSWORD"]
    )
    named = {target: source for source, target in mounts(postgres)}
    assert named["/var/lib/postgresql/data"] in (compose.get("volumes") or {})
    check = postgres["healthcheck"]["test"]
    assert check[0] in ("CMD", "CMD-SHELL") and "pg_isready" in " ".join(check[1:])
    assert int(postgres["healthcheck"]["retries"]) > 0
    # Room for several server processes' pools and a load test's clients.
    assert "max_connections=400" in postgres["command"]


def test_server_pg_stores_in_the_postgres_service(compose: dict[str, Any]) -> None:
    services = compose["services"]
    server_pg, env = services["server-pg"], services["postgres"]["environment"]
    url = urlparse(interpolate(parsed(server_pg).db))
    assert url.scheme == "postgresql+psycopg"
    assert url.hostname == "postgres" and url.hostname in services
    assert (url.port or 5432) == 5432
    assert url.username == env["POSTGRES_USER"] and url.path == f"/{env['POSTGRES_DB']}"
    assert url.password == interpolate(env["POSTGRES_PASSWORD"])
    assert server_pg["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "healthz" in " ".join(server_pg["healthcheck"]["test"])
    # Both servers run under --profile postgres: they must not publish the same host port.
    hosts = [
        {str(p).rsplit(":", 1)[0] for p in services[name].get("ports", [])}
        for name in ("server", "server-pg")
    ]
    assert not hosts[0] & hosts[1]


def test_agent_pg_waits_for_a_healthy_server(compose: dict[str, Any]) -> None:
    depends = compose["services"]["agent-pg"]["depends_on"]
    assert depends["server-pg"]["condition"] == "service_healthy"


@pytest.mark.parametrize("name", sorted(AGENT_OF))
def test_agents_and_their_server_share_the_enrollment_token(
    compose: dict[str, Any], name: str
) -> None:
    """The server requires tokens: the agent must enroll with one the server knows
    ($HWNAS_AGENT_TOKEN, which `hwnas serve` adds as an enrollment token), and compose must
    refuse to start without it rather than run agents that cannot register."""
    agent, server = compose["services"][name], compose["services"][AGENT_OF[name]]
    assert "--no-auth" not in command_of(server)
    for service in (agent, server):
        value = service["environment"]["HWNAS_AGENT_TOKEN"]
        assert re.fullmatch(r"\$\{HWNAS_AGENT_TOKEN:\?.+\}", value), value
