"""hwnas.ground_truth: the published data ships inside the package, and one setting can point
elsewhere. The wheel carries every data file with its licence, and an installed copy finds
the data from any directory, without this checkout or ../shared."""

from __future__ import annotations

import filecmp
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hwnas.ground_truth import (
    DEFAULT_DIR,
    GROUND_TRUTH_ENV,
    PACKAGED_DIR,
    GroundTruthMissing,
    ground_truth_dir,
    require_ground_truth,
)
from hwnas.proxies_cli import DEFAULT_FILES
from proxies.ground_truth import SETS

REPO = Path(__file__).resolve().parents[2]
# The workplace's read-only copy the packaged one was taken from (absent outside it).
SHARED = REPO.parent / "shared" / "data"
# Each source folder and its licence file (hwnas/ground_truth_data/README.md says which is which).
LICENCES = {
    "lts": "LICENSE-archai",
    "tfnas": "LICENSE",
    "nasbench-nlp": "LICENSE-nas-bench-nlp",
    "nasbench-nlp/wikitext-2": "LICENSE-wikitext",
}


def data_files() -> list[str]:
    """Every shipped file but the licences and the README, relative to the data folder."""
    return sorted(
        path.relative_to(PACKAGED_DIR).as_posix()
        for path in PACKAGED_DIR.rglob("*")
        if path.is_file() and not path.name.startswith(("LICENSE", "README"))
    )


def test_the_default_is_the_packaged_copy() -> None:
    assert ground_truth_dir({}) == DEFAULT_DIR == PACKAGED_DIR
    assert PACKAGED_DIR == REPO / "hwnas" / "ground_truth_data"
    assert PACKAGED_DIR.is_dir()


def test_the_setting_names_another_folder(tmp_path: Path) -> None:
    (tmp_path / "lts").mkdir()
    (tmp_path / "lts" / "x.json").write_text("{}")
    environ = {GROUND_TRUTH_ENV: str(tmp_path)}
    assert ground_truth_dir(environ) == tmp_path
    assert require_ground_truth("lts", "x.json", environ=environ) == tmp_path / "lts" / "x.json"


def test_missing_data_names_the_setting_and_the_path(tmp_path: Path) -> None:
    environ = {GROUND_TRUTH_ENV: str(tmp_path)}
    with pytest.raises(GroundTruthMissing) as info:
        require_ground_truth("lts", "nope.json", environ=environ)
    message = str(info.value)
    assert GROUND_TRUTH_ENV in message and str(tmp_path / "lts" / "nope.json") in message
    assert isinstance(info.value, FileNotFoundError)


def test_a_file_missing_from_the_packaged_copy_says_reinstall() -> None:
    with pytest.raises(GroundTruthMissing) as info:
        require_ground_truth("lts", "nope.json", environ={})
    message = str(info.value)
    assert str(PACKAGED_DIR / "lts" / "nope.json") in message
    assert "reinstall hwnas" in message and GROUND_TRUTH_ENV in message


def test_the_packaged_copy_holds_what_the_commands_read() -> None:
    needed = {file for file, _ in SETS.values()} | {f"lts/{name}" for name in DEFAULT_FILES}
    assert needed <= set(data_files())
    for name in DEFAULT_FILES:
        assert require_ground_truth("lts", name, environ={}).is_file()


def test_every_folder_has_its_licence_and_the_readme_names_every_file() -> None:
    readme = (PACKAGED_DIR / "README.md").read_text()
    folders = {Path(file).parent.as_posix() for file in data_files()}
    assert folders == set(LICENCES)
    for folder, licence in LICENCES.items():
        path = PACKAGED_DIR / folder / licence
        assert path.is_file() and path.stat().st_size > 500, path
        assert f"{folder}/{licence}" in readme
    for file in data_files():
        size = (PACKAGED_DIR / file).stat().st_size
        assert f"`{file}` | {size:,} |" in readme, f"README.md does not list {file} ({size:,})"
    assert "MIT" in (PACKAGED_DIR / "lts" / "LICENSE-archai").read_text()
    assert "Attribution 4.0" in (PACKAGED_DIR / "tfnas" / "LICENSE").read_text()
    assert "Apache License" in (PACKAGED_DIR / "nasbench-nlp" / "LICENSE-nas-bench-nlp").read_text()


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the workplace's copy {SHARED} is absent")
def test_the_packaged_copy_is_the_published_data_unchanged() -> None:
    shared = sorted(
        path.relative_to(SHARED).as_posix()
        for path in SHARED.rglob("*")
        if path.is_file() and path.name != "README.md"
    )
    ours = sorted(set(data_files()) | {f"{f}/{lic}" for f, lic in LICENCES.items()})
    assert set(shared) <= set(ours)
    assert set(ours) - set(shared) == {"nasbench-nlp/wikitext-2/LICENSE-wikitext"}
    _, mismatch, errors = filecmp.cmpfiles(SHARED, PACKAGED_DIR, shared, shallow=False)
    assert not mismatch and not errors


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of the checkout's packages (the build writes
    build/ beside the sources, which must not race other builds in the checkout). With this
    interpreter's setuptools where it has one (offline, fast), else in pip's isolated build
    environment (which fetches setuptools)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for package in ("archvocab", "search", "proxies", "server", "agent", "hwnas", "bench"):
        shutil.copytree(REPO / package, source / package, ignore=ignore)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q"]
    if importlib.util.find_spec("setuptools") is not None:
        command.append("--no-build-isolation")
    command += ["-w", str(tmp / "dist"), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (built,) = (tmp / "dist").glob("hwnas-*.whl")
    return built


def test_the_wheel_ships_every_data_file_with_its_licence(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    prefix = "hwnas/ground_truth_data/"
    assert f"{prefix}README.md" in names
    for file in data_files():
        assert f"{prefix}{file}" in names, f"{file} is not in {wheel.name}"
    for folder, licence in LICENCES.items():
        assert f"{prefix}{folder}/{licence}" in names


def test_an_installed_copy_finds_its_data_from_anywhere(wheel: Path, tmp_path: Path) -> None:
    """Installed from the wheel (not this checkout), run from a folder outside the checkout
    with the setting unset: `hwnas proxies correlate` reads the packaged LTS logs."""
    site = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site)]
    subprocess.run([*install, str(wheel)], check=True, capture_output=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != GROUND_TRUTH_ENV}
    env["PYTHONPATH"] = str(site)  # ahead of the checkout's editable install
    code = "import hwnas.ground_truth as g; print(g.__file__); print(g.ground_truth_dir())"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    module, folder = done.stdout.split()
    assert Path(module).is_relative_to(site) and Path(folder) == site / "hwnas/ground_truth_data"
    done = subprocess.run(
        [sys.executable, "-m", "hwnas", "proxies", "correlate", "--json"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [Path(r["file"]).name for r in results] == list(DEFAULT_FILES)
    assert all(Path(r["file"]).is_relative_to(site) for r in results)
    assert all(r["models"] == 200 and r["rho"] < -0.9 for r in results)
