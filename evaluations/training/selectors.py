"""Reads of training runs that pages, the API and exports share: the loss curves, the
checkpoints with their evaluations, and the learning curves with each suite's age of
acquisition."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from django.db.models import QuerySet

from evaluations.models import Evaluation, LanguageModel, PairEvaluation, ProbingRun
from evaluations.training.models import TrainingRun


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


def _curve(
    run: TrainingRun, found: dict[str, Any], name: str, kind: str, threshold: float
) -> dict[str, Any]:
    points = []
    for point in run.checkpoints:
        evaluation = found.get(point["model"])
        done = evaluation is not None and evaluation.status == Evaluation.Status.DONE
        # A probing run's accuracy: te at the layer chosen on va.
        accuracy = getattr(evaluation, "best_te" if kind == "probing" else "accuracy", None)
        points.append(
            {
                "tokens": point["tokens"],
                "step": point["step"],
                "model": point["model"],
                "accuracy": accuracy if done else None,
                "status": evaluation.status if evaluation else "not asked",
                "evaluation": evaluation.pk if evaluation else None,
                "url": evaluation.get_absolute_url() if evaluation else "",
            }
        )
    return {
        "kind": kind,
        "suite": name,
        "points": points,
        "age_of_acquisition": age_of_acquisition(points, threshold),
    }


def learning_curves(run: TrainingRun, *, threshold: float | None = None) -> dict[str, Any]:
    """Accuracy on each suite, minimal-pair set and probing task (te accuracy at the
    layer chosen on va) the run is evaluated on, at each checkpoint (tokens seen), from
    the checkpoints' done runs, with each one's age of acquisition. `suites` lists them
    all ("kind": "suite", "pairs" or "probing"; "suite": the name)."""
    threshold = run.threshold if threshold is None else threshold
    names = [c["model"] for c in run.checkpoints]
    rows = []
    suites = list(run.suites.order_by("name"))
    by_suite: dict[str, dict[str, Any]] = {s.name: {} for s in suites}
    for evaluation in (
        Evaluation.objects.filter(
            model__name__in=names, suite__in=suites, word_probability="tokens"
        )
        .select_related("model", "suite")
        .only("pk", "status", "accuracy", "model__name", "suite__name", "content_hash")
    ):
        by_suite[evaluation.suite.name][evaluation.model.name] = evaluation
    rows += [_curve(run, by_suite[s.name], s.name, "suite", threshold) for s in suites]
    pair_sets = list(run.pair_sets.order_by("name"))
    by_set: dict[str, dict[str, Any]] = {s.name: {} for s in pair_sets}
    for pair_evaluation in (
        PairEvaluation.objects.filter(
            model__name__in=names, pair_set__in=pair_sets, word_probability="tokens"
        )
        .select_related("model", "pair_set")
        .only("pk", "status", "accuracy", "model__name", "pair_set__name", "content_hash")
    ):
        by_set[pair_evaluation.pair_set.name][pair_evaluation.model.name] = pair_evaluation
    rows += [_curve(run, by_set[s.name], s.name, "pairs", threshold) for s in pair_sets]
    tasks = list(run.probing_tasks.order_by("name"))
    by_task: dict[str, dict[str, Any]] = {t.name: {} for t in tasks}
    for probe in (
        ProbingRun.objects.filter(
            model__name__in=names, task__in=tasks, pooling="mean", probe="logreg"
        )
        .select_related("model", "task")
        .only("pk", "status", "best_te", "model__name", "task__name", "content_hash")
    ):
        by_task[probe.task.name][probe.model.name] = probe
    rows += [_curve(run, by_task[t.name], t.name, "probing", threshold) for t in tasks]
    return {"threshold": threshold, "suites": rows}


def curves_csv(curves: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["kind", "benchmark", "tokens", "step", "model", "accuracy", "age_of_acquisition"]
    )
    for row in curves["suites"]:
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
                ]
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
    # A checkpoint's folder lies in its run's folder.
    parent = str(Path(model.source).parent)
    for run in TrainingRun.objects.select_related("corpus").filter(out_dir=parent):
        for point in run.checkpoints:
            if point["model"] == model.name:
                return {"run": run, "checkpoint": point}
    return {}
