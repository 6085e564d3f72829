"""The architecture vocabulary every hwnas package speaks: specs, spaces, builders, wire schemas.

Imports nothing else of hwnas. `archvocab.build` needs torch and is imported on demand.
"""

from archvocab.errors import HwnasError, InvalidSpec
from archvocab.space import GPT2Space
from archvocab.spec import GPT2Spec, parse_spec

__all__ = ["GPT2Space", "GPT2Spec", "HwnasError", "InvalidSpec", "parse_spec"]
