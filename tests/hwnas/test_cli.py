"""hwnas.cli: the registry of subcommands and the dispatch; each role's arguments, beside the
role, with the defaults of its settings."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agent import args as agent_args
from hwnas import client_args
from hwnas.cli import COMMANDS, build_parser, main
from proxies.inputs import ProxyInputs
from server.settings import Settings

REPO = Path(__file__).resolve().parents[2]
# What `hwnas --help` and `hwnas <command> --help` must not load: they stay fast, and work
# where only one role's extra is installed.
HEAVY = ("torch", "fastapi", "starlette", "sqlalchemy", "uvicorn", "pymoo", "httpx")
ROLES = ("server", "agent", "search", "proxies")
# The role modules `--help` may load: the arguments, and the settings they take defaults from.
HELP_MAY_LOAD = {
    "server",
    "server.settings",
    "server.cli",
    "server.cli.args",
    "agent",
    "agent.args",
}

# Builds the parser, then asks every command (and a few nested ones) for its help.
PROBE = """
import contextlib, io, json, sys
from hwnas.cli import COMMANDS, build_parser
build_parser()
after_build = sorted(sys.modules)
nested = [["token", "create"], ["search", "start"], ["search", "export"], ["proxies", "validate"]]
for argv in [[], *([name] for name in COMMANDS), *nested]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        build_parser().parse_args([*argv, "--help"])
print(json.dumps({"build": after_build, "every --help": sorted(sys.modules)}))
"""


def parse(*argv: str) -> Any:
    return build_parser().parse_args(list(argv))


def test_help_loads_no_heavy_package() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    for stage, modules in loaded.items():
        heavy = [m for m in modules if m.split(".")[0] in HEAVY]
        assert heavy == [], f"{stage} loaded {heavy[:8]}"
    roles = [m for m in loaded["build"] if m.split(".")[0] in ROLES]
    assert roles == [], "building the parser imports no role's arguments"
    roles = {m for m in loaded["every --help"] if m.split(".")[0] in ROLES}
    assert roles <= HELP_MAY_LOAD


def test_every_command_names_functions_that_exist() -> None:
    for name, command in COMMANDS.items():
        for target in (command.arguments, command.run):
            module, func = target.split(":")
            assert callable(getattr(importlib.import_module(module), func)), (name, target)


def test_top_level_help_lists_the_registry(capsys: Any) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse("--help")
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps long help lines
    for name, command in COMMANDS.items():
        assert f"{name} {command.help}" in out


def test_server_defaults_are_its_settings(capsys: Any) -> None:
    settings = Settings()
    serve = parse("serve")
    assert serve.db == settings.database_url
    assert serve.lease_seconds == settings.lease_seconds
    assert int(serve.max_request_mb * 2**20) == settings.max_request_bytes
    for command in ("create --name x", "list", "revoke x"):
        assert parse("token", *command.split()).db == settings.database_url
    with pytest.raises(SystemExit):
        parse("serve", "--help")
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"413 (default {settings.max_request_bytes / 2**20:g})" in help_text


def test_proxy_minibatch_defaults_equal_proxy_inputs(capsys: Any) -> None:
    validate, inputs = parse("proxies", "validate"), ProxyInputs()
    assert (validate.text, validate.batch_size, validate.seq_len, validate.seed) == (
        None,
        inputs.batch_size,
        inputs.seq_len,
        inputs.seed,
    )
    with pytest.raises(SystemExit):
        parse("proxies", "validate", "--help")
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"minibatch rows (default {inputs.batch_size})" in help_text
    assert f"minibatch tokens per row ({inputs.seq_len})" in help_text


def test_values_kept_apart_for_speed_equal_their_source() -> None:
    # Reading these where they live would import httpx and the agent's worker into --help.
    from agent.worker import Worker
    from hwnas import client

    assert client_args.DEFAULT_SERVER == client.DEFAULT_SERVER
    assert client_args.TOKEN_ENV == client.TOKEN_ENV
    wait = inspect.signature(client.Client.wait).parameters["poll_s"]
    assert wait.default == client_args.POLL_INTERVAL_S
    assert parse("search", "wait", "1").poll_interval == wait.default
    assert parse("baseline", "--server", "s", "--device-class", "d").poll_interval == wait.default
    worker = inspect.signature(Worker).parameters["poll_interval"]
    assert worker.default == agent_args.POLL_INTERVAL_S
    assert parse("agent", "--server", "s", "--device-class", "d").poll_interval == worker.default


def test_main_runs_the_registered_function(monkeypatch: Any) -> None:
    seen = []
    role = types.SimpleNamespace(run=lambda args: seen.append(args) or 7)
    monkeypatch.setitem(sys.modules, "fake_role", role)
    monkeypatch.setitem(COMMANDS, "report", COMMANDS["report"]._replace(run="fake_role:run"))
    assert main(["report", "3", "--server", "http://x"]) == 7
    assert [(a.command, a.search_id, a.server) for a in seen] == [("report", 3, "http://x")]


@pytest.mark.parametrize("part", ["arguments", "run"])
def test_a_missing_package_is_a_usage_error(part: str, monkeypatch: Any, capsys: Any) -> None:
    broken = COMMANDS["demo"]._replace(**{part: "no_such_package.mod:f"})
    monkeypatch.setitem(COMMANDS, "demo", broken)
    with pytest.raises(SystemExit) as exit_:
        sys.exit(main(["demo"]))
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        "hwnas demo: a required package is missing (no_such_package); "
        "install the matching extra, e.g. pip install 'hwnas[server]'\n"
    )
