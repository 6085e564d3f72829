"""deploy/: the systemd unit that runs an agent on a board, and the guide that explains it
(docs/devices.md), checked without systemd running: the unit is parsed (and verified with
`systemd-analyze verify` where that is installed), its ExecStart is parsed with the CLI's own
parser after systemd's substitutions, and the guide's `hwnas agent` lines are real commands."""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.args import AGENT_TOKEN_ENV
from agent.worker import EXIT_REFUSED
from archvocab.wire import MeasurementSettings
from archvocab.wire.searches import SearchCreate
from hwnas.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "deploy" / "hwnas-agent.service"
ENV_EXAMPLE = REPO / "deploy" / "agent.env.example"
GUIDE = REPO / "docs" / "devices.md"
EXIT_BAD_ARGUMENTS = 2  # argparse's, and agent.cli's for invalid values


def read_unit(text: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(interpolation=None, strict=True)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    unit.read_string(text)
    return unit


@pytest.fixture(scope="module")
def unit() -> configparser.ConfigParser:
    return read_unit(UNIT.read_text())


def env_example() -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in ENV_EXAMPLE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    return {key.strip(): value.strip() for key, value in pairs}


def exec_argv(unit: configparser.ConfigParser, env: dict[str, str], host: str) -> list[str]:
    """ExecStart as systemd runs it: ${VAR} from the EnvironmentFile, %H the host name."""
    line = unit["Service"]["ExecStart"]
    missing = set(re.findall(r"\$\{(\w+)\}", line)) - set(env)
    assert not missing, f"ExecStart uses {missing}, which {ENV_EXAMPLE.name} does not set"
    line = re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], line).replace("%H", host)
    return shlex.split(line)


def test_exec_start_is_a_real_agent_command(unit: configparser.ConfigParser) -> None:
    env = env_example()
    argv = exec_argv(unit, env, "pi5-01")
    assert Path(argv[0]).is_absolute() and Path(argv[0]).name == "hwnas", argv[0]
    args = build_parser().parse_args(argv[1:])  # argparse exits on anything invalid
    assert args.command == "agent"
    assert (args.server, args.device_class, args.name) == (
        env["HWNAS_SERVER"],
        env["HWNAS_DEVICE_CLASS"],
        "pi5-01",
    )
    # The token comes from the environment file, never the command line (`ps` shows that).
    assert args.token is None and "--token" not in argv
    assert AGENT_TOKEN_ENV in env and env[AGENT_TOKEN_ENV].startswith("hwnas_e_")


def test_the_unit_restarts_on_failure_but_not_on_what_restarting_cannot_fix(
    unit: configparser.ConfigParser,
) -> None:
    service = unit["Service"]
    assert service["Restart"] == "on-failure"
    assert int(service["RestartSec"]) >= 1
    prevented = {int(code) for code in service["RestartPreventExitStatus"].split()}
    assert prevented == {EXIT_BAD_ARGUMENTS, EXIT_REFUSED}
    assert unit["Unit"]["StartLimitIntervalSec"] == "0"  # a long server outage: keep trying
    assert service["EnvironmentFile"].startswith("/etc/")
    assert "network-online.target" in unit["Unit"]["After"]
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_stopping_lets_the_current_job_finish(unit: configparser.ConfigParser) -> None:
    """SIGTERM to the agent alone (its measuring child keeps running), and time for a job
    at its default timeout before systemd kills."""
    service = unit["Service"]
    assert service["KillSignal"] == "SIGTERM" and service["KillMode"] == "mixed"
    default_timeout = MeasurementSettings().timeout_s
    assert float(service["TimeoutStopSec"]) > default_timeout


def test_cpu_and_memory_settings(unit: configparser.ConfigParser) -> None:
    service = unit["Service"]
    assert int(service["Nice"]) < 0
    # A child killed by the OOM killer is the agent's out_of_memory failure, not the unit's end.
    assert service["OOMPolicy"] == "continue"
    assert re.fullmatch(r"\d+%", service["MemoryMax"])
    # Threads come from each search's settings (the measuring process sets them itself).
    assert "OMP_NUM_THREADS" not in service.get("Environment", "")
    assert "OMP_NUM_THREADS" not in env_example()


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_systemd_verifies_the_unit(tmp_path: Path) -> None:
    """`systemd-analyze verify` with the paths of this machine: ExecStart must be executable
    and every key known to systemd (unknown keys are warnings: the test wants none)."""
    hwnas = Path(sys.executable).with_name("hwnas")
    if not hwnas.exists():
        pytest.skip(f"{hwnas} is not installed")
    env_file = tmp_path / "agent.env"
    env_file.write_text(ENV_EXAMPLE.read_text())
    text = UNIT.read_text().replace("/opt/hwnas/venv/bin/hwnas", str(hwnas))
    text = text.replace("/etc/hwnas/agent.env", str(env_file))
    copy = tmp_path / "hwnas-agent.service"
    copy.write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert not done.stderr.strip() and not done.stdout.strip(), done.stderr + done.stdout


def test_a_broken_unit_fails_the_checks() -> None:
    text = UNIT.read_text().replace("--device-class", "--device-klass")
    with pytest.raises(SystemExit):
        build_parser().parse_args(exec_argv(read_unit(text), env_example(), "h")[1:])


def guide_agent_lines() -> list[str]:
    """Every `hwnas agent ...` command of the guide's code blocks, continuation lines joined."""
    blocks = re.findall(r"```(\w*)\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    lines = []
    for language, block in blocks:
        if language not in ("bash", "sh", ""):
            continue
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            found = re.search(r"(?:^|\s|/)hwnas agent\b.*", line.split(" #")[0])
            if found:
                lines.append(found.group(0).lstrip("/ "))
    return lines


def test_the_guide_names_the_files_and_its_agent_commands_parse() -> None:
    text = GUIDE.read_text()
    for needed in (
        "deploy/hwnas-agent.service",
        "deploy/agent.env.example",
        "threads",
        "performance",
        "vcgencmd get_throttled",
        "tegrastats",
        "--max-memory-mb",
        AGENT_TOKEN_ENV,
    ):
        assert needed in text, needed
    lines = guide_agent_lines()
    assert len(lines) >= 2 and any("--max-memory-mb" in line for line in lines), lines
    for line in lines:
        argv = shlex.split(line.replace("$(hostname)", "board"))
        build_parser().parse_args(argv[1:])  # exits (fails the test) on an unknown flag


GOVERNOR_UNIT = REPO / "deploy" / "hwnas-cpu-performance.service"


def test_the_governor_unit_sets_performance_on_every_cpu(tmp_path: Path) -> None:
    """Its ExecStart run by sh against a fake /sys/devices/system/cpu of three CPUs."""
    unit = read_unit(GOVERNOR_UNIT.read_text())
    service = unit["Service"]
    assert service["Type"] == "oneshot" and service["RemainAfterExit"] == "yes"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    sysfs = "/sys/devices/system/cpu"
    assert unit["Unit"]["ConditionPathExists"].startswith(sysfs)
    files = []
    for cpu in range(3):
        folder = tmp_path / f"cpu{cpu}" / "cpufreq"
        folder.mkdir(parents=True)
        files.append(folder / "scaling_governor")
        files[-1].write_text("ondemand\n")
    argv = shlex.split(service["ExecStart"].replace(sysfs, str(tmp_path)))
    assert argv[0] == "/bin/sh"
    subprocess.run(argv, check=True, timeout=30)
    assert [f.read_text() for f in files] == ["performance\n"] * 3


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_systemd_verifies_the_governor_unit() -> None:
    done = subprocess.run(
        ["systemd-analyze", "verify", str(GOVERNOR_UNIT)], capture_output=True, text=True
    )
    assert done.returncode == 0 and not (done.stderr + done.stdout).strip(), done.stderr


def test_the_guides_request_sets_threads_as_a_search_accepts_it() -> None:
    (block,) = re.findall(r"```json\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    request = SearchCreate.model_validate_json(block)
    assert request.measurement.threads > 1
