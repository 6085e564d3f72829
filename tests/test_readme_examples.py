"""The README's examples run as written (issue 19): against a real `hwnas serve` with
authentication on and a real agent of the device class the README's own agent line names,
the CLI block line by line, the Python snippet, and every curl POST (none refused 401/403)
with the REST API's read-back block.

What a reader fills in is filled in: the server's port (the README's 8000), the tokens the
server printed (`hwnas_u_...`, here in $HWNAS_TOKEN), the ids of what was just made (search
`3` or `1`, arch id `63a1772376cc9f30`) and `request.json`."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from archvocab.wire import SearchCreate
from hwnas.cli import build_parser
from hwnas.search_request import request_body
from hwnas.testing.agents import start_agent
from hwnas.testing.servers import serve

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[1] / "README.md"
CLI_SECTION = "## The command line and the Python client"
EXAMPLE_ARCH = "63a1772376cc9f30"


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(title + "\n")
    end = text.find("\n## ", start + len(title))
    return text[start : end if end >= 0 else None]


def code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def strip_comment(command: str) -> str:
    """The command without a trailing `# comment` outside quotes."""
    quote = None
    for i, char in enumerate(command):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command.rstrip()


def commands(block: str) -> list[str]:
    """A bash block's commands, each whole: continued lines and quoted JSON joined."""
    found, current = [], ""
    for line in block.splitlines():
        current = f"{current}\n{line}" if current else line
        if current.count("'") % 2 == 0 and not current.endswith("\\"):
            if current.strip():
                found.append(strip_comment(current.strip()))
            current = ""
    return found


def cli_block() -> list[str]:
    """The commands of the CLI section's second bash block: a search, then what to do with it."""
    [_, block, *_] = code_blocks(section(CLI_SECTION), "bash")
    return commands(block)


def bash(command: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )


def curl(command: str, url: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """A README curl command against `url`: (HTTP status, body)."""
    command = command.replace("localhost:8000", url.removeprefix("http://"))
    done = bash(f"{command} -w '\\n%{{http_code}}'", env, cwd)
    assert done.returncode == 0, f"{command}\n{done.stderr}"
    body, _, status = done.stdout.rpartition("\n")
    return int(status), body


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """The README's set-up block: a server (with authentication), its tokens, and an agent of
    the device class its agent line names."""
    folder = tmp_path_factory.mktemp("readme")
    [setup, *_] = code_blocks(section(CLI_SECTION), "bash")
    lines = commands(setup)
    assert any(c.startswith("hwnas serve ") for c in lines)
    assert "export HWNAS_SERVER=http://127.0.0.1:8000" in lines
    assert any(c.startswith("export HWNAS_TOKEN=hwnas_u_") for c in lines)
    [agent_line] = [c for c in lines if " hwnas agent " in c]
    assert agent_line.startswith("HWNAS_AGENT_TOKEN=hwnas_e_")  # the enrollment token
    words = shlex.split(agent_line)
    device_class = words[words.index("--device-class") + 1]
    with serve(folder, folder / "hwnas.db") as server:
        start_agent(server.procs, "agent", server.url, device_class=device_class)
        env = {
            **os.environ,
            "HWNAS_SERVER": server.url,
            "HWNAS_TOKEN": server.procs.user_token,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }
        yield server, env, device_class


def test_the_cli_block_runs_line_by_line(service, tmp_path):
    server, env, device_class = service
    lines = cli_block()
    first = lines.pop(0)
    assert first.startswith(f"hwnas search start --device-class {device_class} ")
    assert first.endswith(" --wait")
    started = bash(first, env, tmp_path)
    assert started.returncode == 0, started.stderr
    search_id = int(re.match(r"search (\d+) finished", started.stdout).group(1))
    # No terminal here: progress came as lines, not a bar drawn once at the end.
    assert f"search {search_id} running: " in started.stderr
    with server.client() as api:
        front = api.get(f"/api/v1/searches/{search_id}/pareto").json()
    assert front, "nothing on the frontier (every measurement busy?)"
    arch_id = front[0]["arch_id"]
    # The example's latency bound (20 ms) suits a quiet machine; measured on a busy one, every
    # point may lie above it. The bound here is one this frontier meets, so that the commands
    # are tested, not the machine's speed.
    bound = math.ceil(max(p["objectives"]["latency_ms"] for p in front)) + 1
    small = {"device_class": device_class, "budget": {"max_evaluations": 1}}
    (tmp_path / "request.json").write_text(json.dumps(small))
    for line in lines:
        line = re.sub(r"^(hwnas search \w+) 3\b", rf"\g<1> {search_id}", line)
        line = line.replace(EXAMPLE_ARCH, arch_id).replace(EXAMPLE_ARCH[:8], arch_id[:8])
        line = line.replace("--max-latency-ms 20 ", f"--max-latency-ms {bound} ")
        done = bash(line, env, tmp_path)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        if "--file request.json" in line:  # not to keep the agent busy
            other = int(re.match(r"search (\d+) started", done.stdout).group(1))
            with server.client() as api:
                api.post(f"/api/v1/searches/{other}/cancel")
    assert (tmp_path / f"hwnas-{arch_id}.py").exists()


def test_the_python_snippet_runs(service, tmp_path):
    server, env, device_class = service
    [snippet] = code_blocks(section(CLI_SECTION), "python")
    assert f'device_class="{device_class}"' in snippet
    code = snippet.replace("http://127.0.0.1:8000", server.url)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "def build_model" in (tmp_path / "model.py").read_text()
    # The README says its search is the CLI block's first, field for field, so that run after
    # that one the cache answers it.
    cli_args = build_parser().parse_args(shlex.split(cli_block()[0])[1:])
    with server.client() as api:
        newest = max(api.get("/api/v1/searches").json(), key=lambda s: s["id"])
    assert SearchCreate.model_validate(newest["request"]) == SearchCreate.model_validate(
        request_body(cli_args)
    )


def test_every_curl_post_is_authorised_and_the_rest_blocks_run(service, tmp_path):
    server, env, device_class = service
    readme = README.read_text()
    posts = [c for b in code_blocks(readme, "bash") for c in commands(b) if "-X POST" in c]
    assert len(posts) >= 5
    for command in posts:
        assert 'Authorization: Bearer $HWNAS_TOKEN"' in command, command
        if "/searches/1/cancel" in command:
            continue  # below, on the search it cancels
        status, body = curl(command, server.url, env, tmp_path)
        assert status not in (401, 403), f"{command}\n{body}"
        if status == 201:  # cancelled at once, not to keep the agent busy
            with server.client() as api:
                api.post(f"/api/v1/searches/{json.loads(body)['id']}/cancel")
        else:  # an illustration with '...' in its body: refused for that, not for auth
            assert status == 422 and "..." in command, f"{command}\n{status} {body}"
    # The REST API's own example: created, read back, cancelled, as its blocks say.
    rest = section("## The REST API")
    create, read_back = code_blocks(rest, "bash")[:2]
    status, body = curl(commands(create)[0], server.url, env, tmp_path)
    assert status == 201, body
    created = json.loads(body)
    assert created["device_class"] == device_class
    for command in commands(read_back):
        command = command.replace("/searches/1", f"/searches/{created['id']}")
        status, body = curl(command, server.url, env, tmp_path)
        # Nothing measured yet: no point to pick. Every other read answers.
        assert status == 200 or ("/pick?" in command and status == 404), f"{command}\n{body}"
    assert json.loads(body)[0]["device_class"] == device_class  # the agents, last
    with server.client() as api:
        assert api.get(f"/api/v1/searches/{created['id']}").json()["status"] == "cancelled"
