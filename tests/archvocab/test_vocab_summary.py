"""A spec in one line: the fields that describe its shape, per-layer lists as ranges."""

from __future__ import annotations

import random

from archvocab.registry import get_kind, kind_names
from archvocab.summary import QUIET, spec_summary


def test_per_layer_lists_become_ranges_and_fixed_fields_stay_out():
    spec = {
        "kind": "gpt2",
        "n_layer": 3,
        "d_model": 256,
        "d_inner": [512, 1024, 768],
        "n_head": [4, 4, 4],
        "d_embed": 256,
        "div_val": 1,
        "cutoffs": [19997, 39997],
        "vocab_size": 50257,
        "n_positions": 1024,
    }
    assert (
        spec_summary(spec)
        == "n_layer=3 d_model=256 d_inner=512..1024 n_head=4 d_embed=256 div_val=1"
    )


def test_nested_data_and_empty_lists_are_left_out_and_strings_stay():
    spec = {"kind": "x", "cell": "lstm", "gates": {"a": 1}, "skips": [], "names": ["a", "b"]}
    assert spec_summary(spec) == "cell=lstm"


def test_every_space_kinds_samples_summarise_to_their_shape_fields():
    rng = random.Random(0)
    for kind in kind_names():
        space = get_kind(kind).space_type()
        for _ in range(20):
            spec = space.sample(rng).to_dict()
            summary = spec_summary(spec)
            keys = [part.split("=", 1)[0] for part in summary.split()]
            assert keys == [k for k in spec if k not in QUIET and _shown(spec[k])]
            for part in summary.split():
                key, text = part.split("=", 1)
                value = spec[key]
                if isinstance(value, list):
                    lo, hi = min(value), max(value)
                    assert text == (str(lo) if lo == hi else f"{lo}..{hi}")
                else:
                    assert text == str(value)


def _shown(value) -> bool:
    if isinstance(value, dict):
        return False
    if isinstance(value, list):
        return bool(value) and all(isinstance(v, int) for v in value)
    return True
