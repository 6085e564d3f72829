"""The spec classes as a self-contained PyTorch export needs them: plain data read from a
canonical spec dict, with the fields and derived values the builders (`<kind>/build.py`) read.

`archvocab.standalone` copies these definitions into the exported file, under the names the
builders import, so the builders' own code runs there unchanged without hwnas. They do not
validate and have no identity: hwnas parsed and validated the spec before exporting it. The
standard library only; tests/archvocab/test_standalone.py checks them against the real specs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def _plain(data: Mapping[str, Any]) -> dict[str, Any]:
    """A canonical spec dict as constructor arguments: lists become tuples, no "kind"."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "kind"}


@dataclass(frozen=True)
class GPT2Spec:
    """A GPT-2 decoder's shape (hwnas: archvocab.spaces.gpt2.spec.GPT2Spec)."""

    n_layer: int
    d_model: int
    d_inner: tuple[int, ...]
    n_head: tuple[int, ...]
    d_embed: int
    div_val: int = 1
    cutoffs: tuple[int, ...] = (19997, 39997)
    vocab_size: int = 50257
    n_positions: int = 1024

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GPT2Spec:
        return cls(**_plain(data))

    @property
    def max_seq_len(self) -> int:
        return self.n_positions

    def embedding_widths(self) -> list[int]:
        """Embedding width of each adaptive cluster (head cluster first)."""
        return [self.d_embed // self.div_val**i for i in range(len(self.cutoffs) + 1)]


@dataclass(frozen=True)
class TransXLSpec:
    """A Transformer-XL decoder's shape (hwnas: archvocab.spaces.transxl.spec.TransXLSpec)."""

    n_layer: int
    d_model: int
    d_inner: tuple[int, ...]
    n_head: tuple[int, ...]
    d_embed: int
    div_val: int = 1
    cutoffs: tuple[int, ...] = (19997, 39997, 199997)
    vocab_size: int = 267736
    tgt_len: int = 192
    mem_len: int = 192
    d_head: tuple[int, ...] = ()
    tie_projs: tuple[bool, ...] = ()
    pre_lnorm: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TransXLSpec:
        return cls(**_plain(data))

    @property
    def max_seq_len(self) -> int:
        return self.tgt_len

    def embedding_widths(self) -> list[int]:
        """Embedding width of each adaptive cluster (head first); div_val 1: one table."""
        return [self.d_embed // self.div_val**i for i in range(len(self.cutoffs) + 1)]

    def head_dims(self) -> tuple[int, ...]:
        """Each layer's head width: d_head, or d_model // n_head where d_head is ()."""
        return self.d_head or tuple(self.d_model // h for h in self.n_head)

    def projection_ties(self) -> tuple[bool, ...]:
        """Per cluster (head first): is its output projection the embedding's?"""
        return self.tie_projs or (False, *[True] * len(self.cutoffs))


@dataclass(frozen=True)
class EncoderLayer:
    """One FlexiBERT encoder layer's genes."""

    operation_type: str
    operation_parameter: str | int
    num_operation_heads: int
    feed_forward_dimension: int
    num_feed_forward: int


@dataclass(frozen=True)
class FlexiBERTSpec:
    """A FlexiBERT encoder's shape (hwnas: archvocab.spaces.flexibert.spec.FlexiBERTSpec)."""

    hidden_size: int
    n_layer: int
    layers: tuple[EncoderLayer, ...]
    vocab_size: int = 30522
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    embedding_size: int = 128

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlexiBERTSpec:
        fields = _plain(data)
        fields["layers"] = tuple(EncoderLayer(**layer) for layer in data["layers"])
        return cls(**fields)

    @property
    def max_seq_len(self) -> int:
        return self.max_position_embeddings


X = "x"  # the cell's input at a time step


def state_input(i: int) -> str:
    return f"h_prev_{i}"


def state_output(i: int) -> str:
    return f"h_new_{i}"


@dataclass(frozen=True)
class CellNode:
    """One node of a recurrent cell: its name, its op and the names of its inputs."""

    name: str
    op: str
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class CellGraph:
    """A NAS-Bench-NLP cell, nodes in the topological order of its canonical recepie."""

    nodes: tuple[CellNode, ...]

    @classmethod
    def from_recepie(cls, recepie: Mapping[str, Any]) -> CellGraph:
        return cls(
            tuple(
                CellNode(name, node["op"], tuple(node["input"])) for name, node in recepie.items()
            )
        )

    @property
    def n_states(self) -> int:
        """How many states the cell carries from step to step (its h_new_i outputs)."""
        return sum(re.fullmatch(r"h_new_(0|[1-9][0-9]*)", n.name) is not None for n in self.nodes)


@dataclass(frozen=True)
class RNNCellSpec:
    """A recurrent cell's language model (hwnas: archvocab.spaces.nasbench_nlp.spec.RNNCellSpec)."""

    cell: CellGraph
    d_embed: int = 400
    d_hidden: int = 600
    n_layer: int = 3
    vocab_size: int = 33278
    tied: bool = True

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RNNCellSpec:
        fields = _plain(data)
        fields["cell"] = CellGraph.from_recepie(data["cell"])
        return cls(**fields)

    @property
    def max_seq_len(self) -> None:
        return None  # a recurrent model reads any length

    def layer_widths(self) -> list[tuple[int, int]]:
        """(input width, hidden width) of each recurrent layer; a tied model's last layer is
        embedding-wide."""
        widths = []
        for i in range(self.n_layer):
            d_in = self.d_embed if i == 0 else self.d_hidden
            tied_last = self.tied and i == self.n_layer - 1
            widths.append((d_in, self.d_embed if tied_last else self.d_hidden))
        return widths
