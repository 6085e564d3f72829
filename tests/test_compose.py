"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

Each service's command must be a real `hwnas` command line (it is parsed with the CLI's own
parser), the agent must point at the server service, and the image must install the
project with the role's extra under constraints.txt.
"""

from __future__ import annotations

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
SUBCOMMAND = {"server": "serve", "agent": "agent"}
# What a role's command imports at run time, so its image's extra must provide it.
NEEDS = {"serve": {"fastapi", "uvicorn", "sqlalchemy"}, "agent": {"torch", "httpx"}}


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


def extra_requirements(extra: str) -> set[str]:
    """Distribution names an extra installs, following self-references like hwnas[a,b]."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extra in extras, f"unknown extra {extra!r}; pyproject has {sorted(extras)}"
    names: set[str] = set()
    for requirement in extras[extra]:
        nested = re.fullmatch(r"hwnas\[(.+)\]", requirement)
        if nested:
            for inner in nested.group(1).split(","):
                names |= extra_requirements(inner.strip())
        else:
            names.add(re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower())
    return names


def test_both_services_exist(compose: dict[str, Any]) -> None:
    assert {"server", "agent"} <= set(compose["services"])


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


def test_agent_points_at_the_server_service(compose: dict[str, Any]) -> None:
    services = compose["services"]
    agent, server = parsed(services["agent"]), parsed(services["server"])
    url = urlparse(agent.server)
    assert url.scheme == "http"
    assert url.hostname == "server" and url.hostname in services
    assert url.port == server.port
    assert agent.device_class == "cpu"
    depends = services["agent"]["depends_on"]
    assert "server" in (depends if isinstance(depends, list) else list(depends))


@pytest.mark.parametrize("name", list(SUBCOMMAND))
def test_image_installs_what_the_command_needs(compose: dict[str, Any], name: str) -> None:
    build = compose["services"][name]["build"]
    context = (COMPOSE.parent / build["context"]).resolve()
    dockerfile = context / build.get("dockerfile", "Dockerfile")
    assert dockerfile.is_file(), f"{dockerfile} referenced by service {name} is missing"
    extra = build["args"]["EXTRAS"]
    assert NEEDS[SUBCOMMAND[name]] <= extra_requirements(extra)
    if name == "server":  # the server image stays free of torch
        assert "torch" not in extra_requirements(extra)


def test_dockerfile_installs_with_constraints() -> None:
    text = (REPO / "Dockerfile").read_text()
    instructions = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert instructions[0] == "FROM python:3.11-slim"
    assert any(re.fullmatch(r"ARG EXTRAS(=\w+)?", line) for line in instructions)
    copies = " ".join(line for line in instructions if line.startswith("COPY"))
    assert "constraints.txt" in copies and "pyproject.toml" in copies
    (install,) = [line for line in instructions if "pip install" in line]
    assert "-c constraints.txt" in install
    assert '".[${EXTRAS}]"' in install
    assert "https://download.pytorch.org/whl/cpu" in text and "--extra-index-url" in install
    # The compose commands are whole `hwnas ...` command lines.
    assert not any(line.startswith("ENTRYPOINT") for line in instructions)
    assert "torch==2.13.0" in (REPO / "constraints.txt").read_text().split()


def test_packages_are_copied_and_the_venv_is_not() -> None:
    text = (REPO / "Dockerfile").read_text()
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    for pattern in packages:
        assert f"COPY {pattern.rstrip('*')} " in text, pattern
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", ".venv"} <= set(ignored)
