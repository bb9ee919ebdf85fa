"""Reads of training runs that pages, the API and exports share: the loss curves, the
checkpoints with their evaluations, and the learning curves with each suite's age of
acquisition."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.db.models import QuerySet

from evaluations.models import Evaluation, LanguageModel
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


def learning_curves(run: TrainingRun, *, threshold: float | None = None) -> dict[str, Any]:
    """Accuracy of each suite the run is evaluated on at each checkpoint (tokens seen),
    from the checkpoints' done suite runs, with each suite's age of acquisition."""
    threshold = run.threshold if threshold is None else threshold
    by_model = {c["model"]: c for c in run.checkpoints}
    suites = list(run.suites.order_by("name"))
    evaluations = (
        Evaluation.objects.filter(model__name__in=by_model, suite__in=suites)
        .select_related("model", "suite")
        .only("pk", "status", "accuracy", "model__name", "suite__name", "content_hash")
    )
    found: dict[tuple[str, str], Evaluation] = {}
    for evaluation in evaluations:
        found[(evaluation.suite.name, evaluation.model.name)] = evaluation
    rows = []
    for suite in suites:
        points = []
        for point in run.checkpoints:
            evaluation = found.get((suite.name, point["model"]))
            done = evaluation is not None and evaluation.status == Evaluation.Status.DONE
            points.append(
                {
                    "tokens": point["tokens"],
                    "step": point["step"],
                    "model": point["model"],
                    "accuracy": evaluation.accuracy if done and evaluation else None,
                    "status": evaluation.status if evaluation else "not asked",
                    "evaluation": evaluation.pk if evaluation else None,
                }
            )
        rows.append(
            {
                "suite": suite.name,
                "points": points,
                "age_of_acquisition": age_of_acquisition(points, threshold),
            }
        )
    return {"threshold": threshold, "suites": rows}


def curves_csv(curves: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["suite", "tokens", "step", "model", "accuracy", "age_of_acquisition"])
    for row in curves["suites"]:
        for point in row["points"]:
            writer.writerow(
                [
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
