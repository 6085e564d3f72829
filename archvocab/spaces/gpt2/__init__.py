"""LTS's heterogeneous GPT-2 decoder, kind "gpt2".

- `spec`: `GPT2Spec`, one architecture: validation, canonical form, identity;
- `counts`: its analytic parameter counts (no model built);
- `space`: `GPT2Space`, the grid with sampling, mutation, crossover, membership and the
  layer-scaled baseline;
- `footprint`: its activations in one forward pass, counted (`archvocab.footprint`);
- `build` (torch, imported on demand): the model and its measurement input.

`KIND` below is what `archvocab.registry` finds by the name.
"""

from __future__ import annotations

from archvocab.registry import SpaceKind
from archvocab.spaces.gpt2.footprint import activations
from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec

KIND = SpaceKind(
    name="gpt2",
    spec_type=GPT2Spec,
    space_type=GPT2Space,
    builder="archvocab.spaces.gpt2.build",
    runtimes=("torch", "onnxruntime"),
    activations=activations,
    summary="LTS's heterogeneous GPT-2 decoder: per-layer heads and feed-forward width, "
    "adaptive input and softmax",
)
