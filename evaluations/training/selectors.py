"""Reads of training runs that pages, the API and exports share: the loss curves, the
checkpoints with their evaluations, and the learning curves with each suite's age of
acquisition."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.db.models import QuerySet

from evaluations.models import LanguageModel
from evaluations.runs import lifecycle as runs
from evaluations.runs.reads import KindResult
from evaluations.scoring import sources
from evaluations.subsets import Subset, subset_text
from evaluations.training import stored
from evaluations.training.models import ModelSeries, TrainingRun


def loss_curves(run: TrainingRun) -> dict[str, list[list[float]]]:
    """[tokens, loss] points of the training loss and of the validation loss."""
    train = [[e["tokens"], e["loss"]] for e in run.log if e.get("loss") is not None]
    valid = [
        [e["tokens"], e["validation_loss"]]
        for e in run.log
        if "validation_loss" in e and e["validation_loss"] is not None
    ]
    return {"train": train, "validation": valid}


def age_of_acquisition(points: list[dict[str, Any]], threshold: float) -> int | None:
    """Tokens at the first checkpoint from which the accuracy stays at or above
    `threshold` at every later checkpoint; None when there is none, or while a later
    checkpoint has no accuracy yet."""
    found: int | None = None
    for point in sorted(points, key=lambda p: p["tokens"]):
        accuracy = point.get("accuracy")
        if accuracy is None:
            return None
        if accuracy >= threshold:
            if found is None:
                found = point["tokens"]
        else:
            found = None
    return found


def _point(point: dict[str, Any], found: KindResult | None) -> dict[str, Any]:
    """A checkpoint's point on one benchmark from its result there (or None): its
    accuracy only when that run is done on the benchmark's current content. `status`
    says why a point has none: "outdated" (only runs on older content), "not asked", or
    the current run's status."""
    current = found is not None and not found.outdated
    if found is None:
        status = "not asked"
    else:
        status = found.status if current else "outdated"
    return {
        "tokens": point["tokens"],
        "step": point["step"],
        "model": point["model"],
        "accuracy": found.score if found is not None and current and found.done else None,
        "status": status,
        "evaluation": found.run_id if found else None,
        "url": found.url if found else "",
    }


def _curve(
    checkpoints: list[dict[str, Any]],
    found: dict[str, KindResult],
    benchmark: Any,
    kind: str,
    threshold: float,
    chance: float | None,
    subset: dict[str, Any] | None = None,
    metric: str = "",
) -> dict[str, Any]:
    points = [_point(point, found.get(point["model"])) for point in checkpoints]
    label = benchmark.name
    if subset is not None:
        label += f" ({subset_text(subset['size'], subset['of'], subset['seed'], _NOUNS[kind])})"
    return {
        "kind": kind,
        "suite": benchmark.name,
        # On a subset (the fast subset for sweeps): {"size", "seed", "of"}; None for the
        # whole benchmark. `label` names the curve with it.
        "subset": subset,
        "label": label,
        "chance": chance,
        # What the accuracies measure (`RunKind.metrics`): a pair set's own metric
        # (sentence, nlpscholar, lm_eval), "predictions" for a suite, "probe" for a
        # probing task; every point of a curve is of it.
        "metric": metric,
        "points": points,
        "age_of_acquisition": age_of_acquisition(points, threshold),
        "outdated": sum(p["status"] == "outdated" for p in points),
        "missing": sum(p["accuracy"] is None and p["status"] != "outdated" for p in points),
    }


# What a subset of each kind counts, as curves name it.
_NOUNS = {"suite": "items", "pairs": "pairs", "probing": "te sentences"}


def sample_total(kind: str, benchmark: Any) -> int:
    """What a subset of the benchmark is drawn from: a suite's items, a set's pairs (its
    sentences when it has none), a probing task's te sentences."""
    if kind == "suite":
        return int(benchmark.item_count)
    if kind == "pairs":
        return int(benchmark.pair_count or benchmark.sentence_count)
    return sum((benchmark.counts.get("te") or {}).values())


def _kind_curves(
    checkpoints: list[dict[str, Any]],
    threshold: float,
    benchmarks: list[Any],
    kind: str,
    subset: Subset | None = None,
) -> list[dict[str, Any]]:
    """The curves of one kind's benchmarks, from the checkpoints' results on them as the
    kind reads them (`RunKind.results`, `RunKind.chances`: no kind imports another): the
    results on `subset` (its size and seed) of them, or those on the whole benchmarks."""
    if not benchmarks:
        return []
    reads = runs.kind_named(kind)
    names = [c["model"] for c in checkpoints]
    by_name: dict[str, dict[str, KindResult]] = {b.name: {} for b in benchmarks}
    for found in reads.read_results(models=names, benchmarks=benchmarks, subset=subset):
        by_name[found.benchmark][found.model] = found
    chances = reads.read_chances(benchmarks)
    metrics = reads.read_metrics(benchmarks)
    return [
        _curve(
            checkpoints,
            by_name[b.name],
            b,
            kind,
            threshold,
            chances.get(b.pk),
            None
            if subset is None
            else {"size": subset.size, "seed": subset.seed, "of": sample_total(kind, b)},
            metrics.get(b.pk, ""),
        )
        for b in benchmarks
    ]


def learning_curves(run: TrainingRun, *, threshold: float | None = None) -> dict[str, Any]:
    """Accuracy on each suite, minimal-pair set and probing task (te accuracy at the
    layer chosen on va) the run is evaluated on, at each checkpoint (tokens seen), from
    the checkpoints' done runs, with each one's age of acquisition. `suites` lists them
    all ("kind": "suite", "pairs" or "probing"; "suite": the name)."""
    return checkpoint_curves(
        run.checkpoints,
        suites=run.suites.all(),
        pair_sets=run.pair_sets.all(),
        probing_tasks=run.probing_tasks.all(),
        threshold=run.threshold if threshold is None else threshold,
    )


def checkpoint_curves(
    checkpoints: list[dict[str, Any]],
    *,
    suites: QuerySet[Any],
    pair_sets: QuerySet[Any],
    probing_tasks: QuerySet[Any],
    threshold: float,
    samples: Sequence[Subset | None] = (None,),
) -> dict[str, Any]:
    """The learning curves of `checkpoints` ({step, tokens, model} in order of tokens: a
    training run's, or a model series' members) on those benchmarks, as
    `learning_curves` gives them. `samples`: a curve per benchmark for each (None: the
    whole benchmark; a subset: the runs on that sample, labelled so), never one point
    of the one beside another's. A benchmark no larger than a subset's size is whole on
    it: its curve is the whole benchmark's."""
    # Each kind's benchmarks, by the kind's name in the registry (and in the curves).
    kinds = [("suite", suites), ("pairs", pair_sets), ("probing", probing_tasks)]
    rows = []
    for kind, benchmarks in kinds:
        listed = list(benchmarks.order_by("name"))
        whole = listed if None in samples else []
        found: list[dict[str, Any]] = []
        for subset in (s for s in samples if s is not None):
            smaller = [b for b in listed if sample_total(kind, b) <= subset.size]
            whole += [b for b in smaller if b not in whole]
            of = [b for b in listed if b not in smaller]
            found += _kind_curves(checkpoints, threshold, of, kind, subset)
        found += _kind_curves(checkpoints, threshold, whole, kind)
        # Each benchmark's curves together: the whole one, then its subsets'.
        order = {b.name: n for n, b in enumerate(listed)}
        found.sort(
            key=lambda r: (
                order[r["suite"]],
                r["subset"] is not None,
                (r["subset"] or {}).get("size", 0),
                (r["subset"] or {}).get("seed", 0),
            )
        )
        rows += found
    return {
        "threshold": threshold,
        "suites": rows,
        "outdated": sum(row["outdated"] for row in rows),
        "missing": sum(row["missing"] for row in rows),
    }


def curves_csv(curves: dict[str, Any]) -> str:
    """One line per point, with the `metric` its curve measures. Where some curve is on a
    subset (the fast subset for sweeps), each line ends with its `subset_size`,
    `subset_seed` and `subset_of` (empty for the whole benchmark)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    sampled = any(row.get("subset") for row in curves["suites"])
    writer.writerow(
        ["kind", "benchmark", "tokens", "step", "model", "accuracy", "age_of_acquisition"]
        + ["metric"]
        + (["subset_size", "subset_seed", "subset_of"] if sampled else [])
    )
    for row in curves["suites"]:
        subset = row.get("subset") or {}
        for point in row["points"]:
            writer.writerow(
                [
                    row["kind"],
                    row["suite"],
                    point["tokens"],
                    point["step"],
                    point["model"],
                    "" if point["accuracy"] is None else f"{point['accuracy']:.6f}",
                    "" if row["age_of_acquisition"] is None else row["age_of_acquisition"],
                    row.get("metric", ""),
                ]
                + ([subset.get(k, "") for k in ("size", "seed", "of")] if sampled else [])
            )
    return out.getvalue()


def checkpoint_rows(run: TrainingRun) -> list[dict[str, Any]]:
    """The checkpoints with their LanguageModel rows (for links)."""
    models = {
        m.name: m
        for m in LanguageModel.objects.filter(name__in=[c["model"] for c in run.checkpoints])
    }
    return [{**c, "language_model": models.get(c["model"])} for c in run.checkpoints]


def corpus_runs(corpus: Any) -> QuerySet[TrainingRun]:
    return TrainingRun.objects.filter(corpus=corpus).select_related("model", "requested_by")


def model_provenance(model: LanguageModel) -> dict[str, Any]:
    """{"run": the training run, "checkpoint": its checkpoint record or None} for a model
    a training run made; {} for any other model."""
    run = TrainingRun.objects.select_related("corpus").filter(model=model).first()
    if run is not None:
        return {"run": run, "checkpoint": None}
    # A checkpoint's folder lies in its run's folder, on disk or in the artifact store
    # (trained/<the run's folder>/checkpoint-<tokens>).
    # A checkpoint from before the store (an install artifacts_migrate has not moved) is
    # named by its folder, whose parent has the run's model's name.
    key = sources.artifact_key(model.source)
    if key is not None:
        run_id = stored.run_id_of(key)
        found = TrainingRun.objects.filter(pk=run_id) if run_id is not None else None
    else:
        name = Path(model.source).parent.name
        found = TrainingRun.objects.filter(model__name=name) if name else None
    for run in found.select_related("corpus") if found is not None else []:
        for point in run.checkpoints:
            if point["model"] == model.name:
                return {"run": run, "checkpoint": point}
    return {}


def series_curves(series: ModelSeries, *, threshold: float | None = None) -> dict[str, Any]:
    """A model series' learning curves, as a training run's (`learning_curves`)."""
    return checkpoint_curves(
        series.checkpoints(),
        suites=series.suites.all(),
        pair_sets=series.pair_sets.all(),
        probing_tasks=series.probing_tasks.all(),
        threshold=series.threshold if threshold is None else threshold,
        samples=series.sample_list(),
    )


def series_curves_body(series: ModelSeries, *, threshold: float | None = None) -> dict[str, Any]:
    """The API's answer: {"series", "unit", "threshold", "curves": [{"benchmark", "kind",
    "metric", "chance", "age_of_acquisition", "points": [{"model", "step", "tokens",
    "accuracy", "status"}]}]}; `tokens` counts what `unit` says (tokens, words, or
    steps), `metric` what the accuracies measure."""
    curves = series_curves(series, threshold=threshold)
    return {
        "series": series.name,
        "group": series.group,
        "unit": series.unit,
        "threshold": curves["threshold"],
        "curves": [
            {
                "benchmark": row["suite"],
                "kind": row["kind"],
                "metric": row["metric"],
                "subset": row["subset"],
                "label": row["label"],
                "chance": row["chance"],
                "age_of_acquisition": row["age_of_acquisition"],
                "points": [
                    {key: p[key] for key in ("model", "step", "tokens", "accuracy", "status")}
                    for p in row["points"]
                ],
            }
            for row in curves["suites"]
        ],
        "seeds": seed_curves(series),
    }


def seed_curves(series: ModelSeries) -> list[dict[str, Any]]:
    """The curves of the series of its group (seeds of one training) on each benchmark
    they share: at each x the mean accuracy over the seeds that have one there, with its
    lowest and highest (the band), and each seed's age of acquisition with their mean and
    spread (lowest to highest). [] for a series without a group or alone in it."""
    if not series.group:
        return []
    seeds = list(ModelSeries.objects.filter(group=series.group).order_by("name"))
    if len(seeds) < 2:
        return []
    by_benchmark: dict[tuple[str, str], dict[str, Any]] = {}
    for seed in seeds:
        for row in series_curves(seed, threshold=series.threshold)["suites"]:
            # A benchmark's curve on a subset is another curve (`label` names it).
            entry = by_benchmark.setdefault(
                (row["kind"], row["label"]), {"points": {}, "ages": {}, "metric": row["metric"]}
            )
            entry["ages"][seed.name] = row["age_of_acquisition"]
            for point in row["points"]:
                if point["accuracy"] is not None:
                    entry["points"].setdefault(point["tokens"], []).append(point["accuracy"])
    out = []
    for (kind, name), entry in sorted(by_benchmark.items()):
        if len(entry["ages"]) < 2:
            continue
        ages = [a for a in entry["ages"].values() if a is not None]
        out.append(
            {
                "kind": kind,
                "benchmark": name,
                "metric": entry["metric"],
                "seeds": len(entry["ages"]),
                "points": [
                    {
                        "tokens": x,
                        "mean": sum(values) / len(values),
                        "low": min(values),
                        "high": max(values),
                        "seeds": len(values),
                    }
                    for x, values in sorted(entry["points"].items())
                ],
                "ages": entry["ages"],
                "age_mean": sum(ages) / len(ages) if ages else None,
                "age_low": min(ages) if ages else None,
                "age_high": max(ages) if ages else None,
            }
        )
    return out
