"""LTS's heterogeneous Transformer-XL, kind "transxl": GPT-2's genes with relative
attention and segment memory.

- `spec`: `TransXLSpec` and its analytic parameter counts;
- `space`: `TransXLSpace`, built on GPT-2's space (`archvocab.spaces.gpt2.space`);
- `footprint`: its activations in one forward pass, counted (`archvocab.footprint`);
- `build` (torch, imported on demand): the model, with GPT-2's adaptive embedding.

`KIND` below is what `archvocab.registry` finds by the name.
"""

from __future__ import annotations

from archvocab.registry import SpaceKind
from archvocab.spaces.transxl.footprint import activations
from archvocab.spaces.transxl.space import TransXLSpace
from archvocab.spaces.transxl.spec import SPEC_KIND, TransXLSpec

KIND = SpaceKind(
    name=SPEC_KIND,
    spec_type=TransXLSpec,
    space_type=TransXLSpace,
    builder="archvocab.spaces.transxl.build",
    runtimes=("torch", "onnxruntime"),
    activations=activations,
    summary="LTS's heterogeneous Transformer-XL: relative attention with segment memory, "
    "per-layer heads and feed-forward width, adaptive input and softmax",
)
