"""Where the published ground-truth data lives: one setting, read here and nowhere else.

The data ships inside the package (`hwnas/ground_truth_data/`: `lts/`, `tfnas/` and
`nasbench-nlp/`, with their licences and a README saying where each file comes from), so
`hwnas proxies validate|correlate` work after `pip install`, from any directory.
`HWNAS_GROUND_TRUTH`, when set, names another folder laid out the same way, and wins. The
loaders (`proxies.ground_truth`) take the folder as an argument: a library reads no
environment. Entry points (`hwnas proxies ...`, the benchmarks) and the tests ask here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

GROUND_TRUTH_ENV = "HWNAS_GROUND_TRUTH"
# The packaged copy (package data of hwnas; see pyproject's [tool.setuptools.package-data]).
PACKAGED_DIR = Path(__file__).resolve().parent / "ground_truth_data"
DEFAULT_DIR = PACKAGED_DIR


class GroundTruthMissing(FileNotFoundError):
    """The ground-truth data is not where the setting says; the message names the setting."""


def ground_truth_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The data folder: $HWNAS_GROUND_TRUTH if set, else the packaged copy; whether or not it
    exists (tests skip on what is missing)."""
    value = environ.get(GROUND_TRUTH_ENV)
    return Path(value).expanduser() if value else DEFAULT_DIR


def require_ground_truth(*parts: str, environ: Mapping[str, str] = os.environ) -> Path:
    """The data folder, or the file or folder `parts` below it; GroundTruthMissing saying
    which setting to change when it is not there."""
    folder = ground_truth_dir(environ)
    path = folder.joinpath(*parts)
    if not path.exists():
        layout = "the folder holding lts/, tfnas/ and nasbench-nlp/"
        if environ.get(GROUND_TRUTH_ENV):
            fix = f"${GROUND_TRUTH_ENV} is {folder}; set it to {layout}"
        else:
            fix = (
                f"the package's own copy in {folder} is incomplete; reinstall hwnas, or set "
                f"{GROUND_TRUTH_ENV} to {layout}"
            )
        raise GroundTruthMissing(f"ground-truth data not found: {path} does not exist ({fix})")
    return path
