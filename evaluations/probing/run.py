"""One probing task with one model: vectors, a probe per layer, baselines, one document.

The document (a plain JSON-able dict) is what the `probe` command writes and what a
stored run will keep:

    {"task": {...name, type, labels, counts...}, "model": {...}, "pooling", "probe",
     "seeds": [seed, ...], "mdl": bool,
     "baselines": {"majority": {...}, "length": {...}, "frequency": {...}, "chance",
                   "applicable": {...this task type's row of controls.APPLICABLE...}},
     "control": {"kind": "sentence" | "word type", "seed"} or None,
     "layers": [{"layer", "va_accuracy", "te_accuracy", "hyperparameters",   # means
                 "va_std", "te_std", "seed_va", "seed_te",
                 "control": {"va_accuracy", "te_accuracy", "te_std"}, "selectivity",
                 "mdl": {"bits", "uniform_bits", "compression", "blocks",
                         "block_bits"}}, ...],
     "best_layer", "best": {...that layer...}, "best_selectivity",
     "confusion": {"labels": [...], "matrix": [[...]]},   # te, at best_layer, first seed
     "diagnostics": {...}}

va and te accuracies of a layer are means over the seeds, the spread their sample
standard deviation, and the best layer is chosen on the mean va accuracy.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluations.probing.controls import DEFAULT_SEEDS, MAX_SEEDS
from evaluations.scoring.loading import LoadedModel, model_info
from suites.formats.probing import PARTITIONS, ProbingInstance, sort_labels

from . import controls
from .extract import DEFAULT_MEMORY_LIMIT, Features, extract_features
from .probes import (
    BATCH_FEATURE_BYTES,
    Labels,
    Layer,
    ProbeFit,
    Split,
    confusion_matrix,
    fit_logreg,
    fit_logreg_batched,
    fit_probe,
    length_baseline,
    majority_baseline,
    online_codelength,
    online_codelength_batched,
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


def baselines(
    instances: Sequence[ProbingInstance],
    *,
    task_type: str = "custom",
    frequency_source: controls.UnigramSource | None = None,
) -> dict[str, Any]:
    labels, rows, y = label_arrays(instances)
    lengths = {name: [instances[i].n_words for i in rows[name]] for name in PARTITIONS}
    majority, va_major, te_major = majority_baseline(y["tr"], y["va"], y["te"])
    va_len, te_len = length_baseline(
        lengths["tr"], y["tr"], lengths["va"], y["va"], lengths["te"], y["te"]
    )
    return {
        "majority": {"label": labels[majority], "va_accuracy": va_major, "te_accuracy": te_major},
        "length": {"va_accuracy": va_len, "te_accuracy": te_len},
        "frequency": frequency_baseline(
            instances, rows, y, len(labels), task_type=task_type, source=frequency_source
        ),
        "chance": 1.0 / len(labels),
        "applicable": {
            "task_type": task_type,
            **controls.APPLICABLE.get(task_type, controls.APPLICABLE["custom"]),
        },
    }


def frequency_baseline(
    instances: Sequence[ProbingInstance],
    rows: dict[str, np.ndarray],
    y: dict[str, np.ndarray],
    n_classes: int,
    *,
    task_type: str,
    source: controls.UnigramSource | None = None,
) -> dict[str, Any]:
    """va/te accuracy of logistic regression on one feature: the log10 probability of the
    line's target form (field #3) in a model of a large corpus (the CMU trigram's
    unigrams by default), never counted in the task itself. When it does not apply, or
    cannot be computed, `va_accuracy`/`te_accuracy` are None and `reason` says why."""
    row = controls.APPLICABLE.get(task_type, controls.APPLICABLE["custom"])
    if not row["frequency"]:
        return {"va_accuracy": None, "te_accuracy": None, "reason": f"not for {task_type}"}
    forms = controls.target_forms(instances)
    if forms is None:
        return {
            "va_accuracy": None,
            "te_accuracy": None,
            "reason": "the file has no target-form column (field #3)",
        }
    source = source or controls.cmu_unigrams()
    if source is None:
        return {
            "va_accuracy": None,
            "te_accuracy": None,
            "reason": "the CMU model (pocketsphinx) is not installed",
        }
    values, fell_back = controls.frequency_features(forms, source)
    column = values.astype(np.float32)[:, None]
    split = Split(
        x_tr=column[rows["tr"]],
        y_tr=y["tr"],
        x_va=column[rows["va"]],
        y_va=y["va"],
        x_te=column[rows["te"]],
        y_te=y["te"],
        n_classes=n_classes,
    )
    fit = fit_logreg(split)
    return {
        "va_accuracy": fit.va_accuracy,
        "te_accuracy": fit.te_accuracy,
        "source": source.name,
        "forms": len(set(forms)),
        "instances": len(forms),
        "fell_back": fell_back,
        "fallback": source.fallback,
    }


def probe_task(
    lm: LoadedModel,
    instances: Sequence[ProbingInstance],
    *,
    task: dict[str, Any] | None = None,
    pooling: str = "mean",
    probe: str = "logreg",
    seeds: int = DEFAULT_SEEDS,
    control: bool = True,
    mdl: bool = False,
    device: str | None = None,
    token_budget: int | None = None,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT,
    progress: StageProgress | None = None,
    frequency_source: controls.UnigramSource | None = None,
    features: Features | None = None,
    on_extracted: Callable[[Features], object] | None = None,
) -> dict[str, Any]:
    """Probe every layer of `lm` on a valid task's instances; the result document.
    `features`: the vectors of these sentences, extracted before (the artifact store's),
    instead of a forward pass; `on_extracted(features)` is told of vectors extracted."""
    labels, rows, y = label_arrays(instances)
    device = device or lm.device
    started = time.perf_counter()

    def vectors_progress(done: int, total: int) -> None:
        if progress is not None:
            progress("vectors", done, total)

    if features is None:
        features = extract_features(
            lm,
            [item.sentence for item in instances],
            pooling=pooling,
            token_budget=token_budget,
            memory_limit_bytes=memory_limit_bytes,
            progress=vectors_progress,
        )
        if on_extracted is not None:
            on_extracted(features)
    else:
        vectors_progress(len(instances), len(instances))
    extracted = time.perf_counter()
    plan = LayerPlan.of(instances, rows, y, len(labels), task, probe, seeds, control, mdl, device)
    with features:
        layers, predictions = probe_layers(features, plan, progress)
        notes = list(features.notes)
        on_disk = features.on_disk
    probed = time.perf_counter()
    best = best_layer(layers)
    task_type = (task or {}).get("type", "custom")
    return {
        "task": {**(task or {}), "labels": labels, "counts": _counts(labels, y)},
        "model": model_info(lm),
        "pooling": pooling,
        "probe": probe,
        "seeds": plan.seeds,
        "mdl": mdl,
        "baselines": baselines(instances, task_type=task_type, frequency_source=frequency_source),
        "control": (
            {"kind": plan.control_kind, "seed": controls.CONTROL_SEED} if control else None
        ),
        "layers": layers,
        "best_layer": best,
        "best": layers[best],
        "best_selectivity": layers[best].get("selectivity"),
        "confusion": {
            "labels": labels,
            "matrix": confusion_matrix(y["te"], predictions[best], len(labels)),
        },
        "diagnostics": {
            "sentences": len(instances),
            "vectors_on_disk": on_disk,
            "seconds_vectors": round(extracted - started, 3),
            "seconds_probes": round(probed - extracted, 3),
            "seconds_task_probes": round(plan.seconds["task"], 3),
            "seconds_control_probes": round(plan.seconds["control"], 3),
            "seconds_mdl": round(plan.seconds["mdl"], 3),
            "notes": notes,
        },
    }


def best_layer(layers: Sequence[dict[str, Any]]) -> int:
    """The layer best on (mean) va accuracy; a tie goes to the lower layer."""
    return max(range(len(layers)), key=lambda k: (layers[k]["va_accuracy"], -k))


@dataclass
class LayerPlan:
    """What is trained at every layer: the task probe with each seed, the control probe
    with each seed (when asked), the online code (when asked)."""

    rows: dict[str, np.ndarray]
    y: dict[str, np.ndarray]
    y_control: dict[str, np.ndarray] | None
    control_kind: str | None
    n_classes: int
    probe: str
    seeds: list[int]
    mdl: bool
    device: str
    seconds: dict[str, float] = field(
        default_factory=lambda: {"task": 0.0, "control": 0.0, "mdl": 0.0}
    )

    @classmethod
    def of(
        cls,
        instances: Sequence[ProbingInstance],
        rows: dict[str, np.ndarray],
        y: dict[str, np.ndarray],
        n_classes: int,
        task: dict[str, Any] | None,
        probe: str,
        seeds: int,
        control: bool,
        mdl: bool,
        device: str,
    ) -> LayerPlan:
        if not 1 <= seeds <= MAX_SEEDS:
            raise ValueError(f"seeds must be between 1 and {MAX_SEEDS}, not {seeds}")
        kind: str | None = None
        y_control = None
        if control:
            forms = controls.target_forms(instances)
            kind = controls.control_kind((task or {}).get("type", "custom"), forms)
            y_control = controls.control_labels(
                instances, rows, y, n_classes, kind=kind, forms=forms
            )
        return cls(
            rows, y, y_control, kind, n_classes, probe, controls.seeds_of(seeds), mdl, device
        )

    def split(self, x: dict[str, np.ndarray], y: dict[str, np.ndarray]) -> Split:
        return Split(
            x_tr=x["tr"],
            y_tr=y["tr"],
            x_va=x["va"],
            y_va=y["va"],
            x_te=x["te"],
            y_te=y["te"],
            n_classes=self.n_classes,
        )


def _spread(values: Sequence[float]) -> float:
    """Sample standard deviation (0 for one value)."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _fits(
    x: dict[str, np.ndarray], plan: LayerPlan, y: dict[str, np.ndarray], phase: str
) -> list[ProbeFit]:
    """One probe per seed on the layer's features `x` and labels `y` (the task's or the
    control's); their time counts in `plan.seconds[phase]`."""
    clock = time.perf_counter()
    fits = [
        fit_probe(plan.split(x, y), probe=plan.probe, device=plan.device, seed=seed)
        for seed in plan.seeds
    ]
    plan.seconds[phase] += time.perf_counter() - clock
    return fits


def _probe_layer(
    x: dict[str, np.ndarray],
    plan: LayerPlan,
    k: int,
    fitted: list[list[ProbeFit]] | None = None,
    mdl_later: bool = False,
) -> tuple[dict[str, Any], np.ndarray]:
    """One layer's entry of the document, and the first seed's te predictions. `fitted`:
    the task's and the control's probes of this layer, fitted in a batch already;
    `mdl_later`: its online code comes from the batch of its layers' blocks
    (`_batched_codelengths`)."""
    fits = fitted[0] if fitted else _fits(x, plan, plan.y, "task")
    va = [fit.va_accuracy for fit in fits]
    te = [fit.te_accuracy for fit in fits]
    entry: dict[str, Any] = {
        "layer": k,
        "va_accuracy": float(np.mean(va)),
        "te_accuracy": float(np.mean(te)),
        "hyperparameters": fits[0].hyperparameters,
        "va_std": _spread(va),
        "te_std": _spread(te),
        "seed_va": va,
        "seed_te": te,
    }
    if plan.y_control is not None:
        cfits = fitted[1] if fitted else _fits(x, plan, plan.y_control, "control")
        c_te = [fit.te_accuracy for fit in cfits]
        control_te = float(np.mean(c_te))
        entry["control"] = {
            "va_accuracy": float(np.mean([fit.va_accuracy for fit in cfits])),
            "te_accuracy": control_te,
            "te_std": _spread(c_te),
        }
        entry["selectivity"] = entry["te_accuracy"] - control_te
    if plan.mdl and not mdl_later:
        clock = time.perf_counter()
        chosen = fits[0].hyperparameters.get("l2", fits[0].hyperparameters.get("weight_decay"))
        entry["mdl"] = online_codelength(
            plan.split(x, plan.y),
            probe=plan.probe,
            hyperparameter=None if chosen is None else float(chosen),
            device=plan.device,
            seed=plan.seeds[0],
        )
        plan.seconds["mdl"] += time.perf_counter() - clock
    return entry, fits[0].te_predictions


def probe_layers(
    features: Features, plan: LayerPlan, progress: StageProgress | None
) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
    """Every layer's entry of the document, and each layer's te predictions."""
    layers: list[dict[str, Any]] = []
    predictions: list[np.ndarray] = []
    if progress is not None:
        progress("probes", 0, features.n_layers)
    chunk = _layers_per_batch(features, plan)
    batched_mdl = batched_codelengths(plan.device)
    for first in range(0, features.n_layers, chunk):
        ks = range(first, min(first + chunk, features.n_layers))
        xs = [{name: features.layer(k, plan.rows[name]) for name in PARTITIONS} for k in ks]
        batched = _batched_fits(xs, plan) if plan.probe == "logreg" else [None] * len(xs)
        mdl_later = plan.mdl and plan.probe == "logreg" and batched_mdl
        entries = []
        for k, x, fitted in zip(ks, xs, batched, strict=True):
            entry, te_predictions = _probe_layer(x, plan, k, fitted, mdl_later)
            entries.append(entry)
            predictions.append(te_predictions)
            if progress is not None and not mdl_later:
                progress("probes", k + 1, features.n_layers)
        if mdl_later:
            _batched_codelengths(xs, entries, plan)
            if progress is not None:
                progress("probes", ks[-1] + 1, features.n_layers)
        layers += entries
    return layers, predictions


def batched_codelengths(device: str) -> bool:
    """Whether the online code's blocks are fitted in one batch on `device`: on a GPU.
    On a CPU the batch measured no faster than block by block (benchmarks/README.md,
    "The online code in a batch"), so a CPU run fits them one after another."""
    return str(device).startswith("cuda")


def _batched_codelengths(
    xs: list[dict[str, np.ndarray]], entries: list[dict[str, Any]], plan: LayerPlan
) -> None:
    """The online code of each layer's logistic-regression probe (its penalty the one
    chosen on va for the task's first seed), every block of every layer in one batch."""
    clock = time.perf_counter()
    codes = online_codelength_batched(
        [x["tr"] for x in xs],
        plan.y["tr"],
        plan.n_classes,
        [float(entry["hyperparameters"]["l2"]) for entry in entries],
        seed=plan.seeds[0],
        device=plan.device,
    )
    for entry, code in zip(entries, codes, strict=True):
        entry["mdl"] = code
    plan.seconds["mdl"] += time.perf_counter() - clock


def _layers_per_batch(features: Features, plan: LayerPlan) -> int:
    """How many layers' logistic-regression probes fit in one batch: as many as
    BATCH_FEATURE_BYTES of features allow (1 for the MLP, fitted probe by probe)."""
    if plan.probe != "logreg" or features.n_layers == 0:
        return 1
    n = sum(len(rows) for rows in plan.rows.values())
    width = features.layer(0, plan.rows["va"][:1]).shape[1]
    return max(1, min(features.n_layers, BATCH_FEATURE_BYTES // max(1, 4 * n * width)))


def _batched_fits(
    xs: list[dict[str, np.ndarray]], plan: LayerPlan
) -> list[list[list[ProbeFit]] | None]:
    """The task's (and the control's) logistic-regression probes of the layers `xs`, each
    seed, fitted as one batch; the time is shared between the task's and the control's
    phases by their number of probes."""
    clock = time.perf_counter()
    label_sets = [Labels(plan.y["tr"], plan.y["va"], plan.y["te"])]
    if plan.y_control is not None:
        c = plan.y_control
        label_sets.append(Labels(c["tr"], c["va"], c["te"]))
    fits = fit_logreg_batched(
        [Layer(x["tr"], x["va"], x["te"]) for x in xs],
        label_sets,
        plan.n_classes,
        seeds=plan.seeds,
        device=plan.device,
    )
    spent = (time.perf_counter() - clock) / len(label_sets)
    plan.seconds["task"] += spent
    if plan.y_control is not None:
        plan.seconds["control"] += spent
    return list(fits)


def _counts(labels: list[str], y: dict[str, np.ndarray]) -> dict[str, dict[str, int]]:
    """Instances per label in each partition."""
    return {
        name: {label: int((y[name] == c).sum()) for c, label in enumerate(labels)}
        for name in PARTITIONS
    }
