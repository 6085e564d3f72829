"""The arguments of `hwnas proxies correlate|validate` (run by hwnas.proxies_cli).

Apart from hwnas.proxies_cli because that loads the proxies library's scorers and the
published sets' loaders, and `--help` need not. The standard library (and
hwnas.ground_truth, for its setting's name) only.
"""

from __future__ import annotations

import argparse

from hwnas.ground_truth import GROUND_TRUTH_ENV

# proxies.inputs.ProxyInputs's defaults (the settings of data-dependent proxies): importing it
# loads the proxies library, which would double the time of `hwnas proxies --help`.
# tests/hwnas/test_cli.py holds them equal.
BATCH_SIZE, SEQ_LEN, SEED = 4, 32, 0


def proxies_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="proxies_command", required=True)
    corr = sub.add_parser("correlate", help="Spearman of a proxy vs trained perplexity (LTS logs)")
    corr.add_argument("files", nargs="*", help="LTS log JSON files (default: shared GPT-2 sets)")
    corr.add_argument("--proxy", default="decoder_params")
    corr.add_argument("--json", action="store_true")

    val = sub.add_parser(
        "validate", help=f"proxies against every published ground-truth set (${GROUND_TRUTH_ENV})"
    )
    val.add_argument("--proxy", action="append", help="a proxy (repeatable); default: all")
    val.add_argument("--set", action="append", help="a set (repeatable); default: all")
    val.add_argument("--top-k", type=float, default=0.1, help="top fraction for the common ratio")
    val.add_argument(
        "--text",
        help="data-dependent proxies read minibatches of this text file (default: random tokens)",
    )
    val.add_argument(
        "--batch-size",
        type=int,
        default=BATCH_SIZE,
        help="minibatch rows (default %(default)s)",
    )
    val.add_argument(
        "--seq-len",
        type=int,
        default=SEQ_LEN,
        help="minibatch tokens per row (%(default)s)",
    )
    val.add_argument(
        "--seed",
        type=int,
        default=SEED,
        help="weights and batch seed (default %(default)s)",
    )
    val.add_argument("--json", action="store_true")
