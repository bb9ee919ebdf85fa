"""One probing task with one model: vectors, a probe per layer, baselines, one document.

The document (a plain JSON-able dict) is what the `probe` command writes and what a
stored run will keep:

    {"task": {...name, type, labels, counts...}, "model": {...}, "pooling", "probe",
     "baselines": {"majority": {...}, "length": {...}, "chance"},
     "layers": [{"layer", "va_accuracy", "te_accuracy", "hyperparameters"}, ...],
     "best_layer", "best": {...that layer...},
     "confusion": {"labels": [...], "matrix": [[...]]},   # te, at best_layer
     "diagnostics": {...}}
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from evaluations.scoring.loading import LoadedModel, model_info
from suites.formats.probing import PARTITIONS, ProbingInstance, sort_labels

from .extract import DEFAULT_MEMORY_LIMIT, Features, extract_features
from .probes import (
    Split,
    confusion_matrix,
    fit_probe,
    length_baseline,
    majority_baseline,
)

# progress(stage, done, total): stage is "vectors" (sentences) or "probes" (layers).
StageProgress = Callable[[str, int, int], None]


def label_arrays(
    instances: Sequence[ProbingInstance],
) -> tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Labels in order, then per partition the instance positions and class indices."""
    labels = sort_labels(item.label for item in instances if item.partition == "tr")
    code = {label: k for k, label in enumerate(labels)}
    unseen = sorted({item.label for item in instances} - set(code))
    if unseen:
        raise ValueError(
            f"labels {', '.join(unseen[:5])} occur in va or te but never in tr; "
            "check the task with suites.formats.probing first"
        )
    rows: dict[str, np.ndarray] = {}
    classes: dict[str, np.ndarray] = {}
    for name in PARTITIONS:
        picked = [i for i, item in enumerate(instances) if item.partition == name]
        rows[name] = np.asarray(picked, dtype=np.int64)
        classes[name] = np.asarray([code[instances[i].label] for i in picked], dtype=np.int64)
    return labels, rows, classes


def baselines(instances: Sequence[ProbingInstance]) -> dict[str, Any]:
    labels, rows, y = label_arrays(instances)
    lengths = {name: [instances[i].n_words for i in rows[name]] for name in PARTITIONS}
    majority, va_major, te_major = majority_baseline(y["tr"], y["va"], y["te"])
    va_len, te_len = length_baseline(
        lengths["tr"], y["tr"], lengths["va"], y["va"], lengths["te"], y["te"]
    )
    return {
        "majority": {"label": labels[majority], "va_accuracy": va_major, "te_accuracy": te_major},
        "length": {"va_accuracy": va_len, "te_accuracy": te_len},
        "chance": 1.0 / len(labels),
    }


def probe_task(
    lm: LoadedModel,
    instances: Sequence[ProbingInstance],
    *,
    task: dict[str, Any] | None = None,
    pooling: str = "mean",
    probe: str = "logreg",
    device: str | None = None,
    token_budget: int | None = None,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT,
    progress: StageProgress | None = None,
) -> dict[str, Any]:
    """Probe every layer of `lm` on a valid task's instances; the result document."""
    labels, rows, y = label_arrays(instances)
    device = device or lm.device
    started = time.perf_counter()

    def vectors_progress(done: int, total: int) -> None:
        if progress is not None:
            progress("vectors", done, total)

    features = extract_features(
        lm,
        [item.sentence for item in instances],
        pooling=pooling,
        token_budget=token_budget,
        memory_limit_bytes=memory_limit_bytes,
        progress=vectors_progress,
    )
    extracted = time.perf_counter()
    with features:
        layers, predictions = _probe_layers(features, rows, y, len(labels), probe, device, progress)
        notes = list(features.notes)
        on_disk = features.on_disk
    # The best layer on va; a tie goes to the lower layer.
    best = max(range(len(layers)), key=lambda k: (layers[k]["va_accuracy"], -k))
    return {
        "task": {**(task or {}), "labels": labels, "counts": _counts(labels, y)},
        "model": model_info(lm),
        "pooling": pooling,
        "probe": probe,
        "baselines": baselines(instances),
        "layers": layers,
        "best_layer": best,
        "best": layers[best],
        "confusion": {
            "labels": labels,
            "matrix": confusion_matrix(y["te"], predictions[best], len(labels)),
        },
        "diagnostics": {
            "sentences": len(instances),
            "vectors_on_disk": on_disk,
            "seconds_vectors": round(extracted - started, 3),
            "seconds_probes": round(time.perf_counter() - extracted, 3),
            "notes": notes,
        },
    }


def _probe_layers(
    features: Features,
    rows: dict[str, np.ndarray],
    y: dict[str, np.ndarray],
    n_classes: int,
    probe: str,
    device: str,
    progress: StageProgress | None,
) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
    """A probe per layer: each layer's entry of the document, and its te predictions."""
    layers: list[dict[str, Any]] = []
    predictions: list[np.ndarray] = []
    if progress is not None:
        progress("probes", 0, features.n_layers)
    for k in range(features.n_layers):
        split = Split(
            x_tr=features.layer(k, rows["tr"]),
            y_tr=y["tr"],
            x_va=features.layer(k, rows["va"]),
            y_va=y["va"],
            x_te=features.layer(k, rows["te"]),
            y_te=y["te"],
            n_classes=n_classes,
        )
        fit = fit_probe(split, probe=probe, device=device)
        layers.append(
            {
                "layer": k,
                "va_accuracy": fit.va_accuracy,
                "te_accuracy": fit.te_accuracy,
                "hyperparameters": fit.hyperparameters,
            }
        )
        predictions.append(fit.te_predictions)
        if progress is not None:
            progress("probes", k + 1, features.n_layers)
    return layers, predictions


def _counts(labels: list[str], y: dict[str, np.ndarray]) -> dict[str, dict[str, int]]:
    """Instances per label in each partition."""
    return {
        name: {label: int((y[name] == c).sum()) for c, label in enumerate(labels)}
        for name in PARTITIONS
    }
