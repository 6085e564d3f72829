"""Dependency direction: import each package in a fresh interpreter and look at sys.modules.

server -> search, proxies, archvocab; agent -> archvocab (and, inside the process that computes
a job's low-cost proxies only, proxies: agent.proxy_values); search, proxies -> archvocab;
archvocab -> nothing of ours, and no torch (its torch modules, each kind's builder, are
imported on demand).
An edge device installs only the agent extra, so the agent must never pull in the server
stack (FastAPI, SQLAlchemy, pymoo) or the search/proxy libraries.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OURS = ("archvocab", "search", "proxies", "agent", "server", "hwnas")
SERVER_STACK = ("fastapi", "starlette", "sqlalchemy", "uvicorn", "pymoo")

# Imports `package` and every submodule pkgutil finds (minus `skip`), prints what got loaded.
PROBE = """
import importlib, json, pkgutil, sys
name, skip = sys.argv[1], set(sys.argv[2:])
pkg = importlib.import_module(name)
imported = [name]
for info in pkgutil.walk_packages(getattr(pkg, "__path__", []), name + "."):
    if info.name in skip or info.name.rsplit(".", 1)[-1] == "__main__":
        continue
    importlib.import_module(info.name)
    imported.append(info.name)
real = getattr(pkg, "__file__", None) is not None or len(imported) > 1
print(json.dumps({"real": real, "imported": imported, "modules": sorted(sys.modules)}))
"""

# The vocabulary's torch modules are named *build: each space kind's builder
# (archvocab/spaces/<kind>/build.py) and the layers builders share (archvocab/spaces/*_build.py).
BUILDERS = sorted(
    ".".join(p.relative_to(REPO).with_suffix("").parts)
    for p in (REPO / "archvocab").rglob("*build.py")
)

RULES = {
    # package: (submodules not imported, top-level modules that must stay unloaded)
    "archvocab": (BUILDERS, [*OURS[1:], "torch", *SERVER_STACK]),
    "agent": ([], ["server", "search", "proxies", *SERVER_STACK]),
    "proxies": ([], ["server", "agent", "fastapi", "starlette", "sqlalchemy"]),
    # The server runs on machines without torch: it only counts parameters analytically.
    "server": ([], ["agent", "torch"]),
    "search": ([], ["server", "agent", "torch", "fastapi", "starlette", "sqlalchemy"]),
    # The CLI imports a role only when its command runs. hwnas.proxies_cli is the `hwnas
    # proxies` command itself (imported on dispatch, as server and agent commands are): it is
    # where the CLI meets the proxies library. hwnas.testing starts servers as processes and
    # imports none of the roles, so it stays in the probe.
    "hwnas": (
        ["hwnas.proxies_cli"],
        ["server", "agent", "search", "proxies", "torch", *SERVER_STACK],
    ),
    "hwnas.proxies_cli": ([], ["server", "agent", "search", *SERVER_STACK]),
}


@functools.cache
def run_probe(package: str, skip: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, package, *skip],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=180,
    )


def probe(package: str, skip: list[str]) -> dict:
    proc = run_probe(package, tuple(skip))
    if proc.returncode and f"No module named '{package}'" in proc.stderr:
        pytest.skip(f"package {package} does not exist yet")
    assert proc.returncode == 0, f"importing {package} failed:\n{proc.stderr}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if not result["real"]:
        pytest.skip(f"package {package} has no modules yet")
    return result


def loaded(modules: list[str], top_level: str) -> list[str]:
    return [m for m in modules if m == top_level or m.startswith(top_level + ".")]


@pytest.mark.parametrize("package", list(RULES))
def test_package_loads_only_what_it_may(package: str) -> None:
    skip, forbidden = RULES[package]
    result = probe(package, skip)
    offenders = {name: loaded(result["modules"], name) for name in forbidden}
    offenders = {name: mods[:5] for name, mods in offenders.items() if mods}
    assert offenders == {}, f"{package} ({', '.join(result['imported'])}) loaded {offenders}"


def test_agent_probe_covers_its_modules() -> None:
    result = probe("agent", [])
    expected = {"agent.cli", "agent.worker", "agent.measure", "agent.client"}
    present = {m for m in expected if (REPO / "agent" / f"{m.split('.')[1]}.py").exists()}
    assert present <= set(result["imported"])


def test_builders_are_found() -> None:
    # an empty list would make the archvocab rule above pass without checking a thing
    assert "archvocab.spaces.gpt2.build" in BUILDERS and len(BUILDERS) >= 5


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_builder_brings_torch_but_nothing_else_of_ours(builder: str) -> None:
    pytest.importorskip("torch", reason="the builders need torch")
    result = probe(builder, [])
    assert loaded(result["modules"], "torch")
    for name in [*OURS[1:], *SERVER_STACK]:
        assert not loaded(result["modules"], name), name


def test_hwnas_help_works() -> None:
    commands = [[sys.executable, "-m", "hwnas", "--help"]]
    script = Path(sys.executable).with_name("hwnas")
    if script.exists():
        commands.append([str(script), "--help"])
    for command in commands:
        proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("usage: hwnas")
        for sub in ("serve", "demo", "agent", "proxies"):
            assert sub in proc.stdout
