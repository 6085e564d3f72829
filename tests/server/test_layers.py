"""The server's layers (server/__init__.py), read from its import statements.

cli -> app -> api -> services -> store: a module imports only its own layer and the layers
below it; `settings` and `errors`, beside the layers, import none of them. Every import counts:
those inside functions and under TYPE_CHECKING too, since they are dependencies all the same.
(tests/test_layering.py checks the packages around the server the same way, by what loads.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "server"
LAYERS = ("store", "services", "api", "app", "cli")  # bottom to top
SHARED = ("settings", "errors")  # beside the layers, importable from all of them
RANK = {"shared": 0} | {layer: i + 1 for i, layer in enumerate(LAYERS)}


def module_name(path: Path) -> str:
    parts = path.relative_to(SERVER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def server_sources() -> dict[str, str]:
    return {module_name(p): p.read_text() for p in sorted(SERVER.rglob("*.py"))}


def layer_of(module: str) -> str:
    """The layer of a module of the server (`server.<layer>...`), 'shared' for the rest."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "shared"


def imported(module: str, source: str) -> set[str]:
    """The modules of the server that `source` imports, at any depth of the file."""
    found: set[str] = set()
    package = module if module.count(".") < 1 else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from server.services import auth` names a module; `from x import Name` its module.
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        found.update(n for n in names if n == "server" or n.startswith("server."))
    return found


def violations(sources: dict[str, str]) -> list[str]:
    """'importer -> imported (its layer above the importer's)' for every upward import."""
    out = []
    for module, source in sources.items():
        mine = layer_of(module)
        for target in sorted(imported(module, source)):
            theirs = layer_of(target)
            if target != "server" and RANK[theirs] > RANK[mine]:
                out.append(f"{module} ({mine}) imports {target} ({theirs})")
    return out


def test_every_module_lives_in_a_layer():
    outside = [
        m
        for m in server_sources()
        if layer_of(m) == "shared" and m not in ("server", *(f"server.{s}" for s in SHARED))
    ]
    assert outside == [], f"put these in one of server/{{{','.join(LAYERS)}}}/: {outside}"


def test_imports_point_down_the_layers():
    assert violations(server_sources()) == []


@pytest.mark.parametrize(
    ("module", "source", "offends"),
    [
        ("server.store.store", "from server.services.engines import EngineCache", True),
        ("server.services.jobs", "def f():\n    from server.api import deps", True),
        ("server.settings", "from server.store.rows import SearchRow", True),
        ("server.app.asgi", "from server.cli.serve import SETTINGS_ENV", True),
        ("server.api.deps", "from ..app import errors", True),
        ("server.services.jobs", "from server.services import searches", False),
        ("server.cli.serve", "from server.app import asgi\nfrom server import errors", False),
        ("server.store.rows", "from archvocab.wire import SearchCreate", False),
    ],
)
def test_the_rule_sees_upward_imports(module, source, offends):
    assert bool(violations({module: source})) is offends


def cycles(sources: dict[str, str]) -> list[list[str]]:
    """Import cycles among the modules of `sources` (packages' own __init__ left out)."""
    graph = {
        m: {t for t in imported(m, s) if t in sources and t != m and not _is_package(t, sources)}
        for m, s in sources.items()
    }
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def _is_package(module: str, sources: dict[str, str]) -> bool:
    return any(m.startswith(module + ".") for m in sources)


def test_no_import_cycles_among_server_modules():
    """A cycle is a layer inside a layer that nobody decided on (lazy imports included)."""
    assert cycles(server_sources()) == []


def test_a_cycle_is_seen():
    sources = {
        "server.store.database": "def f():\n    from server.store.schema import migrate",
        "server.store.schema": "from server.store.database import WRITE",
        "server.store.rows": "",
    }
    assert cycles(sources) == [
        ["server.store.database", "server.store.schema", "server.store.database"]
    ]
