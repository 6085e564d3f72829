"""The space kinds over the API: listing them, and checking a spec against a space."""

from __future__ import annotations

import random

import pytest

from archvocab.registry import kind_names, parse_space
from tests.factories import TINY_SPACE


def test_every_registered_kind_is_listed_with_its_defaults(client):
    listed = client.get("/api/v1/spaces").json()
    assert [k["name"] for k in listed] == kind_names()
    gpt2 = listed[0]
    assert gpt2["runtimes"] == ["torch", "onnxruntime"] and gpt2["layer_scaled_baseline"]
    assert gpt2["defaults"] == parse_space({}).to_dict()


def test_a_member_spec_is_checked_with_its_id_and_counts(client):
    space = parse_space(TINY_SPACE)
    spec = space.sample(random.Random(3))
    response = client.post(
        "/api/v1/spaces/check", json={"space": TINY_SPACE, "spec": spec.to_dict()}
    )
    assert response.status_code == 200, response.text
    assert response.json() == {
        "kind": "gpt2",
        "arch_id": spec.arch_id,
        "decoder_params": spec.decoder_params(),
        "total_params": spec.total_params(),
        "member": True,
    }


def _spec(**changes):
    spec = parse_space(TINY_SPACE).sample(random.Random(3)).to_dict()
    spec.update(changes)
    return spec


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        (_spec(d_model=192), "spec.d_model", "not in [64, 128]"),
        (_spec(vocab_size=2000), "spec.vocab_size", "not allowed here"),
        (_spec(n_head=[3, 3, 3][: _spec()["n_layer"]]), "spec.n_head", "divide d_model"),
        (_spec(kind="transxl"), "spec.kind", "does not belong to space kind 'gpt2'"),
        (_spec(n_layer=[2]), "spec.n_layer", "must be an integer"),
        ({"kind": "gpt2"}, "spec.n_layer", "is required"),
    ],
)
def test_a_spec_outside_the_space_is_refused_naming_the_field(client, spec, field, reason):
    response = client.post("/api/v1/spaces/check", json={"space": TINY_SPACE, "spec": spec})
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["field"] == field and reason in body["detail"], body
