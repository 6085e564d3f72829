"""One architecture as a single Python file that needs only PyTorch: no hwnas, no archvocab.

The file is assembled from this repository's own source, not from a second copy of it: the
kind's builder (`archvocab/spaces/<kind>/build.py`) and the definitions it imports from other
builders, with its spec imports served by the plain stand-ins of
`archvocab.spaces.standalone_specs`, plus the training loop of
`archvocab.spaces.training_build`, copied as text by `archvocab.bundle` with what they use
and the imports they need; a short glue section binds the spec. One code builds the model an
agent measures and the exported one, so their modules and parameter counts agree, and for one
seed hwnas's builder and the file's `build_model` draw the same weights
(tests/archvocab/test_standalone.py runs the file in a venv that has torch and nothing else).

This module reads source files; it never imports torch or a builder.
"""

from __future__ import annotations

import pprint
from collections.abc import Sequence
from string import Template

from archvocab.bundle import Bundle
from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, kind_of_spec

STANDALONE_SPECS = "archvocab.spaces.standalone_specs"
TRAINING = "archvocab.spaces.training_build"
# kind -> the training objective of archvocab.spaces.training_build its forward calls for
OBJECTIVES = {
    "gpt2": "NextTokenLoss",
    "transxl": "NextTokenLoss",
    "nasbench_nlp": "RecurrentNextTokenLoss",
    "flexibert": "MaskedTokenLoss",
}
SELF_CONTAINED_KINDS = tuple(OBJECTIVES)
# The builder's entry points take a spec; the file's own take none, under the builder's names.
_RENAMED = {"build_model": "build_from_spec", "example_inputs": "example_inputs_for"}
_NOT_EXPORTED = {"primer_spec"}  # the agent's runtime warm-up, not the user's business
# The glue's own names: a copied definition must not take one.
_GLUE_NAMES = {"ARCH_ID", "KIND", "DECODER_PARAMS", "TOTAL_PARAMS", "SPEC", "build_model"}
_GLUE_NAMES |= {"example_inputs", "facts", "sys", "torch", "nn"}


def torch_file(spec: ArchSpec, searches: Sequence[int] = ()) -> str:
    """The text of `hwnas-<arch_id>.py` for `spec`: its model classes, `build_model()`,
    `example_inputs()`, a byte-level training loop and a command line (`--help`).

    InvalidSpec naming "format" for a kind without a self-contained form.
    """
    kind = kind_of_spec(spec)
    if kind.name not in OBJECTIVES:
        raise InvalidSpec(
            "format",
            f"kind {kind.name!r} has no self-contained PyTorch file; kinds that have one: "
            f"{', '.join(sorted(OBJECTIVES))}",
        )
    spec_class = type(spec).__name__
    bundle = Bundle(_redirect)
    builder = bundle.module(kind.builder)
    roots = [n for n in builder.order if not n.startswith("_") and n not in _NOT_EXPORTED]
    bundle.need(kind.builder, roots)
    bundle.need(STANDALONE_SPECS, [spec_class])
    bundle.need(TRAINING, ["main", OBJECTIVES[kind.name]])
    bundle.external(("sys", None, "sys"), ("torch", None, "torch"), ("torch", "nn", "nn"))
    longest = spec.max_seq_len
    values = {
        "arch_id": spec.arch_id,
        "kind": kind.name,
        "decoder_params": spec.decoder_params(),
        "total_params": spec.total_params(),
        "searches": ", ".join(map(str, searches)) or "(none)",
        "builder": kind.builder.replace(".", "/") + ".py",
        "spec": pprint.pformat(spec.to_dict(), width=92, sort_dicts=False),
        "spec_class": spec_class,
        "objective": OBJECTIVES[kind.name],
        "example_seq_len": min(64, longest or 64),
        "max_seq_len": longest,
        "vocab_size": spec.to_dict()["vocab_size"],
        "outputs": _OUTPUTS[kind.name],
    }
    return "\n".join(
        [
            _HEADER.substitute(values),
            bundle.imports(),
            _CONSTANTS.substitute(values),
            *bundle.sections({kind.builder: _RENAMED}, reserved=_GLUE_NAMES),
            _GLUE.substitute(values),
        ]
    )


def _redirect(module: str) -> str:
    """Where a definition imported from `module` comes from in the file: the builders'
    torch code as it is, the vocabulary's specs as their stand-ins."""
    if module.rsplit(".", 1)[-1].endswith("build"):
        return module
    if module.startswith("archvocab.spaces."):
        return STANDALONE_SPECS
    raise ValueError(f"a copied definition imports from {module}, which the file cannot hold")


# -- the file around the copied definitions -----------------------------------------------------
_OUTPUTS = {
    "gpt2": "log-probabilities (batch, seq, vocab_size)",
    "transxl": "log-probabilities (batch, seq, vocab_size)",
    "nasbench_nlp": "log-probabilities (batch, seq, vocab_size) and the next states; "
    "forward(tokens, states), the zero states are example_inputs()[1]",
    "flexibert": "hidden states (batch, seq, hidden_size): put a task head on them",
}

_HEADER = Template('''\
"""hwnas architecture $arch_id ($kind): the untrained PyTorch model and a training loop.

Self-contained: it needs PyTorch only (`pip install torch`), nothing of hwnas.
Decoder parameters: $decoder_params; total parameters: $total_params.
Proposed by hwnas search(es): $searches.

    python hwnas-$arch_id.py                  # build it, print its parameter count
    python hwnas-$arch_id.py train corpus.txt --steps 50 --save model.pt
    python hwnas-$arch_id.py train --help     # batch size, sequence length, device, ...

The training loop reads the text file's bytes as tokens (ids 0-255): enough to see the model
learn; for real work bring your own tokenizer (token ids < $vocab_size) and loop.

From Python:

    import runpy
    exported = runpy.run_path("hwnas-$arch_id.py")
    model = exported["build_model"](seed=0)  # torch.nn.Module, random weights
    outputs = model(*exported["example_inputs"](batch_size=2, seq_len=16))

The forward returns $outputs.

The model code below is hwnas's own, copied unchanged from $builder
and what it imports; `${spec_class}` is a plain stand-in for hwnas's spec class.
"""
''')

_CONSTANTS = Template("""\
ARCH_ID = "$arch_id"
KIND = "$kind"
DECODER_PARAMS = $decoder_params
TOTAL_PARAMS = $total_params
SPEC = $spec

""")

_GLUE = Template('''\
# -- this architecture -------------------------------------------------------------------------
def build_model(seed: int | None = None) -> nn.Module:
    """SPEC's untrained model, randomly initialised (reproducibly when `seed` is given)."""
    if seed is not None:
        torch.manual_seed(seed)
    return build_from_spec($spec_class.from_dict(SPEC))


def example_inputs(
    batch_size: int = 1, seq_len: int = $example_seq_len
) -> tuple[torch.Tensor, ...]:
    """Random inputs for the model's forward, as a tuple of tensors (seeded)."""
    generator = torch.Generator().manual_seed(0)
    return example_inputs_for($spec_class.from_dict(SPEC), batch_size, seq_len, generator)


if __name__ == "__main__":
    facts = {"arch_id": ARCH_ID, "kind": KIND, "total_params": TOTAL_PARAMS}
    facts.update(decoder_params=DECODER_PARAMS, max_seq_len=$max_seq_len, vocab_size=$vocab_size)
    sys.exit(
        main(
            None,
            build_model=build_model,
            example_inputs=example_inputs,
            objective=$objective,
            facts=facts,
        )
    )
''')
