"""The architecture vocabulary every hwnas package speaks: specs, spaces, builders, wire schemas.

- a core: `errors` (the exception tree), `identity` (canonical JSON, arch ids, membership),
  `grid` (ranges shared by spaces), `registry` (space kinds by name and the Protocols they
  keep), `footprint` (a spec's memory, counted), `proxy_catalog` (proxy names and costs),
  `json_value` (bounded JSON);
- `spaces/<kind>/`: one package per space kind (its spec, space, counts and torch builder);
- `wire/`: the HTTP schemas of the server, the agents and clients.

Imports nothing else of hwnas, and no torch: the builders (`archvocab/spaces/*/build.py`) are
imported on demand.
"""

from archvocab.errors import HwnasError, InvalidSpec
from archvocab.registry import parse_spec
from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec

__all__ = ["GPT2Space", "GPT2Spec", "HwnasError", "InvalidSpec", "parse_spec"]
