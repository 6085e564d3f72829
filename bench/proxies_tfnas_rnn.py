"""Check the recurrent-cell proxies against NAS-Bench-NLP's WikiText-2 runs and against the
authors' own values (RNN_results.csv, Penn Treebank runs of the same cells). The data come
from the folder hwnas.ground_truth finds ($HWNAS_GROUND_TRUTH, else ../shared/data).

    .venv/bin/python -m bench.proxies_tfnas_rnn                      # hidden covariance
    .venv/bin/python -m bench.proxies_tfnas_rnn --all --stride 4     # + the generic metrics
    .venv/bin/python -m bench.proxies_tfnas_rnn --random             # random tokens, not text

The CSV's log names carry NAS-Bench-NLP's `recepie_id` (log_stats_model_<id>_...), which the
WikiText-2 logs hold too: on the architectures both have, our values are compared with the
authors' at rank level, and both with the WikiText-2 test loss. Minibatches: the authors'
50 x 70 (`PAPER_INPUTS`) of WikiText-2's valid text, or of random tokens (`--random`).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import time
from pathlib import Path

from hwnas.ground_truth import require_ground_truth
from proxies.agreement import agreement
from proxies.ground_truth import best_test_loss, load_set
from proxies.inputs import RANDOM
from proxies.tfnas_rnn import DEFINED, PAPER_INPUTS, score_spec

CSV_FILE = "tfnas/RNN_results.csv"
LOGS_FILE = "nasbench-nlp/wikitext2_logs.json"
TEXT_FILE = "nasbench-nlp/wikitext-2/valid.txt"
COLUMN = {
    **{f"hidden_covariance_l{i}": f"Layer {i} Hidden Covariance" for i in (1, 2, 3)},
    "synaptic_saliency": "Synaptic Saliency",
    "activation_distance": "Activation Distance",
    "jacobian_covariance": "Jacobian Covariance",
    "jacobian_cosine": "Jacobian Cosine",
}
HIDDEN = [n for n in COLUMN if n.startswith("hidden_covariance")]


def _number(text: str | None) -> float | None:
    try:
        value = float(text or "")
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def authors_values(data_dir: Path) -> dict[int, dict[str, float | None]]:
    """recepie_id -> the authors' value per proxy name, one row per id."""
    out: dict[int, dict[str, float | None]] = {}
    with (data_dir / CSV_FILE).open(encoding="utf-8-sig", newline="") as handle:
        for row in csv.DictReader(handle):
            recepie = int(row["log name"].split("_")[3])
            out.setdefault(recepie, {n: _number(row[c]) for n, c in COLUMN.items()})
    return out


def _tau(xs: list[float], ys: list[float]) -> float | None:
    return agreement(xs, ys, 0.1, True).kendall if len(xs) >= 3 else None


def run(names: list[str], stride: int, data_dir: Path, text: bool = True) -> list[dict]:
    """One row per proxy: tau and rho vs test loss, tau vs the authors' values and theirs vs
    the loss on the shared architectures, median ms; generic metrics on every stride-th run."""
    logs = [e for e in json.loads((data_dir / LOGS_FILE).read_text()) if best_test_loss(e)]
    runs = load_set("nasbench-nlp/wikitext2", data_dir)
    source = str(data_dir / TEXT_FILE) if text else RANDOM
    inputs = dataclasses.replace(PAPER_INPUTS, source=source)
    authors = authors_values(data_dir)
    values: dict[str, list[tuple[int, float, float]]] = {n: [] for n in names}
    seconds: dict[str, float] = dict.fromkeys(names, 0.0)
    for i, (spec, loss) in enumerate(zip(runs.specs, runs.targets, strict=True)):
        for name in names:
            if name not in HIDDEN and i % stride:
                continue
            start = time.perf_counter()
            values[name].append((i, score_spec(name, spec, inputs), loss))
            seconds[name] += time.perf_counter() - start
    rows = []
    for name, scored in values.items():
        ours = [v for _, v, _ in scored]
        losses = [t for _, _, t in scored]
        agreed = agreement(ours, losses, 0.1, True)
        shared = [
            (v, authors[logs[i]["recepie_id"]][name], t)
            for i, v, t in scored
            if authors.get(logs[i]["recepie_id"], {}).get(name) is not None
        ]
        rows.append(
            {
                "proxy": name,
                "models": len(scored),
                "kendall": agreed.kendall,
                "spearman": agreed.spearman,
                "shared": len(shared),
                "tau_vs_authors": _tau([a for a, _, _ in shared], [b for _, b, _ in shared]),
                "authors_tau_vs_loss": _tau([b for _, b, _ in shared], [c for _, _, c in shared]),
                "ms_per_arch": 1000 * seconds[name] / max(1, len(scored)),
            }
        )
    return rows


def table(rows: list[dict]) -> str:
    def f(value: float | None) -> str:
        return "-" if value is None else f"{value:+.3f}"

    lines = [
        "| proxy | models | tau vs loss | rho vs loss | shared | tau vs authors | authors' "
        "tau vs loss | ms/arch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['proxy']} | {r['models']} | {f(r['kendall'])} | {f(r['spearman'])} | "
            f"{r['shared']} | {f(r['tau_vs_authors'])} | {f(r['authors_tau_vs_loss'])} | "
            f"{r['ms_per_arch']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="the generic metrics too")
    parser.add_argument("--stride", type=int, default=1, help="generic metrics: every k-th run")
    parser.add_argument("--random", action="store_true", help="random tokens instead of text")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # one small model at a time: more threads only contend
    names = list(COLUMN) if args.all else HIDDEN
    assert set(names) <= set(DEFINED)
    print(table(run(names, max(1, args.stride), require_ground_truth(), text=not args.random)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
