"""Where the published ground-truth data lives: one setting, read here and nowhere else.

`HWNAS_GROUND_TRUTH` names the folder that holds `lts/`, `tfnas/` and `nasbench-nlp/` (LTS's
training logs, the FlexiBERT benchmark, NAS-Bench-NLP); unset, it is `../shared/data` beside
this checkout, where the workplace keeps the data read-only. The loaders
(`proxies.ground_truth`) take the folder as an argument: a library reads no environment.
Entry points (`hwnas proxies ...`, the benchmarks) and the tests ask here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

GROUND_TRUTH_ENV = "HWNAS_GROUND_TRUTH"
# <checkout>/../shared/data: hwnas/ is one level below the checkout.
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"


class GroundTruthMissing(FileNotFoundError):
    """The ground-truth data is not where the setting says; the message names the setting."""


def ground_truth_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The data folder, whether or not it exists (tests skip on what is missing)."""
    value = environ.get(GROUND_TRUTH_ENV)
    return Path(value).expanduser() if value else DEFAULT_DIR


def require_ground_truth(*parts: str, environ: Mapping[str, str] = os.environ) -> Path:
    """The data folder, or the file or folder `parts` below it; GroundTruthMissing saying
    which setting to change when it is not there."""
    folder = ground_truth_dir(environ)
    path = folder.joinpath(*parts)
    if not path.exists():
        origin = f"${GROUND_TRUTH_ENV}" if environ.get(GROUND_TRUTH_ENV) else "the default"
        raise GroundTruthMissing(
            f"ground-truth data not found: {path} does not exist ({origin} puts the data in "
            f"{folder}); set {GROUND_TRUTH_ENV} to the folder holding lts/, tfnas/ and "
            "nasbench-nlp/"
        )
    return path
