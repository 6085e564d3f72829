"""The activations of a NAS-Bench-NLP model's forward pass, counted from the spec (see
`archvocab.footprint`)."""

from __future__ import annotations

from archvocab.footprint import output_head
from archvocab.spaces.nasbench_nlp.spec import RNNCellSpec


def activations(spec: RNNCellSpec, batch: int, seq: int, head_tokens: int) -> int:
    """An upper bound on the elements alive at once; the head scores `head_tokens` positions."""
    tokens = batch * seq
    widths = spec.layer_widths()
    states = spec.cell.n_states * batch * sum(d_out for _, d_out in widths)
    # every layer's step outputs and their stacked copy (run_layers keeps each layer's)
    outputs = 2 * tokens * sum(d_out for _, d_out in widths)
    step = (len(spec.cell.nodes) + 2) * batch * max(d_out for _, d_out in widths)
    head = output_head(head_tokens, spec.vocab_size, clustered=False)
    return tokens * spec.d_embed + 3 * states + outputs + step + head
