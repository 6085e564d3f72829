"""The vocabulary's memory footprint of a spec, counted without building it."""

from __future__ import annotations

import pytest

from archvocab import footprint
from archvocab.registry import kind_names, parse_spec

GPT2 = {"n_layer": 1, "d_model": 64, "d_inner": [128], "n_head": [2], "d_embed": 64}


def test_every_registered_kind_has_an_activation_estimate_of_its_own() -> None:
    # Without one a kind falls back to "as much as its weights": give its KIND `activations`
    # (archvocab/spaces/<kind>/footprint.py).
    assert sorted(footprint.estimated_kinds()) == sorted(kind_names())


@pytest.mark.parametrize("element_bytes", [2, 4])
def test_weight_bytes_are_the_analytic_parameter_count(element_bytes: int) -> None:
    spec = parse_spec(GPT2)
    assert footprint.weight_bytes(spec, element_bytes) == spec.total_params() * element_bytes


def test_the_output_head_dominates_a_language_models_activations() -> None:
    spec = parse_spec({**GPT2, "cutoffs": []})
    tokens = 4 * 128
    elements = footprint.activation_elements(spec, 4, 128)
    assert 3 * tokens * spec.vocab_size < elements < 4 * tokens * spec.vocab_size
    assert footprint.activation_bytes(spec, 4, 128) == 4 * elements
