"""The published ground-truth sets, as (spec, trained result) pairs.

Each set says which space kind its architectures are, what the trained target is, and
whether lower or higher is better, so that every proxy can be checked against every set the
same way (`proxies.validate`). Pure functions: files in, values out. The caller says where
the data folder is (hwnas.ground_truth finds it: $HWNAS_GROUND_TRUTH, else the package's own copy).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec
from archvocab.spaces.flexibert.spec import FlexiBERTSpec
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.spaces.nasbench_nlp.spec import RNNCellSpec
from archvocab.spaces.transxl.spec import TransXLSpec


@dataclass(frozen=True)
class GroundTruthSet:
    """Trained results of one published set: `targets[i]` is `specs[i]`'s."""

    name: str
    kind: str
    target: str  # e.g. "valid_ppl", "glue", "test_loss"
    lower_is_better: bool
    specs: list[ArchSpec]
    targets: list[float]


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidSpec("file", f"{path}: cannot read: {exc}") from None


def load_lts(path: Path) -> GroundTruthSet:
    """An LTS log (random_GPT2_* or random_TransXL_*): decoder configs vs valid_ppl."""
    transxl = "TransXL" in path.name
    parse = TransXLSpec.from_lts_config if transxl else GPT2Spec.from_lts_config
    specs: list[ArchSpec] = []
    targets = []
    for entry in _json(path)["models"]:
        ppl = (entry.get("perplexity") or {}).get("valid_ppl")
        if ppl is not None:  # a few runs never finished
            specs.append(parse(entry["config"]))
            targets.append(float(ppl))
    kind = "transxl" if transxl else "gpt2"
    return GroundTruthSet(f"lts/{path.stem}", kind, "valid_ppl", True, specs, targets)


def load_bert(path: Path) -> GroundTruthSet:
    """The FlexiBERT benchmark: encoder configs vs their mean GLUE score after pretraining."""
    entries = _json(path)
    specs: list[ArchSpec] = [FlexiBERTSpec.from_benchmark(e) for e in entries]
    targets = [float(e["scores"]["glue"]) for e in entries]
    return GroundTruthSet("tfnas/BERT_benchmark", "flexibert", "glue", False, specs, targets)


def load_bert_metric_models(path: Path) -> GroundTruthSet:
    """The FlexiBERT benchmark as the authors scored it: their metric models were built at
    hidden size 256 and feed-forward 1024 whatever the config said
    (hwnas/ground_truth_data/README.md), so their "Number of Parameters" ranks those, not the
    trained models."""
    data = load_bert(path)
    resized: list[ArchSpec] = [
        replace(
            spec,
            hidden_size=256,
            layers=tuple(replace(x, feed_forward_dimension=1024) for x in spec.layers),
        )
        for spec in data.specs
    ]
    return replace(data, name="tfnas/BERT_benchmark_metric_models", specs=resized)


def _losses(value: Any) -> list[float]:
    """A loss curve: the logs hold it as a list or as a JSON string of one."""
    return [float(x) for x in (json.loads(value) if isinstance(value, str) else value)]


def best_test_loss(entry: dict[str, Any]) -> float | None:
    """The test loss at the epoch of the lowest validation loss (None: no finished run)."""
    if entry.get("status") != "OK":
        return None
    val, test = _losses(entry["val_losses"]), _losses(entry["test_losses"])
    if not val or len(val) != len(test):
        return None
    best = min(range(len(val)), key=val.__getitem__)
    return float(test[best])


def load_nasbench(path: Path) -> GroundTruthSet:
    """NAS-Bench-NLP on WikiText-2: recurrent cells vs the test loss at the best epoch."""
    specs: list[ArchSpec] = []
    targets = []
    for entry in _json(path):
        loss = best_test_loss(entry)
        if loss is not None:
            specs.append(RNNCellSpec.from_log_entry(entry))
            targets.append(loss)
    name = "nasbench-nlp/wikitext2"
    return GroundTruthSet(name, "nasbench_nlp", "test_loss", True, specs, targets)


# set name -> (file under the data folder, loader)
SETS: dict[str, tuple[str, Callable[[Path], GroundTruthSet]]] = {
    "lts/random_GPT2_wt103": ("lts/random_GPT2_wt103.json", load_lts),
    "lts/random_GPT2_lm1b": ("lts/random_GPT2_lm1b.json", load_lts),
    "lts/random_TransXL_wt103": ("lts/random_TransXL_wt103.json", load_lts),
    "lts/random_TransXL_lm1b": ("lts/random_TransXL_lm1b.json", load_lts),
    "lts/random_TransXL_wt103_homogeneous": ("lts/random_TransXL_wt103_homogeneous.json", load_lts),
    "tfnas/BERT_benchmark": ("tfnas/BERT_benchmark.json", load_bert),
    "tfnas/BERT_benchmark_metric_models": ("tfnas/BERT_benchmark.json", load_bert_metric_models),
    "nasbench-nlp/wikitext2": ("nasbench-nlp/wikitext2_logs.json", load_nasbench),
}


def load_set(name: str, data_dir: Path) -> GroundTruthSet:
    """A published set by name, from the data folder `data_dir`; InvalidSpec listing the
    names, or naming a missing file."""
    if name not in SETS:
        raise InvalidSpec("set", f"unknown ground-truth set {name!r}; allowed: {', '.join(SETS)}")
    file, loader = SETS[name]
    path = data_dir / file
    if not path.is_file():
        raise InvalidSpec("set", f"{name}: {path} not found (the shared data lives in {data_dir})")
    return loader(path)
