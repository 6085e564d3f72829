"""Check the Transformer proxies against the paper's FlexiBERT benchmark: rank agreement
with GLUE and with the authors' own metric values (BERT_results_activation.csv).

    .venv/bin/python -m bench.proxies_tfnas_transformer

prints one table for the benchmark's real sizes and one for the authors' convention (every
architecture built at hidden 256, feed-forward 1024, as their metric models were). The data
come from the folder hwnas.ground_truth finds ($HWNAS_GROUND_TRUTH, else ../shared/data).
"""

from __future__ import annotations

import csv
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

from archvocab.spaces.flexibert.spec import FlexiBERTSpec
from hwnas.ground_truth import require_ground_truth
from proxies.ground_truth import load_set
from proxies.inputs import ProxyInputs
from proxies.tfnas_transformer import DEFAULT_INPUTS, DEFINED, score_spec

CSV_FILE = "tfnas/BERT_results_activation.csv"
# proxy -> the authors' column computing (their version of) it.
CSV_COLUMN: dict[str, str] = {
    "attention_confidence": "Head Confidence",
    "softmax_confidence": "Head Softmax Confidence",
    "attention_importance": "Head Importance",
    "synaptic_saliency": "Synaptic Saliency",
    "synaptic_diversity": "Synaptic Diversity",
    "activation_distance": "Activation Distance",  # corrupted in the CSV (data README)
    "jacobian_covariance": "Jacobian Score",
    "jacobian_cosine": "Jacobian Score Normalized",  # the authors' cosine, misnamed
}
for _name in list(CSV_COLUMN):
    if _name + "_normalized" in DEFINED:
        CSV_COLUMN[_name + "_normalized"] = CSV_COLUMN[_name] + " Normalized"
AUTHORS_HIDDEN, AUTHORS_FEED_FORWARD = 256, 1024


def authors_sizes(spec: FlexiBERTSpec) -> FlexiBERTSpec:
    """`spec` at the authors' metric-model sizes: hidden 256, every feed-forward 1024."""
    layers = tuple(
        dataclasses.replace(layer, feed_forward_dimension=AUTHORS_FEED_FORWARD)
        for layer in spec.layers
    )
    return dataclasses.replace(spec, hidden_size=AUTHORS_HIDDEN, layers=layers)


def authors_columns(data_dir: Path) -> dict[str, list[float]]:
    """The CSV's columns, rows in architecture-ID order (the benchmark's order)."""
    with open(data_dir / CSV_FILE, newline="") as handle:
        rows = sorted(csv.DictReader(handle), key=lambda row: int(row["ID"]))
    return {key: [float(row[key]) for row in rows] for key in rows[0]}


def score_all(
    specs: Sequence[FlexiBERTSpec], names: Sequence[str], inputs: ProxyInputs, authors: bool
) -> tuple[dict[str, list[float]], float]:
    """Every proxy of every spec (at the authors' sizes if asked), and ms per spec."""
    values: dict[str, list[float]] = {name: [] for name in names}
    start = time.perf_counter()
    for spec in specs:
        scored = authors_sizes(spec) if authors else spec
        for name in names:
            values[name].append(score_spec(name, scored, inputs))
    return values, 1000 * (time.perf_counter() - start) / max(len(specs), 1)


def table(
    data_dir: Path,
    inputs: ProxyInputs = DEFAULT_INPUTS,
    authors: bool = False,
    limit: int = 500,
) -> str:
    """Score the first `limit` benchmark architectures and `summarize` them."""
    data = load_set("tfnas/BERT_benchmark", data_dir)
    specs = [s for s in data.specs[:limit] if isinstance(s, FlexiBERTSpec)]
    values, ms = score_all(specs, list(DEFINED), inputs, authors)
    sizes = [authors_sizes(s) if authors else s for s in specs]
    values["params (spec)"] = [float(s.total_params()) for s in sizes]
    title = f"{'authors 256/1024' if authors else 'real sizes'}, inputs {inputs.key}"
    return summarize(title, values, data.targets[: len(specs)], ms, authors_columns(data_dir))


def summarize(
    title: str,
    values: dict[str, list[float]],
    glue: list[float],
    ms: float,
    authors: dict[str, list[float]],
) -> str:
    """Kendall tau and Spearman rho of each proxy's values (the first len(glue)
    architectures) with GLUE and with the authors' column for it (`authors_columns`)."""
    from scipy.stats import kendalltau, spearmanr

    n = len(glue)
    columns = {k: v[:n] for k, v in authors.items()}
    lines = [
        f"{title}: {n} archs, {ms:.0f} ms/arch (all proxies)",
        f"{'proxy':34s} {'tau GLUE':>9s} {'rho GLUE':>9s} {'rho CSV':>8s} {'CSV tau GLUE':>13s}",
    ]
    for name, got in values.items():
        theirs = columns[CSV_COLUMN.get(name, "Number of Parameters")]
        lines.append(
            f"{name:34s} {kendalltau(got, glue)[0]:+9.3f} {spearmanr(got, glue)[0]:+9.3f} "
            f"{spearmanr(got, theirs)[0]:+8.3f} {kendalltau(theirs, glue)[0]:+13.3f}"
        )
    return "\n".join(lines)


def main() -> None:
    import torch

    torch.set_num_threads(1)  # one small model at a time: more threads only contend
    data_dir = require_ground_truth()
    for authors in (False, True):
        print(table(data_dir, authors=authors), flush=True)


if __name__ == "__main__":
    main()
