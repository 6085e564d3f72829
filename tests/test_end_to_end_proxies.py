"""A low-cost proxy as a search objective end to end: a real server, a real agent process
that measures each candidate and computes its proxy in a process of its own, and values
that equal what `proxies` computes here for the same spec and minibatch."""

from __future__ import annotations

import math

import pytest
from test_end_to_end import one_agent_service, run_search

from archvocab.registry import parse_spec
from tests.factories import TINY_SPACES, search_request

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch", reason="the agent builds models")


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """One server and one agent for the whole module: (base URL, processes)."""
    url, procs = one_agent_service(tmp_path_factory.mktemp("proxies"))
    yield url, procs
    procs.stop_all()


@pytest.mark.parametrize("kind", ["gpt2", "transxl"])
def test_a_search_optimising_snip_gets_it_from_the_agents(service, kind) -> None:
    from proxies.inputs import ProxyInputs
    from proxies.registry import get_proxy

    url, procs = service
    batch = {"batch_size": 2, "seq_len": 8, "seed": 3}
    request = search_request(
        space=TINY_SPACES[kind],
        objectives=["snip", "latency_ms", "memory_mb"],
        proxy_inputs=batch,
        budget={"max_evaluations": 4},
        population={"initial": 4, "parents": 2, "mutations": 2, "crossovers": 2},
    )
    for c in run_search(url, procs, request, budget=4):
        reported = c["objectives"]["snip"]
        assert math.isfinite(reported) and reported > 0
        assert c["measurement"]["proxy_inputs"] == "random:2x8:seed3"
        assert c["measurement"]["details"]["proxies_s"] > 0
        here = get_proxy("snip").score(parse_spec(c["spec"]), ProxyInputs(**batch))
        assert reported == pytest.approx(here, rel=1e-5)
