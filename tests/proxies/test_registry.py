"""The registry against the catalogue and the modules that implement it: every catalogued
name scores every kind it claims, through the registry, as a search's agent would call it."""

from __future__ import annotations

import importlib
import math
import random

import pytest

from archvocab.errors import InvalidSpec
from archvocab.proxy_catalog import PROXY_CATALOG
from archvocab.registry import kind_names, parse_space
from proxies.inputs import ProxyInputs
from proxies.registry import PROXIES, TFNAS_MODULES, get_proxy
from tests.factories import TINY_SPACES

torch = pytest.importorskip("torch", reason="low-cost proxies run the model")

SMALL = ProxyInputs(batch_size=3, seq_len=8, seed=1)


def test_every_catalogued_name_is_implemented_with_its_cost_and_kinds() -> None:
    assert list(PROXIES) == list(PROXY_CATALOG)
    for name, entry in PROXY_CATALOG.items():
        assert PROXIES[name].cost == entry.cost and PROXIES[name].kinds == entry.kinds
        assert PROXIES[name].description


@pytest.mark.parametrize("module", list(TFNAS_MODULES))
def test_each_tfnas_module_defines_what_the_catalogue_routes_to_it(module: str) -> None:
    defined = importlib.import_module(module).DEFINED
    kinds = set(TFNAS_MODULES[module])
    routed = {
        name
        for name, entry in PROXY_CATALOG.items()
        if name in PROXIES
        and PROXIES[name].compute.__qualname__.startswith("_by_kind")
        and kinds & set(entry.kinds or kind_names())
    }
    assert set(defined) == routed
    for name, (_, module_kinds) in defined.items():
        assert set(module_kinds) == kinds, name


CASES = [
    (name, kind)
    for name, proxy in PROXIES.items()
    if proxy.cost == "low"
    for kind in (proxy.kinds or kind_names())
]


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_every_low_cost_proxy_scores_each_kind_it_claims(name: str, kind: str) -> None:
    spec = parse_space(TINY_SPACES[kind]).sample(random.Random(name))
    value = get_proxy(name).score(spec, SMALL)
    assert isinstance(value, float) and math.isfinite(value)
    assert get_proxy(name).score(spec, SMALL) == value  # one seed, one value


@pytest.mark.parametrize(
    "name", [n for n, p in PROXIES.items() if p.kinds and set(kind_names()) - set(p.kinds)]
)
def test_a_kind_a_proxy_does_not_claim_is_refused_naming_the_kinds(name: str) -> None:
    proxy = get_proxy(name)
    other = next(k for k in kind_names() if k not in proxy.kinds)
    spec = parse_space(TINY_SPACES[other]).sample(random.Random(0))
    with pytest.raises(InvalidSpec) as info:
        proxy.score(spec, SMALL)
    assert info.value.field == "proxy"
    assert f"it applies to: {', '.join(proxy.kinds)}" in info.value.message
