"""One package per space kind, named after the kind: `archvocab/spaces/<kind>/`.

A kind's package holds its torch-free `spec` (the architecture, its validation, identity and
analytic counts; GPT-2 keeps its counts in `counts`), its `space` (sampling, mutation,
crossover, membership), its `footprint` (the activations of a forward pass, counted) and its
torch `build` (the model and its measurement input, imported only where models are built); its
`__init__` defines `KIND`, the `archvocab.registry.SpaceKind` that ties them together. Adding a
kind is a package here and one line in `archvocab.registry._KIND_MODULES`.

`attention_build` holds the torch layers several builders share. Every torch module here is
named *build, so that importing the vocabulary never imports torch (tests/test_layering.py).
"""
