"""FlexiBERT's heterogeneous BERT encoder (Training-free NAS, Table 1), kind "flexibert".

- `spec`: `FlexiBERTSpec` (per-layer `EncoderLayer`s) and its analytic parameter counts;
- `space`: `FlexiBERTSpace`, the benchmark's grid;
- `footprint`: its activations in one forward pass, counted (`archvocab.footprint`);
- `build` (torch, imported on demand): the encoder and its measurement input.

`KIND` below is what `archvocab.registry` finds by the name.
"""

from __future__ import annotations

from archvocab.registry import SpaceKind
from archvocab.spaces.flexibert.footprint import activations
from archvocab.spaces.flexibert.space import FlexiBERTSpace
from archvocab.spaces.flexibert.spec import SPEC_KIND, FlexiBERTSpec

KIND = SpaceKind(
    name=SPEC_KIND,
    spec_type=FlexiBERTSpec,
    space_type=FlexiBERTSpace,
    builder="archvocab.spaces.flexibert.build",
    runtimes=("torch", "onnxruntime"),
    activations=activations,
    summary="FlexiBERT's heterogeneous BERT encoder (Training-free NAS, Table 1): per-layer "
    "attention, Fourier/cosine mixing or dynamic convolution, heads and feed-forward stacks",
)
