"""Reads of probing runs that pages, downloads and the API share: one run's curves and
confusion matrix, a task's runs, the probing leaderboard and a model's curves."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import F, QuerySet

from evaluations.models import LanguageModel, ProbingAnnotation, ProbingLayerResult, ProbingRun
from evaluations.probing.controls import applicable_table
from evaluations.statistics import cohen_kappa, fleiss_kappa, wilson_interval
from suites.models import ProbingInstance, ProbingTask

DONE = ProbingRun.Status.DONE
DEFAULT_POOLING = ProbingRun.Pooling.MEAN
DEFAULT_PROBE = ProbingRun.Probe.LOGREG
# More labels than this and the matrix is left to the downloads (word_content has 1000).
CONFUSION_MAX_LABELS = 40
LARGE_FIELDS = ("confusion", "task_info")


def run_list(
    *, model: str = "", task: str = "", status: str = "", include_hidden: bool = False
) -> QuerySet[ProbingRun]:
    # A confusion matrix can be large (word_content: 1000 x 1000): lists never read it.
    runs = (
        ProbingRun.objects.select_related("model", "task", "frequency_corpus")
        .defer(*LARGE_FIELDS)
        .order_by("-created_at")
    )
    if not include_hidden:
        runs = runs.filter(model__is_hidden=False)
    if model:
        runs = runs.filter(model__name=model)
    if task:
        runs = runs.filter(task__name=task)
    if status:
        runs = runs.filter(status=status)
    return runs


def task_runs(task: ProbingTask, *, include_hidden: bool = False) -> list[ProbingRun]:
    """Every run on the task, current content first, then by model."""
    runs = list(run_list(include_hidden=include_hidden).filter(task=task))
    runs.sort(key=lambda r: (r.outdated, r.model.display_name.lower(), r.pooling, r.probe))
    return runs


def layer_rows(run: ProbingRun) -> list[dict[str, Any]]:
    """Each layer as the result document has it: the mean accuracies, hyperparameters,
    and what a run stored beside them (seeds' spread, control, selectivity, MDL)."""
    rows = run.layers.order_by("layer").values(
        "layer", "va_accuracy", "te_accuracy", "hyperparameters", "stats"
    )
    return [_flat(row) for row in rows]


def _flat(row: Mapping[str, Any]) -> dict[str, Any]:
    flat = dict(row)
    stats = flat.pop("stats", None) or {}
    return {**flat, **stats}


def curve(run: ProbingRun, rows: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """What the layer plot draws for one run: va and te by layer, the baselines, the
    layer chosen on va."""
    table = layer_rows(run) if rows is None else rows
    baselines = run.baselines or {}
    return {
        "label": run.model.display_name,
        "layers": [row["layer"] for row in table],
        "va": [row["va_accuracy"] for row in table],
        "te": [row["te_accuracy"] for row in table],
        # The seeds' spread (None for a run stored before seeds): the band around te.
        "te_std": [row.get("te_std") for row in table],
        "seeds": run.seeds,
        "control_te": [(row.get("control") or {}).get("te_accuracy") for row in table],
        "best_layer": run.best_layer,
        "majority": (baselines.get("majority") or {}).get("te_accuracy"),
        "length": (baselines.get("length") or {}).get("te_accuracy"),
        "frequency": (baselines.get("frequency") or {}).get("te_accuracy"),
        "chance": baselines.get("chance"),
    }


def control_choices(run: ProbingRun) -> list[ProbingRun]:
    """Other done runs on the same task, to draw beside this one (a random-weights control
    model is registered as a model of its own)."""
    others = ProbingRun.objects.filter(task_id=run.task_id, status=DONE).exclude(pk=run.pk)
    others = others.select_related("model", "task").defer(*LARGE_FIELDS)
    return list(others.order_by("model__display_name", "pooling", "probe"))


def confusion_table(run: ProbingRun) -> dict[str, Any] | None:
    """Rows (true label) with each cell's count and share of its row, for the heatmap;
    None when there are too many labels to draw."""
    labels = (run.confusion or {}).get("labels") or []
    matrix = (run.confusion or {}).get("matrix") or []
    if not labels or len(labels) > CONFUSION_MAX_LABELS:
        return None
    rows = []
    for i, (label, counts) in enumerate(zip(labels, matrix, strict=True)):
        total = sum(counts)
        cells = [
            {"count": n, "share": n / total if total else 0.0, "correct": j == i}
            for j, n in enumerate(counts)
        ]
        rows.append({"label": label, "total": total, "cells": cells})
    return {"labels": labels, "rows": rows}


def result_page(run: ProbingRun, *, control_id: int | None = None) -> dict[str, Any]:
    rows = layer_rows(run)
    controls = control_choices(run)
    control = next((c for c in controls if c.pk == control_id), None)
    plot = curve(run, rows)
    plot["control"] = curve(control) if control is not None else None
    best = next((row for row in rows if row["layer"] == run.best_layer), None)
    baselines = run.baselines or {}
    return {
        "rows": rows,
        "best": best,
        "frequency": baselines.get("frequency"),
        "applicable": applicable_table(),
        "task_type": run.task.task_type,
        "control_info": (run.diagnostics or {}).get("control"),
        "has_control": any("control" in row for row in rows),
        "has_spread": run.seeds > 1 and any("te_std" in row for row in rows),
        "has_mdl": any("mdl" in row for row in rows),
        "plot": plot,
        "controls": controls,
        "control": control,
        "confusion": confusion_table(run),
        "human": human_accuracy(run.task),
        "n_labels": len((run.confusion or {}).get("labels") or []),
    }


# --- the probing leaderboard ---------------------------------------------------------------

BOARD_BASELINES = ("majority", "length", "frequency")


@dataclass
class Cell:
    run_id: int
    te: float | None
    va: float | None
    layer: int | None
    selectivity: float | None = None  # None: a run without a control task
    # The seeds the probe was trained with, and the standard deviation of te accuracy
    # across them at the chosen layer (None with one seed, or a run stored before seeds).
    seeds: int = 1
    te_sd: float | None = None


@dataclass
class BoardRow:
    model: LanguageModel
    cells: dict[int, Cell] = field(default_factory=dict)
    # On a board of one training run's checkpoints: the tokens this one had seen.
    tokens: int | None = None

    @property
    def mean(self) -> float | None:
        values = [cell.te for cell in self.cells.values() if cell.te is not None]
        return sum(values) / len(values) if values else None


@dataclass
class ProbingBoard:
    pooling: str
    probe: str
    tasks: list[ProbingTask]
    rows: list[BoardRow]
    # task id -> {"majority": te accuracy, "length" and "frequency": te accuracy or None}
    baselines: dict[int, dict[str, float | None]]
    # task id -> the human baseline row (human_summary), None before anyone finished
    human: dict[int, dict[str, Any] | None] = field(default_factory=dict)
    # The training run whose checkpoints are the rows (None: every model).
    training: Any = None

    def cells_of(self, row: BoardRow) -> list[Cell | None]:
        return [row.cells.get(task.pk) for task in self.tasks]

    def baseline_cells(self, name: str) -> list[float | None]:
        return [self.baselines.get(task.pk, {}).get(name) for task in self.tasks]

    @property
    def baseline_rows(self) -> list[tuple[str, list[float | None]]]:
        return [(name, self.baseline_cells(name)) for name in BOARD_BASELINES]

    @property
    def human_cells(self) -> list[dict[str, Any] | None]:
        return [self.human.get(task.pk) for task in self.tasks]


def majority_from_counts(task: ProbingTask) -> float | None:
    """te accuracy of always answering tr's most frequent label (the lower label on a
    tie), from the task's counts: the same rule as the probes' majority baseline."""
    tr = task.counts.get("tr") or {}
    te = task.counts.get("te") or {}
    if not tr or not sum(te.values()):
        return None
    majority = max(task.labels, key=lambda label: (tr.get(label, 0), -task.labels.index(label)))
    return te.get(majority, 0) / sum(te.values())


def probing_board(
    *,
    pooling: str = DEFAULT_POOLING,
    probe: str = DEFAULT_PROBE,
    include_hidden: bool = False,
    training: Any = None,
) -> ProbingBoard:
    """Models x tasks: te accuracy at the layer chosen on va, for the task's current
    content, one pooling and one probe. `training` (a training run, found by
    `leaderboard.board_training`) makes its checkpoints the rows, by tokens seen, a
    checkpoint without results a row all the same; the baseline rows stay those of the
    whole board."""
    pooling = pooling if pooling in ProbingRun.Pooling.values else DEFAULT_POOLING
    probe = probe if probe in ProbingRun.Probe.values else DEFAULT_PROBE
    tasks = list(ProbingTask.objects.order_by("name"))
    runs = (
        ProbingRun.objects.filter(
            status=DONE,
            pooling=pooling,
            probe=probe,
            content_hash=F("task__content_hash"),
            # Runs on a subset (the fast subset for sweeps) are another sample.
            subset_size=0,
        )
        .select_related("model")
        # Runs of one model and task with other seeds or MDL: the latest finished wins.
        .order_by("finished_at", "pk")
        .only(
            "pk",
            "model",
            "task_id",
            "best_te",
            "best_va",
            "best_layer",
            "best_selectivity",
            "baselines",
            "finished_at",
            "seeds",
            "frequency_corpus",
        )
    )
    if not include_hidden:
        runs = runs.filter(model__is_hidden=False)
    rows: dict[int, BoardRow] = {}
    # The checkpoints' rows first, so that those without results are rows too.
    checkpoints = [] if training is None else training.checkpoint_models()
    for model, tokens in checkpoints:
        if include_hidden or not model.is_hidden:
            rows[model.pk] = BoardRow(model=model, tokens=tokens)
    baselines: dict[int, dict[str, float | None]] = {
        task.pk: {"majority": majority_from_counts(task), "length": None, "frequency": None}
        for task in tasks
    }
    for run in runs:
        # Every model's runs are read all the same: the length and frequency baselines
        # come from whichever run computed them.
        if training is None or run.model_id in rows:
            row = rows.setdefault(run.model_id, BoardRow(model=run.model))
            row.cells[run.task_id] = Cell(
                run.pk, run.best_te, run.best_va, run.best_layer, run.best_selectivity, run.seeds
            )
        for name in ("length", "frequency"):
            # The board's frequency row is the CMU unigrams' (the default source): a run
            # that counted its forms in an uploaded corpus does not speak for it.
            if name == "frequency" and run.frequency_corpus_id is not None:
                continue
            value = (run.baselines.get(name) or {}).get("te_accuracy")
            if value is not None:
                baselines[run.task_id][name] = value
    _add_spread([c for row in rows.values() for c in row.cells.values() if c.seeds > 1])
    if training is not None:
        ordered = sorted(rows.values(), key=lambda r: (r.tokens or 0, r.model.display_name.lower()))
    else:
        ordered = sorted(
            rows.values(),
            key=lambda r: (-len(r.cells), -(r.mean or 0.0), r.model.display_name.lower()),
        )
    board = ProbingBoard(pooling, probe, tasks, ordered, baselines, human_by_task(tasks))
    board.training = training
    return board


def _add_spread(cells: list[Cell]) -> None:
    """Each cell's te standard deviation across seeds at its run's chosen layer, as the
    worker stored it (sample sd, n - 1). One query, for the runs with several seeds."""
    if not cells:
        return
    spread = {
        run_id: (stats or {}).get("te_std")
        for run_id, stats in ProbingLayerResult.objects.filter(
            run_id__in=[c.run_id for c in cells], layer=F("run__best_layer")
        ).values_list("run_id", "stats")
    }
    for cell in cells:
        cell.te_sd = spread.get(cell.run_id)


# --- a model's page --------------------------------------------------------------------------


def model_curves(model: LanguageModel) -> list[dict[str, Any]]:
    """Every done run of the model, its curve and where it belongs, by task name."""
    runs = list(
        ProbingRun.objects.filter(model=model, status=DONE)
        .select_related("model", "task")
        .defer(*LARGE_FIELDS)
        .order_by("task__name", "pooling", "probe")
    )
    layers: dict[int, list[Mapping[str, Any]]] = {run.pk: [] for run in runs}
    for row in (
        ProbingLayerResult.objects.filter(run__in=runs)
        .order_by("run", "layer")
        .values("run_id", "layer", "va_accuracy", "te_accuracy", "hyperparameters", "stats")
    ):
        layers[row["run_id"]].append(_flat(row))
    return [
        {
            "run": run,
            "outdated": run.outdated,
            "plot": curve(run, layers[run.pk]),
            "json_id": f"probing-curve-{run.pk}",
        }
        for run in runs
    ]


# --- people's answers: human accuracy ------------------------------------------------------

ANNOTATION_SAMPLE = 200  # te sentences a person is asked about (SentEval's README: 200)
# What SentEval's labels mean, for people who label sentences (its data README).
LABEL_HINTS: dict[str, dict[str, str]] = {
    "bigram_shift": {"O": "original", "I": "two neighbouring words swapped"},
    "coordination_inversion": {"O": "original", "I": "the two clauses swapped"},
    "odd_man_out": {"O": "original", "C": "one noun or verb replaced"},
    "past_present": {"PAST": "main verb in the past", "PRES": "main verb in the present"},
    "subj_number": {"NN": "singular subject", "NNS": "plural subject"},
    "obj_number": {"NN": "singular object", "NNS": "plural object"},
}


def label_choices(task: ProbingTask) -> list[tuple[str, str]]:
    """The task's labels, each with what it means where SentEval says."""
    hints = LABEL_HINTS.get(task.task_type, {})
    return [(label, hints.get(label, "")) for label in task.labels]


def annotation_sample(task: ProbingTask) -> list[int]:
    """The te instances people are asked about, in the order they are asked: up to
    ANNOTATION_SAMPLE drawn at random, with the task's content hash as the seed, so that
    everyone gets the same sentences in the same order."""
    ids = list(task.instances.filter(partition="te").order_by("line").values_list("pk", flat=True))
    rng = random.Random(task.content_hash)
    return rng.sample(ids, min(len(ids), ANNOTATION_SAMPLE))


@dataclass
class AnnotationState:
    """Where one person stands on one task: the sample, their answers, the next one."""

    sample: list[int]
    answers: dict[int, str]  # instance id -> the label they gave
    next: ProbingInstance | None
    correct: int = 0

    @property
    def total(self) -> int:
        return len(self.sample)

    @property
    def answered(self) -> int:
        return len(self.answers)

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.answered if self.answered else None


def annotation_state(task: ProbingTask, user: Any) -> AnnotationState:
    sample = annotation_sample(task)
    given = ProbingAnnotation.objects.filter(user=user, instance_id__in=sample)
    answers: dict[int, str] = {}
    correct = 0
    for instance_id, label, gold in given.values_list("instance_id", "label", "instance__label"):
        answers[instance_id] = label
        correct += label == gold
    pending = next((pk for pk in sample if pk not in answers), None)
    upcoming = None if pending is None else ProbingInstance.objects.get(pk=pending)
    return AnnotationState(sample, answers, upcoming, correct)


def sample_size(task: ProbingTask) -> int:
    """How many sentences annotation_sample asks about, from the task's counts."""
    return min(sum((task.counts.get("te") or {}).values()), ANNOTATION_SAMPLE)


Answer = tuple[int, str, int, str, str]  # user id, username, instance id, label, gold


def human_summary(answers: Iterable[Answer], sample: int) -> dict[str, Any] | None:
    """The human baseline row from people's answers on a task's te sample of `sample`
    sentences. Only people who have answered every sentence of it count: a number that
    moved with each answer of someone still labelling would show them whether they were
    right, and agreement would show them others' labels. None before anyone finished.

    accuracy: the share of the finished people's answers that match the label (the mean
    of their accuracies; they answered the same sentences); interval: its 95% Wilson
    interval over those answers pooled (it counts answers as independent, so it leaves
    out how much people differ: the per-annotator rows show that). agreement: Cohen's
    kappa for two people, Fleiss' for three or more, over the sentences all of them
    answered; None with one person."""
    people: dict[int, dict[str, Any]] = {}
    for user_id, username, instance_id, label, gold in answers:
        person = people.setdefault(user_id, {"user": username, "labels": {}, "gold": {}})
        person["labels"][instance_id] = label
        person["gold"][instance_id] = gold
    finished = [p for p in people.values() if sample and len(p["labels"]) >= sample]
    if not finished:
        return None
    finished.sort(key=lambda p: p["user"].lower())
    annotators = []
    answered = correct = 0
    for person in finished:
        right = sum(1 for pk, label in person["labels"].items() if label == person["gold"][pk])
        total = len(person["labels"])
        answered += total
        correct += right
        annotators.append(
            {
                "user": person["user"],
                "accuracy": right / total,
                "interval": _interval(right, total),
                "correct": right,
                "answers": total,
            }
        )
    return {
        "accuracy": correct / answered,
        "interval": _interval(correct, answered),
        "correct": correct,
        "answers": answered,
        "people": len(finished),
        "labelling": len(people) - len(finished),
        "sentences": sample,
        "annotators": annotators,
        "agreement": agreement([p["labels"] for p in finished]),
    }


def _interval(successes: int, n: int) -> list[float] | None:
    interval = wilson_interval(successes, n)
    return list(interval) if interval else None


def agreement(labels: Sequence[Mapping[int, str]]) -> dict[str, Any] | None:
    """Chance-corrected agreement of people's labels (each: sentence id -> label) over
    the sentences every one of them labelled: Cohen's kappa for two, Fleiss' for three
    or more. None with fewer than two people or no sentence they all labelled; `kappa`
    is None where chance alone explains every agreement (one label throughout)."""
    if len(labels) < 2:
        return None
    shared = sorted(set.intersection(*(set(given) for given in labels)))
    if not shared:
        return None
    if len(labels) == 2:
        first, second = labels
        kappa = cohen_kappa([first[pk] for pk in shared], [second[pk] for pk in shared])
        method = "cohen"
    else:
        kappa = fleiss_kappa([[given[pk] for given in labels] for pk in shared])
        method = "fleiss"
    return {"kappa": kappa, "method": method, "annotators": len(labels), "sentences": len(shared)}


def _answers(tasks: Sequence[ProbingTask]) -> QuerySet[ProbingAnnotation]:
    return ProbingAnnotation.objects.filter(
        instance__task__in=tasks, instance__partition="te"
    ).order_by("user_id", "instance_id")


ANSWER_FIELDS = ("user_id", "user__username", "instance_id", "label", "instance__label")


def human_accuracy(task: ProbingTask) -> dict[str, Any] | None:
    """The task's human baseline row (human_summary), or None before anyone finished."""
    rows = _answers([task]).values_list(*ANSWER_FIELDS)
    return human_summary(rows, sample_size(task))


def human_by_task(tasks: Sequence[ProbingTask]) -> dict[int, dict[str, Any] | None]:
    """The human baseline row of each task (task id -> row or None), in one query."""
    by_task: dict[int, list[Answer]] = {task.pk: [] for task in tasks}
    for task_id, *answer in _answers(tasks).values_list("instance__task_id", *ANSWER_FIELDS):
        by_task[task_id].append(tuple(answer))
    return {task.pk: human_summary(by_task[task.pk], sample_size(task)) for task in tasks}
