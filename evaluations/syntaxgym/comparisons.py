"""Reads for comparing models: several models on one suite item by item (the comparison
page), and two models' suite accuracies side by side (the model page's scatter).

Both read current results only, as the leaderboard does: done evaluations of each suite's
current content. The comparison reads a fixed number of queries whatever the suite's size:
every item's outcomes (small) to order and count, region values for one page of items.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F
from django.urls import reverse
from django.utils.http import urlencode

from evaluations import compared_models
from evaluations.models import (
    ITEM_ROWS_SHOWN,
    Evaluation,
    ItemResult,
    LanguageModel,
    PredictionResult,
)
from evaluations.statistics import PairedTest, paired_test, wilson_interval
from evaluations.syntaxgym.selectors import DONE, RegionCell, item_conditions, item_counts
from suites.formats import region_names
from suites.models import Suite

MAX_MODELS = 6
ITEMS_PER_PAGE = 25
# Short labels for the compared models, in the order asked for.
LETTERS = "ABCDEF"


@dataclass(frozen=True)
class ComparedModel:
    letter: str
    model: LanguageModel
    evaluation_id: int
    accuracy: float | None
    # The accuracy's 95% Wilson interval over the evaluation's evaluable items.
    interval: tuple[float, float] | None = None


@dataclass
class ConditionRow:
    name: str
    # Per region: its text and one value per compared model (None where missing).
    regions: list[tuple[str, list[float | None]]]


@dataclass
class ItemComparison:
    item_number: int
    # Per prediction: one outcome per model (True, False or None: not evaluable).
    outcomes: list[list[bool | None]]
    # Per model: whether the item passes every prediction.
    passed: list[bool | None]
    disagree: bool
    conditions: list[ConditionRow] = field(default_factory=list)


@dataclass
class Comparison:
    suite: Suite
    # The models compared (those with a current result), in the order asked for.
    models: list[ComparedModel]
    # Names asked for that are not compared, each with the reason.
    left_out: list[tuple[str, str]]
    metric: str
    predictions: list[str]
    regions: list[tuple[int, str]]
    # (label, count) of items by which models pass them.
    counts: list[tuple[str, int]]
    disagreements: int
    page: Page | None
    items: list[ItemComparison]
    # Two models compared: McNemar's exact test over the items both can be judged on.
    paired: PairedTest | None = None

    @property
    def ready(self) -> bool:
        return len(self.models) >= 2

    @property
    def columns(self) -> int:
        """Columns of the items table: item, condition, regions, predictions, all."""
        return 2 + len(self.regions) + len(self.predictions) + (1 if self.predictions else 0)


def current_results(suite: Suite, *, include_hidden: bool) -> list[tuple[LanguageModel, int]]:
    """(model, evaluation id) of every model with a current done result on the suite, by
    model name: the choices of the comparison page's selector. One query."""
    evaluations = Evaluation.objects.filter(
        suite=suite,
        status=DONE,
        content_hash=suite.content_hash,
        word_probability="tokens",
        subset_size=0,
    ).select_related("model")
    if not include_hidden:
        evaluations = evaluations.filter(model__is_hidden=False)
    return [(e.model, e.pk) for e in evaluations.order_by("model__display_name")]


def compare(
    suite: Suite,
    names: Sequence[str],
    *,
    page: str | int | None = None,
    with_items: bool = True,
) -> Comparison:
    """The named models on the suite, item by item: items on which the models' prediction
    outcomes differ first, then the rest, each in suite order; one page of them with
    region values (none without `with_items`: the counts and the paired test only). A
    name without a current result is left out with the reason."""
    models, left_out = _compared_models(suite, names)
    evaluation_ids = [m.evaluation_id for m in models]
    outcomes = _outcomes(evaluation_ids) if len(models) >= 2 else {}
    order = sorted(outcomes, key=lambda n: (not outcomes[n].disagree, outcomes[n].position))
    paged = Paginator(order, ITEMS_PER_PAGE).get_page(page) if order and with_items else None
    items = [outcomes[n].item for n in paged.object_list] if paged else []
    # Without items, neither the suite as evaluated nor its metric is read.
    snapshot, metric = _snapshot(evaluation_ids[0]) if models and with_items else ({}, "sum")
    _fill_conditions(items, evaluation_ids, snapshot, metric)
    predictions = _formulas(evaluation_ids[0]) if models else []
    return Comparison(
        suite=suite,
        models=models,
        left_out=left_out,
        metric=metric,
        predictions=predictions,
        regions=_regions(snapshot),
        counts=_counts([o.item.passed for o in outcomes.values()], models),
        disagreements=sum(1 for o in outcomes.values() if o.disagree),
        page=paged,
        items=items,
        paired=paired_test((o.item.passed[0], o.item.passed[1]) for o in outcomes.values())
        if len(models) == 2 and predictions
        else None,
    )


def _compared_models(
    suite: Suite, names: Sequence[str]
) -> tuple[list[ComparedModel], list[tuple[str, str]]]:
    names, left_out = compared_models.read_names(names)
    found = {m.name: m for m in LanguageModel.objects.filter(name__in=names)}
    results = {
        name: (pk, accuracy)
        for name, pk, accuracy in Evaluation.objects.filter(
            suite=suite,
            status=DONE,
            content_hash=suite.content_hash,
            model__name__in=names,
            word_probability="tokens",
            subset_size=0,
        ).values_list("model__name", "id", "accuracy")
    }
    models: list[ComparedModel] = []
    for name in compared_models.choose(
        names,
        left_out,
        found=found,
        current=results,
        where="suite",
        most=MAX_MODELS,
        too_many=f"at most {MAX_MODELS} models are compared at once",
    ):
        pk, accuracy = results[name]
        models.append(ComparedModel(LETTERS[len(models)], found[name], pk, accuracy))
    if not models:
        return models, left_out
    counts = item_counts(Evaluation.objects.filter(pk__in=[m.evaluation_id for m in models]))
    return [
        replace(m, interval=wilson_interval(*counts.get(m.evaluation_id, (0, 0))))
        if m.accuracy is not None
        else m
        for m in models
    ], left_out


@dataclass
class _Outcomes:
    position: int
    item: ItemComparison

    @property
    def disagree(self) -> bool:
        return self.item.disagree


def _outcomes(evaluation_ids: list[int]) -> dict[int, _Outcomes]:
    """Every item's outcomes under each evaluation (no region values: those are read for
    one page only). An item some model has no row for is left out."""
    column = {pk: i for i, pk in enumerate(evaluation_ids)}
    rows: dict[int, list[Any]] = {}
    positions: dict[int, int] = {}
    for pk, number, position, outcomes, passed in ItemResult.objects.filter(
        ITEM_ROWS_SHOWN, evaluation_id__in=evaluation_ids
    ).values_list("evaluation_id", "item_number", "position", "outcomes", "passed"):
        rows.setdefault(number, [None] * len(evaluation_ids))[column[pk]] = (outcomes, passed)
        positions[number] = position
    result = {}
    for number, per_model in rows.items():
        if any(entry is None for entry in per_model):
            continue
        by_prediction = [list(o) for o in zip(*(list(e[0] or []) for e in per_model), strict=False)]
        item = ItemComparison(
            item_number=number,
            outcomes=by_prediction,
            passed=[e[1] for e in per_model],
            disagree=any(len(set(o)) > 1 for o in by_prediction),
        )
        result[number] = _Outcomes(positions[number], item)
    return result


def _counts(
    passed: list[list[bool | None]], models: Sequence[ComparedModel]
) -> list[tuple[str, int]]:
    """Items by which models pass them: all, none, only one, other splits, and those some
    model cannot be judged on (a missing value)."""
    if len(models) < 2:
        return []
    every = "both" if len(models) == 2 else "all"
    tally: Counter[str] = Counter()
    for outcome in passed:
        if any(p is None for p in outcome):
            tally["not evaluable for every model"] += 1
            continue
        passing = [m.letter for m, p in zip(models, outcome, strict=True) if p]
        if len(passing) == len(models):
            tally[f"{every} pass"] += 1
        elif not passing:
            tally[f"{every} fail"] += 1
        elif len(passing) == 1:
            tally[f"only {passing[0]} passes"] += 1
        else:
            tally[" and ".join(passing) + " pass"] += 1
    labels = [f"{every} pass", f"{every} fail"] + [f"only {m.letter} passes" for m in models]
    rest = sorted(k for k in tally if k not in labels)
    return [(label, tally[label]) for label in labels + rest]


def _snapshot(evaluation_id: int) -> tuple[dict[str, Any], str]:
    """The suite as evaluated (every compared evaluation is of the current content, so
    any one of them will do) and the metric its predictions compare."""
    snapshot, metric = Evaluation.objects.values_list("snapshot_row__content", "metric").get(
        pk=evaluation_id
    )
    return snapshot or {}, metric


def _formulas(evaluation_id: int) -> list[str]:
    return list(
        PredictionResult.objects.filter(evaluation_id=evaluation_id)
        .order_by("position")
        .values_list("formula", flat=True)
    )


def _regions(snapshot: dict[str, Any]) -> list[tuple[int, str]]:
    if not snapshot:
        return []
    numbers = sorted(int(k) for k in snapshot.get("region_meta", {}))
    return list(zip(numbers, region_names(snapshot), strict=True))


def _fill_conditions(
    items: list[ItemComparison], evaluation_ids: list[int], snapshot: dict[str, Any], metric: str
) -> None:
    """Each shown item's conditions with every model's region values side by side."""
    if not items:
        return
    column = {pk: i for i, pk in enumerate(evaluation_ids)}
    values: dict[int, list[dict[str, Any]]] = {i.item_number: [{}] * len(column) for i in items}
    for pk, number, stored in ItemResult.objects.filter(
        ITEM_ROWS_SHOWN, evaluation_id__in=evaluation_ids, item_number__in=list(values)
    ).values_list("evaluation_id", "item_number", "values"):
        values[number][column[pk]] = stored or {}
    by_number = {i["item_number"]: i for i in snapshot.get("items", [])}
    for item in items:
        per_model = [
            item_conditions(by_number.get(item.item_number, {}), v, metric)
            for v in values[item.item_number]
        ]
        item.conditions = [_side_by_side(conditions) for conditions in zip(*per_model, strict=True)]


def _side_by_side(conditions: Sequence[Any]) -> ConditionRow:
    """One condition as each model saw it (same text) -> one row, values side by side."""
    cells: list[list[RegionCell]] = [c.cells for c in conditions]
    return ConditionRow(
        name=conditions[0].name,
        regions=[
            (column[0].content, [cell.value for cell in column])
            for column in zip(*cells, strict=True)
        ],
    )


# --- two models' suite accuracies ----------------------------------------------------------


@dataclass
class Scatter:
    """The model page's model-vs-model scatter: x is the page's model, y the other."""

    model: LanguageModel
    # Every other model with a current accuracy on some suite the model has one for,
    # with that number of suites; the most first.
    choices: list[tuple[LanguageModel, int]]
    other: LanguageModel | None
    # {"suite", "x", "y", "url"} per suite both have a current accuracy for, by name.
    points: list[dict[str, Any]]
    # Set when the other model asked for is not one of the choices.
    problem: str = ""


def model_scatter(model: LanguageModel, other_name: str, *, include_hidden: bool) -> Scatter:
    """Suite accuracies of `model` against another model's (the one named, else the one
    sharing the most suites with it), over the suites both have current results for.
    Two queries, whatever the number of models and suites."""
    models = LanguageModel.objects.exclude(pk=model.pk)
    if not include_hidden:
        models = models.filter(is_hidden=False)
    others = {m.pk: m for m in models}
    accuracy = _current_accuracies({model.pk, *others})
    mine = accuracy.get(model.pk, {})
    shared = {pk: len(mine.keys() & a.keys()) for pk, a in accuracy.items() if pk in others}
    choices = sorted(
        ((others[pk], n) for pk, n in shared.items() if n),
        key=lambda c: (-c[1], c[0].display_name.lower()),
    )
    by_name = {m.name: m for m, _n in choices}
    default = choices[0][0] if choices else None
    other = by_name.get(other_name, default) if other_name else default
    problem = (
        f"{other_name!r} has no current results on the suites {model.display_name} has."
        if other_name and other_name not in by_name
        else ""
    )
    points = _points(model, mine, other, accuracy[other.pk]) if other is not None else []
    return Scatter(model=model, choices=choices, other=other, points=points, problem=problem)


def _current_accuracies(model_ids: set[int]) -> dict[int, dict[str, float]]:
    """model id -> suite name -> current accuracy (suites without predictions have none)."""
    accuracy: dict[int, dict[str, float]] = {}
    for model_id, suite_name, value in (
        Evaluation.objects.filter(
            status=DONE,
            content_hash=F("suite__content_hash"),
            accuracy__isnull=False,
            word_probability="tokens",
            subset_size=0,
        )
        .order_by()
        .values_list("model_id", "suite__name", "accuracy")
    ):
        # value is never None here (the filter); the check tells the type checker so.
        if model_id in model_ids and value is not None:
            accuracy.setdefault(model_id, {})[suite_name] = value
    return accuracy


def _points(
    model: LanguageModel, mine: dict[str, float], other: LanguageModel, theirs: dict[str, float]
) -> list[dict[str, Any]]:
    pair = urlencode({"models": f"{model.name},{other.name}"})
    return [
        {
            "suite": suite,
            "x": mine[suite],
            "y": theirs[suite],
            "url": f"{reverse('evaluations:compare', args=[suite])}?{pair}",
        }
        for suite in sorted(mine.keys() & theirs.keys())
    ]
