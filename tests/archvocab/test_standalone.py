"""The self-contained PyTorch file (archvocab.standalone): it needs torch and nothing of ours,
builds the model hwnas builds (same parameter count and, for one seed, the same weights) and
trains it on a text file.

The file runs in a fresh virtual environment whose only packages are torch and what torch
requires (linked in one folder; hwnas, archvocab and everything else absent), as a user's venv
after `pip install torch`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import math
import os
import random
import re
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

from archvocab import standalone
from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, get_kind, kind_names, parse_space, parse_spec
from archvocab.spaces import standalone_specs
from tests.factories import TINY_SPACES

CORPUS = "It was the best of times, it was the worst of times, it was the age of wisdom.\n" * 8


def sampled(kind: str, seed: int, tiny: bool = True) -> ArchSpec:
    space = TINY_SPACES[kind] if tiny else {"kind": kind}
    return parse_space(space).sample(random.Random(seed))


# -- the stand-in specs agree with the real ones --------------------------------------------------
def derived(spec: Any) -> dict[str, Any]:
    """What the builders read of a spec beyond its fields, for the real ones and stand-ins."""
    values: dict[str, Any] = {"max_seq_len": spec.max_seq_len}
    for method in ("embedding_widths", "head_dims", "projection_ties", "layer_widths"):
        if hasattr(spec, method):
            values[method] = list(getattr(spec, method)())
    if hasattr(spec, "cell"):
        values["nodes"] = [(n.name, n.op, n.inputs) for n in spec.cell.nodes]
        values["n_states"] = spec.cell.n_states
    if hasattr(spec, "layers"):
        values["layers"] = [dataclasses.asdict(layer) for layer in spec.layers]
    return values


@pytest.mark.parametrize("kind", kind_names())
@pytest.mark.parametrize("tiny", [True, False])
def test_stand_in_specs_read_what_the_real_specs_say(kind, tiny):
    for seed in range(25):
        spec = sampled(kind, seed, tiny)
        stand_in = getattr(standalone_specs, type(spec).__name__).from_dict(spec.to_dict())
        fields = {
            f.name: getattr(spec, f.name)
            for f in dataclasses.fields(spec)
            if f.name not in ("kind", "cell", "layers")
        }
        assert {k: getattr(stand_in, k) for k in fields} == fields
        assert derived(stand_in) == derived(spec)


def test_every_kind_has_a_self_contained_file():
    assert set(standalone.SELF_CONTAINED_KINDS) == set(kind_names())


def test_a_kind_without_an_objective_is_refused_naming_those_that_have_one(monkeypatch):
    monkeypatch.delitem(standalone.OBJECTIVES, "flexibert")
    with pytest.raises(InvalidSpec) as caught:
        standalone.torch_file(sampled("flexibert", 0))
    assert caught.value.field == "format"
    assert "kind 'flexibert' has no self-contained PyTorch file" in str(caught.value)
    assert "gpt2, nasbench_nlp, transxl" in str(caught.value)


@pytest.mark.parametrize("kind", kind_names())
def test_the_file_copies_the_builder_and_imports_nothing_of_ours(kind):
    spec = sampled(kind, 1)
    text = standalone.torch_file(spec, searches=[3, 7])

    imports = re.findall(r"^(?:from|import) (\S+)", text, flags=re.M)
    assert {name.split(".")[0] for name in imports} <= {
        "__future__", "argparse", "collections", "dataclasses", "math", "pathlib", "re",
        "sys", "time", "typing", "torch",
    }  # fmt: skip
    builder = get_kind(kind).builder
    model_class = type(get_kind(kind).load_builder().build_model(spec)).__name__
    source = Path(sys.modules[builder].__file__).read_text()
    definition = re.search(rf"^class {model_class}\(.*?(?=^\S)", source, flags=re.M | re.S)
    assert definition and definition.group(0).strip() in text  # copied, not rewritten
    assert f'ARCH_ID = "{spec.arch_id}"' in text
    assert f"TOTAL_PARAMS = {spec.total_params()}\n" in text
    assert "search(es): 3, 7." in text and "pip install torch" in text
    compile(text, "hwnas-export.py", "exec")


# -- the file in a virtual environment with torch and nothing else ---------------------------------
def requirement_closure(name: str) -> list[importlib.metadata.Distribution]:
    """`name`'s distribution and those it requires, recursively (extras left out)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [name]
    while todo:
        wanted = re.split(r"[ ;<>=!~\[]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if wanted in found:
            continue
        try:
            dist = importlib.metadata.distribution(wanted)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional or platform-specific requirement not installed here
        found[wanted] = dist
        todo += [r for r in dist.requires or [] if "extra ==" not in r]
    return list(found.values())


@pytest.fixture(scope="module")
def torch_only_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv's interpreter that sees torch, its requirements and nothing else installed."""
    pytest.importorskip("torch", reason="the exported file needs torch")
    root = tmp_path_factory.mktemp("torch-only")
    packages = root / "packages"
    packages.mkdir()
    for dist in requirement_closure("torch"):
        for top in {f.parts[0] for f in dist.files or []} - {"..", "__pycache__"}:
            target = Path(dist.locate_file(top))
            if not top.endswith(".dist-info") and target.exists():
                (packages / top).symlink_to(target)
    assert not {"archvocab", "hwnas", "agent", "server"} & {p.name for p in packages.iterdir()}
    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "torch-only.pth").write_text(f"{packages}\n")
    return python


# Loads the file as a user would and reports what it could import and the weights for seed 0.
PROBE = """
import importlib.util, json, runpy, sys
import torch
exported = runpy.run_path(sys.argv[1])
torch.save(exported["build_model"](seed=0).state_dict(), sys.argv[2])
print(json.dumps({name: importlib.util.find_spec(name) is not None
                  for name in ("archvocab", "hwnas", "agent", "numpy")}))
"""


def run_file(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A user's shell has no PYTHONPATH pointing into this checkout; one set for the suite
    # (e.g. to run a copy of the tree) must not leak hwnas into the torch-only venv.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, cwd=cwd, timeout=300, env=env
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", kind_names())
def test_the_file_builds_hwnas_model_and_trains_with_torch_alone(kind, torch_only_python, tmp_path):
    import torch

    spec = sampled(kind, 2)
    name = f"hwnas-{spec.arch_id}.py"
    (tmp_path / name).write_text(standalone.torch_file(spec))
    (tmp_path / "corpus.txt").write_text(CORPUS)

    probe = run_file(torch_only_python, "-c", PROBE, name, "weights.pt", cwd=tmp_path)
    shown = run_file(torch_only_python, name, cwd=tmp_path)
    trained = run_file(
        torch_only_python, name, "train", "corpus.txt", "--steps", "3", "--batch-size", "2",
        "--seq-len", "16", "--log-every", "1", "--save", "trained.pt", cwd=tmp_path,
    )  # fmt: skip

    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.splitlines()[-1]) == {
        "archvocab": False, "hwnas": False, "agent": False, "numpy": False
    }  # fmt: skip
    torch.manual_seed(0)
    built = get_kind(kind).load_builder().build_model(spec)
    ours = built.state_dict()
    theirs = torch.load(tmp_path / "weights.pt", weights_only=True)
    assert list(theirs) == list(ours)
    assert all(torch.equal(theirs[k], ours[k]) for k in ours), "the same seed, other weights"
    count = sum(p.numel() for p in built.parameters())
    assert count == spec.total_params()

    assert shown.returncode == 0, shown.stderr
    assert f"hwnas architecture {spec.arch_id} ({kind}): {count} parameters" in shown.stdout
    assert "forward pass: tokens (1, 16) -> " in shown.stdout

    assert trained.returncode == 0, trained.stderr
    losses = [float(x) for x in re.findall(r"^step \d+/3  loss (\S+)", trained.stdout, re.M)]
    assert len(losses) == 3, trained.stdout
    # Embeddings re-drawn for training: it starts near a uniform guess, not at hundreds.
    vocab_size = spec.to_dict()["vocab_size"]
    assert all(0 < loss < 1.5 * math.log(vocab_size) for loss in losses), trained.stdout
    assert set(torch.load(tmp_path / "trained.pt", weights_only=True)) == set(ours)


@pytest.mark.slow
def test_the_command_line_explains_itself(torch_only_python, tmp_path):
    spec = parse_spec(sampled("gpt2", 0).to_dict())
    (tmp_path / "model.py").write_text(standalone.torch_file(spec))

    top = run_file(torch_only_python, "model.py", "--help", cwd=tmp_path)
    train = run_file(torch_only_python, "model.py", "train", "--help", cwd=tmp_path)
    too_long = run_file(
        torch_only_python, "model.py", "train", "model.py", "--seq-len", "100000", cwd=tmp_path
    )

    assert top.returncode == 0 and "{train}" in top.stdout
    assert f"hwnas architecture {spec.arch_id} (gpt2)" in top.stdout
    assert train.returncode == 0
    for flag in (
        "--steps",
        "--batch-size",
        "--seq-len",
        "--lr",
        "--device",
        "--save",
        "--builder-init",
    ):
        assert flag in train.stdout
    assert too_long.returncode == 2
    assert f"--seq-len must be between 1 and {spec.max_seq_len}" in too_long.stderr
