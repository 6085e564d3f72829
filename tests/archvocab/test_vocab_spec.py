"""GPT2Spec: canonical JSON, stable ids, validation messages, LTS configs."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from archvocab.errors import InvalidSpec
from archvocab.registry import parse_spec
from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import DEFAULT_CUTOFFS, GPT2Spec
from hwnas.ground_truth import ground_truth_dir

LTS_DIR = ground_truth_dir() / "lts"
GPT2_LOGS = sorted(LTS_DIR.glob("random_GPT2_*.json"))

BASE: dict[str, Any] = {
    "n_layer": 2,
    "d_model": 128,
    "d_inner": [256, 300],
    "n_head": [2, 8],
    "d_embed": 64,
    "div_val": 2,
    "cutoffs": [200, 500],
    "vocab_size": 1000,
    "n_positions": 64,
}
REQUIRED = ("n_layer", "d_model", "d_inner", "n_head", "d_embed")


def spec_dict(**changes: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(BASE))
    data.update(changes)
    return data


def random_spec(rng: random.Random) -> GPT2Spec:
    """Any self-consistent spec, also far outside the LTS grid (odd widths, no cutoffs...)."""
    n_layer = rng.randint(1, 24)
    head_base = rng.choice([1, 2, 3, 4, 6, 8, 12])
    d_model = head_base * rng.randint(1, 96)
    divisors = [h for h in range(1, d_model + 1) if d_model % h == 0 and h <= 64]
    vocab_size = rng.randint(2, 60000)
    n_cut = rng.randint(0, min(3, vocab_size - 1))
    cutoffs = tuple(sorted(rng.sample(range(1, vocab_size), n_cut)))
    div_val = rng.randint(1, 4)
    d_embed = rng.randint(div_val**n_cut, 2048)
    return GPT2Spec(
        n_layer=n_layer,
        d_model=d_model,
        d_inner=tuple(rng.randint(1, 5000) for _ in range(n_layer)),
        n_head=tuple(rng.choice(divisors) for _ in range(n_layer)),
        d_embed=d_embed,
        div_val=div_val,
        cutoffs=cutoffs,
        vocab_size=vocab_size,
        n_positions=rng.randint(1, 4096),
    )


def random_specs(count: int, seed: int) -> list[GPT2Spec]:
    rng = random.Random(seed)
    space = GPT2Space()
    # Half from anywhere, half from the LTS space itself.
    return [random_spec(rng) if i % 2 else space.sample(rng) for i in range(count)]


# -- canonical JSON and ids ---------------------------------------------------------------
def test_canonical_json_round_trip_over_random_specs() -> None:
    for spec in random_specs(1000, seed=1):
        text = spec.canonical_json()
        again = GPT2Spec.from_dict(json.loads(text))
        assert again == spec
        assert again.arch_id == spec.arch_id
        assert again.canonical_json() == text
        assert parse_spec(spec.to_dict()) == spec


def test_canonical_json_is_sorted_and_compact() -> None:
    spec = GPT2Spec.from_dict(BASE)
    assert spec.canonical_json() == (
        '{"cutoffs":[200,500],"d_embed":64,"d_inner":[256,300],"d_model":128,"div_val":2,'
        '"kind":"gpt2","n_head":[2,8],"n_layer":2,"n_positions":64,"vocab_size":1000}'
    )
    assert spec.arch_id == hashlib.sha256(spec.canonical_json().encode()).hexdigest()[:16]


def test_key_order_and_defaults_do_not_change_the_id() -> None:
    spec = GPT2Spec.from_dict(BASE)
    reordered = dict(reversed(list(BASE.items())))
    assert GPT2Spec.from_dict(reordered).arch_id == spec.arch_id
    implicit = {k: BASE[k] for k in REQUIRED}
    explicit = {
        **implicit,
        "div_val": 1,
        "cutoffs": list(DEFAULT_CUTOFFS),
        "vocab_size": 50257,
        "n_positions": 1024,
        "kind": "gpt2",
    }
    assert GPT2Spec.from_dict(implicit).arch_id == GPT2Spec.from_dict(explicit).arch_id


def test_arch_id_is_stable_across_interpreters() -> None:
    spec = GPT2Spec.from_dict(BASE)
    code = (
        "import json, sys; from archvocab.spaces.gpt2.spec import GPT2Spec; "
        "print(GPT2Spec.from_dict(json.loads(sys.argv[1])).arch_id)"
    )
    ids = set()
    for hash_seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(BASE)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        )
        ids.add(out.stdout.strip())
    assert ids == {spec.arch_id}
    assert GPT2Spec.from_dict(BASE).arch_id == spec.arch_id


def test_different_specs_have_different_ids() -> None:
    specs = set(random_specs(1000, seed=2))
    assert len({spec.arch_id for spec in specs}) == len(specs)
    base = GPT2Spec.from_dict(BASE)
    for field, value in [
        ("d_inner", [256, 301]),
        ("n_head", [8, 2]),
        ("d_embed", 128),
        ("div_val", 1),
        ("cutoffs", [200]),
        ("vocab_size", 1001),
        ("n_positions", 65),
    ]:
        assert GPT2Spec.from_dict(spec_dict(**{field: value})).arch_id != base.arch_id, field


# -- validation -----------------------------------------------------------------------------
BAD_SPECS = [
    # (changes, field, message fragment)
    ({"n_head": [3, 8]}, "n_head", "layer 0: 3 heads must be >= 1 and divide d_model=128"),
    ({"n_head": [2, 0]}, "n_head", "layer 1: 0 heads must be >= 1 and divide d_model=128"),
    ({"d_model": 100}, "n_head", "layer 1: 8 heads must be >= 1 and divide d_model=100"),
    ({"d_inner": [256]}, "d_inner", "needs one value per layer: 2, got 1"),
    ({"n_head": [2, 2, 2]}, "n_head", "needs one value per layer: 2, got 3"),
    ({"n_layer": 3}, "d_inner", "needs one value per layer: 3, got 2"),
    ({"d_inner": [256, 0]}, "d_inner", "every layer's d_inner must be a positive integer"),
    (
        {"cutoffs": [500, 200]},
        "cutoffs",
        "must be strictly ascending and inside (0, vocab_size=1000)",
    ),
    ({"cutoffs": [200, 200]}, "cutoffs", "strictly ascending"),
    ({"cutoffs": [0, 500]}, "cutoffs", "inside (0, vocab_size=1000)"),
    ({"cutoffs": [200, 1000]}, "cutoffs", "inside (0, vocab_size=1000)"),
    ({"vocab_size": 500}, "cutoffs", "inside (0, vocab_size=500)"),
    (
        {"div_val": 16},
        "div_val",
        "d_embed=64 / div_val=16^2 leaves a cluster with no embedding width",
    ),
    ({"n_layer": 0}, "n_layer", "must be a positive integer, got 0"),
    ({"vocab_size": -3}, "vocab_size", "must be a positive integer, got -3"),
    ({"n_positions": 0}, "n_positions", "must be a positive integer, got 0"),
    ({"dropout": 0.1}, "dropout", "unknown field; allowed fields: n_layer, d_model, d_inner"),
    ({"kind": "transxl"}, "kind", "unknown spec kind 'transxl'; allowed: 'gpt2'"),
    ({"n_layer": True}, "n_layer", "must be an integer, got True"),
    ({"d_model": 128.0}, "d_model", "must be an integer, got 128.0"),
    ({"d_embed": "64"}, "d_embed", "must be an integer, got '64'"),
    ({"div_val": None}, "div_val", "must be an integer, got None"),
    ({"d_inner": "256,300"}, "d_inner", "must be a list of integers, got '256,300'"),
    ({"d_inner": 256}, "d_inner", "must be a list of integers, got 256"),
    ({"d_inner": [256, 300.0]}, "d_inner", "must be an integer, got 300.0"),
    ({"n_head": [2, False]}, "n_head", "must be an integer, got False"),
    ({"cutoffs": ["200", "500"]}, "cutoffs", "must be an integer, got '200'"),
]


@pytest.mark.parametrize(("changes", "field", "fragment"), BAD_SPECS)
def test_invalid_specs_name_the_field(changes: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        GPT2Spec.from_dict(spec_dict(**changes))
    assert info.value.field == field
    assert fragment in info.value.message
    assert str(info.value) == f"{field}: {info.value.message}"


@pytest.mark.parametrize("missing", REQUIRED)
def test_missing_required_field(missing: str) -> None:
    data = spec_dict()
    del data[missing]
    with pytest.raises(InvalidSpec) as info:
        GPT2Spec.from_dict(data)
    assert (info.value.field, info.value.message) == (missing, "is required")


@pytest.mark.parametrize("data", [[1, 2], "spec", None])
def test_spec_must_be_an_object(data: Any) -> None:
    with pytest.raises(InvalidSpec) as info:
        GPT2Spec.from_dict(data)
    assert info.value.field == "spec"
    assert "must be a JSON object" in info.value.message


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"n_layer": 2.0}, "n_layer", "must be a positive integer, got 2.0"),
        ({"d_model": False}, "d_model", "must be a positive integer, got False"),
        ({"d_inner": [256, 300]}, "d_inner", "must be a tuple of integers"),
        ({"n_head": (2, 8.0)}, "n_head", "must be a tuple of integers"),
        ({"cutoffs": (True,)}, "cutoffs", "must be a tuple of integers"),
    ],
)
def test_constructor_validates_types(changes: dict[str, Any], field: str, fragment: str) -> None:
    kwargs: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in BASE.items()}
    kwargs.update(changes)
    with pytest.raises(InvalidSpec) as info:
        GPT2Spec(**kwargs)
    assert info.value.field == field
    assert fragment in info.value.message


def test_invalid_spec_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"^n_head: layer 0"):
        GPT2Spec.from_dict(spec_dict(n_head=[3, 8]))


# -- LTS configs ----------------------------------------------------------------------------
needs_lts = pytest.mark.skipif(
    not GPT2_LOGS, reason=f"shared LTS logs not found at {LTS_DIR} (../shared/data/lts)"
)


@needs_lts
@pytest.mark.parametrize("path", GPT2_LOGS, ids=lambda p: p.stem)
def test_every_lts_gpt2_config_loads(path: Path) -> None:
    models = json.loads(path.read_text())["models"]
    assert len(models) == 200
    for model in models:
        config = model["config"]
        spec = GPT2Spec.from_lts_config(config)
        assert spec.n_layer == config["n_layer"] == len(spec.d_inner) == len(spec.n_head)
        assert list(spec.d_inner) == config["d_inner"]
        assert list(spec.n_head) == config["n_head"]
        assert spec.d_embed == (config["d_model"] if config["d_embed"] == -1 else config["d_embed"])
        assert spec.div_val == config["div_val"]
        assert spec.vocab_size == config["n_token"]
        assert spec.n_positions == config["tgt_len"]
        # Cutoffs at or beyond the vocabulary (LTS appends n_token) are dropped.
        assert spec.cutoffs == tuple(c for c in config["cutoffs"] if c < config["n_token"])
        assert GPT2Spec.from_dict(json.loads(spec.canonical_json())) == spec


@needs_lts
def test_lts_cutoffs_per_set() -> None:
    cutoffs = {
        path.stem: {
            GPT2Spec.from_lts_config(m["config"]).cutoffs
            for m in json.loads(path.read_text())["models"]
        }
        for path in GPT2_LOGS
    }
    # wt103 keeps LTS's two clusters; lm1b's word-level cutoffs all lie beyond its
    # 50264-token vocabulary, so its models have a single cluster.
    assert cutoffs == {"random_GPT2_wt103": {(19997, 39997)}, "random_GPT2_lm1b": {()}}
