"""The NAS-Bench-NLP spec (kind "nasbench_nlp"): a recurrent cell in its language model, counted.

A spec is a cell graph (`archvocab.spaces.nasbench_nlp.graph`) plus the language model around it, as
NAS-Bench-NLP trained it on WikiText-2 (AWD-LSTM's model with the cell in place of the LSTM):
an embedding of `d_embed`, `n_layer` recurrent layers of `d_hidden` (a tied model's last
layer is `d_embed` wide so the decoder can share the embedding matrix), a decoder with a bias.

Parameters (they reproduce `num_params` of all 345 models in NAS-Bench-NLP's WikiText-2 logs):
a linear node is one weight matrix per input plus one bias (``d_out x sum(d_in_i) + d_out``);
no other op has parameters; the embedding is ``vocab x d_embed``; the decoder adds its bias
(``vocab``) and, untied, its own ``vocab x last-layer`` matrix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from archvocab.errors import InvalidSpec
from archvocab.identity import SpecIdentity
from archvocab.spaces.nasbench_nlp.graph import CellGraph, X

SPEC_KIND = "nasbench_nlp"
WIKITEXT2_VOCAB = 33278  # AWD-LSTM's WikiText-2 vocabulary (with <eos>), the logs' ntoken
HPARAMS = ("d_embed", "d_hidden", "n_layer", "vocab_size", "tied")


def check_hparams(owner: Any) -> None:
    for name in ("d_embed", "d_hidden", "n_layer", "vocab_size"):
        value = getattr(owner, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidSpec(name, f"must be a positive integer, got {value!r}")
    if not isinstance(owner.tied, bool):
        raise InvalidSpec("tied", f"must be true or false, got {owner.tied!r}")


@dataclass(frozen=True)
class RNNCellSpec(SpecIdentity):
    """A NAS-Bench-NLP cell in its language model; defaults are the WikiText-2 logs' model."""

    cell: CellGraph
    d_embed: int = 400
    d_hidden: int = 600
    n_layer: int = 3
    vocab_size: int = WIKITEXT2_VOCAB
    tied: bool = True
    kind: str = field(default=SPEC_KIND, init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.cell, CellGraph):
            raise InvalidSpec("cell", "must be a CellGraph (RNNCellSpec.from_recepie parses one)")
        check_hparams(self)

    # -- identity -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Canonical plain data: the canonical recepie under "cell", then the model's sizes."""
        return {
            "kind": self.kind,
            "cell": self.cell.to_recepie(),
            **{name: getattr(self, name) for name in HPARAMS},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RNNCellSpec:
        if not isinstance(data, Mapping):
            raise InvalidSpec("spec", f"must be a JSON object, got {type(data).__name__}")
        if data.get("kind", SPEC_KIND) != SPEC_KIND:
            raise InvalidSpec("kind", f"unknown spec kind {data['kind']!r}; allowed: {SPEC_KIND!r}")
        unknown = sorted(set(data) - {"kind", "cell", *HPARAMS})
        if unknown:
            allowed = ", ".join(("cell", *HPARAMS))
            raise InvalidSpec(unknown[0], f"unknown field; allowed fields: {allowed}")
        if "cell" not in data:
            raise InvalidSpec("cell", "is required")
        return cls.from_recepie(data["cell"], **{k: data[k] for k in HPARAMS if k in data})

    @classmethod
    def from_recepie(cls, recepie: Mapping[str, Any] | str, **hparams: Any) -> RNNCellSpec:
        """A spec from a NAS-Bench-NLP recepie (mapping or JSON text) and model sizes."""
        unknown = sorted(set(hparams) - set(HPARAMS))
        if unknown:
            raise InvalidSpec(unknown[0], f"unknown field; allowed: {', '.join(HPARAMS)}")
        return cls(CellGraph.from_recepie(recepie), **hparams)

    @classmethod
    def from_log_entry(cls, entry: Mapping[str, Any]) -> RNNCellSpec:
        """One model of NAS-Bench-NLP's training logs (its recepie, emsize, nhid, nlayers,
        tied; the vocabulary is not logged: WikiText-2's)."""
        if entry.get("model", "CustomRNN") != "CustomRNN":
            raise InvalidSpec("model", f"{entry['model']!r} is not a cell model (CustomRNN)")
        return cls.from_recepie(
            entry["recepie"],
            d_embed=entry["emsize"],
            d_hidden=entry["nhid"],
            n_layer=entry["nlayers"],
            tied=entry["tied"],
        )

    # -- the registry's ArchSpec contract ------------------------------------------------
    @property
    def max_seq_len(self) -> None:
        return None  # a recurrent model reads any length

    def layer_widths(self) -> list[tuple[int, int]]:
        """(input width, hidden width) of each recurrent layer."""
        widths = []
        for i in range(self.n_layer):
            d_in = self.d_embed if i == 0 else self.d_hidden
            tied_last = self.tied and i == self.n_layer - 1
            widths.append((d_in, self.d_embed if tied_last else self.d_hidden))
        return widths

    def decoder_params(self) -> int:
        """The recurrent cells' parameters (no embedding, no decoder)."""
        return sum(cell_params(self.cell, d_in, d_out) for d_in, d_out in self.layer_widths())

    def total_params(self) -> int:
        last = self.layer_widths()[-1][1]
        embedding = self.vocab_size * self.d_embed
        decoder = self.vocab_size + (0 if self.tied else self.vocab_size * last)
        return embedding + self.decoder_params() + decoder


def cell_params(cell: CellGraph, d_in: int, d_hidden: int) -> int:
    """One layer's cell: per linear node, a weight per input and one bias."""
    return sum(
        d_hidden * (sum(d_in if name == X else d_hidden for name in node.inputs) + 1)
        for node in cell.nodes
        if node.op == "linear"
    )
