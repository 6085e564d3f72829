"""NAS-Bench-NLP's recurrent cells in their language model, kind "nasbench_nlp".

- `graph`: the cell as a graph (`CellGraph`): parsing, validation, canonical form;
- `spec`: `RNNCellSpec`, a cell in its language model, and its parameter counts;
- `edit`: random cells and the graph edits of the space's operators;
- `space`: `RNNCellSpace`, sampling, mutation, crossover, membership;
- `footprint`: its activations in one forward pass, counted (`archvocab.footprint`);
- `build` (torch, imported on demand): the model and its measurement input.

`KIND` below is what `archvocab.registry` finds by the name.
"""

from __future__ import annotations

from archvocab.registry import SpaceKind
from archvocab.spaces.nasbench_nlp.footprint import activations
from archvocab.spaces.nasbench_nlp.space import RNNCellSpace
from archvocab.spaces.nasbench_nlp.spec import SPEC_KIND, RNNCellSpec

KIND = SpaceKind(
    name=SPEC_KIND,
    spec_type=RNNCellSpec,
    space_type=RNNCellSpace,
    builder="archvocab.spaces.nasbench_nlp.build",
    runtimes=("torch", "onnxruntime"),
    activations=activations,
    summary="NAS-Bench-NLP's recurrent cells (linear, activations, element-wise ops, blend) "
    "in a 3-layer AWD-LSTM-style language model with a tied decoder",
)
