"""Reads of stored results that the leaderboard, the model, suite and result pages, the
API and the downloads share. Nothing here computes surprisal: it reads what the store
task wrote (region values in bits, prediction outcomes, accuracies). Laying the reads out
as CSV or JSON downloads is `exports`' work; the plot's means and intervals are `plots`'.

The leaderboard reads a fixed number of queries whatever the number of models or suites:
plain tuples from `values_list`, grouped in Python, never a query per model or per suite.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Unpack

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet

from evaluations.boards.leaderboard import (
    UNTAGGED,
    BoardQuery,
    Leaderboard,
    SuiteColumn,
    board,
    data_columns,
    mean_of,
    tag_groups,
)
from evaluations.models import (
    IMPORTED_PREFIX,
    ITEM_ROWS_SHOWN,
    Evaluation,
    ItemResult,
    LanguageModel,
    PredictionResult,
)
from evaluations.plots import plot_data, without_empty_regions
from evaluations.statistics import wilson_interval
from evaluations.subsets import subset_text
from evaluations.syntaxgym.missing import MissingReason, MissingSummary, sentence_reasons
from suites.formats import condition_names, region_names
from suites.models import Suite

DONE = Evaluation.Status.DONE


# --- leaderboard -----------------------------------------------------------------------


def _suite_columns() -> list[SuiteColumn]:
    return data_columns(Suite.objects.all())


def leaderboard(
    *,
    intervals: bool = False,
    significance: bool = False,
    **query: Unpack[BoardQuery],
) -> Leaderboard:
    """Models x suites with each model's current accuracy.

    A cell holds the DONE evaluation whose content hash is the suite's current one;
    results of earlier content are left out. `tag` keeps one group ("untagged" for the
    suites without tags). `sort` is a suite name, "group:<tag>", "overall" or "model";
    anything else sorts by overall score. Rows without a value in the sorted column go
    last in either direction. The overall score and the group means compare like with
    like: they are means over the suites every row has an accuracy for (`compared`), so
    a model with fewer suites is not ranked on a different set. Three queries in all.
    `training` (a training run) makes its checkpoints the rows, by tokens seen.
    `intervals` adds each cell's 95% Wilson interval, `significance` tests each row
    against the one above it (`mark_versus_above`): one more query each.
    """
    # No ordering: the rows are grouped in Python, and sorting would read created_at.
    # Word-corrected runs measure another quantity, and runs on a subset (the fast
    # subset for sweeps) another sample: never ranked with the rest.
    current = Evaluation.objects.filter(
        status=DONE,
        content_hash=F("suite__content_hash"),
        word_probability="tokens",
        subset_size=0,
    ).order_by()
    cell_interval = None
    if intervals:
        counts = item_counts(current)

        def cell_interval(_suite: int, _accuracy: float, pk: int) -> tuple[float, float] | None:
            return wilson_interval(*counts.get(pk, (0, 0)))

    return board(
        _suite_columns(),
        current,
        "suite_id",
        **query,
        interval=cell_interval,
        passed=(lambda shown: _passed_by_item(current, shown)) if significance else None,
    )


def _passed_by_item(
    current: QuerySet[Evaluation], shown: Leaderboard
) -> dict[int, dict[int, bool | None]]:
    """evaluation id -> item number -> passed, of the board's cells with an accuracy (the
    items a missing value leaves without an outcome are not read). One query."""
    wanted = shown.scored_runs()
    models = [row.model.pk for row in shown.rows]
    passed: dict[int, dict[int, bool | None]] = defaultdict(dict)
    rows = ItemResult.objects.filter(
        ITEM_ROWS_SHOWN,
        evaluation__in=current.filter(model_id__in=models).values("id"),
        passed__isnull=False,
    ).values_list("evaluation_id", "item_number", "passed")
    for evaluation_id, number, outcome in rows.order_by():
        if evaluation_id in wanted:
            passed[evaluation_id][number] = outcome
    return passed


# --- one model, one suite ----------------------------------------------------------------


@dataclass
class SuiteScore:
    """One evaluation of a model on a suite, as the model and suite pages list them."""

    evaluation_id: int
    suite_name: str
    model: LanguageModel | None
    status: str
    accuracy: float | None
    outdated: bool
    created_at: datetime
    finished_at: datetime | None
    tags: tuple[str, ...] = ()
    # The items the accuracy is over: those passing, and those every prediction could be
    # judged on (0 and 0 until done).
    items_passed: int = 0
    items_evaluated: int = 0
    # "subset: 200 of 1,000 items, seed 0" for a run on a subset; "" for the whole suite.
    subset: str = ""

    @property
    def done(self) -> bool:
        return self.status == DONE

    @property
    def interval(self) -> tuple[float, float] | None:
        """The accuracy's 95% Wilson interval (None without an accuracy)."""
        if self.accuracy is None:
            return None
        return wilson_interval(self.items_passed, self.items_evaluated)


def item_counts(evaluations: QuerySet[Evaluation]) -> dict[int, tuple[int, int]]:
    """evaluation id -> (items passing, items evaluable) of the given evaluations: what
    an accuracy is the share of, for its interval. One query, grouped in the database."""
    rows = (
        ItemResult.objects.filter(ITEM_ROWS_SHOWN, evaluation__in=evaluations.values("id"))
        .order_by()
        .values("evaluation_id")
        .annotate(passing=Count("id", filter=Q(passed=True)), evaluable=Count("passed"))
        .values_list("evaluation_id", "passing", "evaluable")
    )
    return {pk: (passing, evaluable) for pk, passing, evaluable in rows}


@dataclass
class TagScore:
    tag: str
    mean: float | None
    covered: int
    total: int


@dataclass
class ModelScores:
    model: LanguageModel
    # Current-content evaluations of any status, then results of earlier content, by suite.
    suites: list[SuiteScore]
    tags: list[TagScore]
    overall: float | None
    covered: int
    total: int


def model_scores(model: LanguageModel) -> ModelScores:
    """The model's evaluations suite by suite, its mean per tag and its overall score.

    Per-tag means and the overall score use current results only, as the leaderboard does;
    done results of earlier suite content are listed, marked outdated. Three queries
    (the third counts the items behind each accuracy, for its interval).
    """
    columns = _suite_columns()
    by_id = {s.id: s for s in columns}
    rows = (
        Evaluation.objects.filter(model=model, word_probability="tokens")
        .order_by("suite__name", "-created_at")
        .values_list(
            "id",
            "suite_id",
            "status",
            "accuracy",
            "content_hash",
            "suite__content_hash",
            "created_at",
            "finished_at",
            "subset_size",
            "subset_total",
            "subset_seed",
        )
    )
    counts = item_counts(
        Evaluation.objects.filter(model=model, status=DONE, word_probability="tokens")
    )
    scores: list[SuiteScore] = []
    current: dict[int, float | None] = {}
    for (
        pk, suite_id, status, accuracy, content_hash, suite_hash, created, finished,
        size, total, seed,
    ) in rows:  # fmt: skip
        outdated = content_hash != suite_hash
        if outdated and status != DONE:
            # Only done evaluations have results; a failed run of old content says nothing.
            continue
        # A run on a subset is listed, marked, but counts in no mean.
        if not outdated and status == DONE and not size:
            current[suite_id] = accuracy
        scores.append(
            SuiteScore(
                evaluation_id=pk,
                suite_name=by_id[suite_id].name,
                model=model,
                status=status,
                accuracy=accuracy if status == DONE else None,
                outdated=outdated,
                created_at=created,
                finished_at=finished,
                tags=by_id[suite_id].tags,
                items_passed=counts.get(pk, (0, 0))[0],
                items_evaluated=counts.get(pk, (0, 0))[1],
                subset=subset_text(size, total, seed) if size else "",
            )
        )
    scores.sort(key=lambda s: (s.suite_name, s.outdated, bool(s.subset)))
    tags = [
        TagScore(
            tag=g.tag,
            mean=mean_of(current.get(s.id) for s in g.suites),
            covered=sum(1 for s in g.suites if current.get(s.id) is not None),
            total=len(g.suites),
        )
        for g in tag_groups(columns)
    ]
    return ModelScores(
        model=model,
        suites=scores,
        tags=tags,
        overall=mean_of(current.values()),
        covered=sum(1 for a in current.values() if a is not None),
        total=len(columns),
    )


def suite_results(suite: Suite, *, include_hidden: bool = False) -> list[SuiteScore]:
    """The suite's evaluations by model: current content first (done ones by accuracy,
    best first, then those still running or failed), then done results of earlier
    content, marked outdated. Two queries (the second counts the items behind each
    accuracy, for its interval)."""
    counts = item_counts(
        Evaluation.objects.filter(suite=suite, status=DONE, word_probability="tokens")
    )
    evaluations = Evaluation.objects.filter(suite=suite, word_probability="tokens")
    evaluations = evaluations.select_related("model")
    if not include_hidden:
        evaluations = evaluations.filter(model__is_hidden=False)
    scores = []
    for e in evaluations.order_by("-created_at"):
        outdated = e.content_hash != suite.content_hash
        if outdated and e.status != DONE:
            continue
        scores.append(
            SuiteScore(
                evaluation_id=e.pk,
                suite_name=suite.name,
                model=e.model,
                status=e.status,
                accuracy=e.accuracy if e.status == DONE else None,
                outdated=outdated,
                created_at=e.created_at,
                finished_at=e.finished_at,
                items_passed=counts.get(e.pk, (0, 0))[0],
                items_evaluated=counts.get(e.pk, (0, 0))[1],
                subset=e.subset_label,
            )
        )

    def rank(s: SuiteScore) -> tuple[bool, bool, bool, bool, float, str]:
        name = s.model.display_name.lower() if s.model else ""
        return (
            s.outdated,
            bool(s.subset),
            not s.done,
            s.accuracy is None,
            -(s.accuracy or 0.0),
            name,
        )

    return sorted(scores, key=rank)


def outdated_pairs(
    *, model: LanguageModel | None = None, suite: Suite | None = None
) -> list[tuple[LanguageModel, Suite]]:
    """(model, suite) pairs whose done results are for an earlier content of the suite
    and that have no evaluation (in any state) of its current content: what "re-run
    everything outdated" queues. Hidden models, models registered only for imported
    results and archived suites take no new runs.
    Narrowed to `model` and/or `suite`; in model, then suite name order. One query."""
    current = Evaluation.objects.filter(
        model=OuterRef("model"),
        suite=OuterRef("suite"),
        content_hash=OuterRef("suite__content_hash"),
        word_probability="tokens",
        subset_size=0,
    )
    old = (
        Evaluation.objects.filter(
            status=DONE,
            model__is_hidden=False,
            suite__archived_at__isnull=True,
            word_probability="tokens",
            subset_size=0,
        )
        .exclude(content_hash=F("suite__content_hash"))
        .exclude(Exists(current))
        .exclude(model__source__startswith=IMPORTED_PREFIX)
    )
    if model is not None:
        old = old.filter(model=model)
    if suite is not None:
        old = old.filter(suite=suite)
    pairs: dict[tuple[int, int], tuple[LanguageModel, Suite]] = {}
    rows = old.select_related("model", "suite")
    for e in rows.order_by("model__name", "suite__name"):
        pairs.setdefault((e.model_id, e.suite_id), (e.model, e.suite))
    return list(pairs.values())


# --- one evaluation's results ------------------------------------------------------------


@dataclass
class RegionCell:
    content: str
    # The page's metric in bits; None where the value is missing.
    value: float | None
    # Why the value is missing (None where it is not).
    missing: MissingReason | None = None


@dataclass
class ItemCondition:
    name: str
    cells: list[RegionCell]


@dataclass
class ItemRow:
    item_number: int
    outcomes: list[bool | None]
    passed: bool | None
    # Each condition's sentence region by region with its value, in the suite's order.
    conditions: list[ItemCondition] = field(default_factory=list)


@dataclass
class ResultPage:
    evaluation: Evaluation
    outdated: bool
    metric: str
    accuracy: float | None
    items_passed: int
    items_evaluated: int
    predictions: list[PredictionResult]
    items: list[ItemRow]
    conditions: list[str]
    # (number, name) in region order.
    regions: list[tuple[int, str]]
    region_names: dict[int, str]
    # JSON for the surprisal plot (see `plot_data`).
    plot: dict[str, Any]
    # From the run's diagnostics; None for runs that did not count them.
    straddling_tokens: int | None = None
    regions_without_tokens: int | None = None
    straddling_rule: str = "missing"
    # Tied strict comparisons (each failed) and the accuracy had ties been coin flips.
    ties: int = 0
    accuracy_random_ties: float | None = None
    # Words an n-gram model does not know (None for other kinds), and words scored.
    oov_words: int | None = None
    words: int | None = None
    # Missing region values counted by reason.
    missing: MissingSummary = field(default_factory=MissingSummary)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The accuracy's 95% Wilson interval over the evaluable items (None without)."""
        if self.accuracy is None:
            return None
        return wilson_interval(self.items_passed, self.items_evaluated)

    @property
    def items_failed(self) -> int:
        """Items with an outcome that fail (items a missing value leaves without one are
        neither passing nor failing)."""
        return self.items_evaluated - self.items_passed


def _region_numbers(snapshot: dict[str, Any]) -> list[int]:
    return sorted(int(k) for k in snapshot["region_meta"])


def result_page(evaluation: Evaluation) -> ResultPage:
    """Everything the result page of one done evaluation shows. Two queries."""
    snapshot = evaluation.snapshot
    numbers = _region_numbers(snapshot)
    names = region_names(snapshot)
    rows = list(
        evaluation.item_results.filter(ITEM_ROWS_SHOWN).values_list(
            "item_number", "values", "outcomes", "passed"
        )
    )
    by_number = {i["item_number"]: i for i in snapshot.get("items", [])}
    items = [
        ItemRow(
            item_number=n,
            outcomes=list(o or []),
            passed=p,
            conditions=item_conditions(by_number.get(n, {}), v or {}, evaluation.metric),
        )
        for n, v, o, p in rows
    ]
    conditions = condition_names(snapshot)
    missing = _missing_reasons(evaluation, items, by_number)
    return ResultPage(
        evaluation=evaluation,
        outdated=evaluation.content_hash != evaluation.suite.content_hash,
        metric=evaluation.metric,
        accuracy=evaluation.accuracy,
        items_passed=sum(1 for i in items if i.passed),
        items_evaluated=sum(1 for i in items if i.passed is not None),
        predictions=list(evaluation.prediction_results.all()),
        items=items,
        conditions=conditions,
        regions=list(zip(numbers, names, strict=True)),
        region_names=dict(zip(numbers, names, strict=True)),
        plot=plot_data(
            [without_empty_regions(v or {}, by_number.get(n, {})) for n, v, _o, _p in rows],
            conditions,
            list(zip(numbers, names, strict=True)),
            evaluation.metric,
        ),
        straddling_tokens=_count(evaluation.diagnostics, "straddling_tokens"),
        regions_without_tokens=_count(evaluation.diagnostics, "regions_without_tokens"),
        straddling_rule=str((evaluation.diagnostics or {}).get("straddling_rule") or "missing"),
        ties=evaluation.ties,
        accuracy_random_ties=evaluation.accuracy_random_ties,
        oov_words=_count(evaluation.diagnostics, "oov_words"),
        words=_count(evaluation.diagnostics, "tokens"),
        missing=missing,
    )


def _missing_reasons(
    evaluation: Evaluation, items: list[ItemRow], by_number: dict[int, dict[str, Any]]
) -> MissingSummary:
    """Why each missing region value is missing, set on its cell and counted. Reads the
    stored tokens of the items that have a missing value only (one query, none where
    nothing is missing)."""
    summary = MissingSummary()
    wanted = [
        item
        for item in items
        if any(
            cell.value is None and cell.content.strip()
            for condition in item.conditions
            for cell in condition.cells
        )
    ]
    if not wanted:
        return summary
    stored = dict(
        evaluation.item_results.filter(
            ITEM_ROWS_SHOWN, item_number__in=[item.item_number for item in wanted]
        ).values_list("item_number", "tokens")
    )
    kind = str((evaluation.model_info or {}).get("kind") or evaluation.model.kind)
    for item in wanted:
        packed = stored.get(item.item_number)
        snapshot_conditions = {
            c["condition_name"]: c
            for c in by_number.get(item.item_number, {}).get("conditions", [])
        }
        for condition in item.conditions:
            regions = snapshot_conditions[condition.name]["regions"]
            order = sorted(range(len(regions)), key=lambda i: regions[i]["region_number"])
            reasons = sentence_reasons(
                [str(regions[i].get("content", "")) for i in order],
                [regions[i]["region_number"] for i in order],
                [condition.cells[i].value if i < len(condition.cells) else None for i in order],
                None if packed is None else packed.get(condition.name),
                kind,
            )
            for i, reason in zip(order, reasons, strict=True):
                if reason is not None and i < len(condition.cells):
                    condition.cells[i].missing = reason
                    summary.add(reason)
    return summary


def item_conditions(
    item: dict[str, Any], values: dict[str, Any], metric: str
) -> list[ItemCondition]:
    """The item's conditions as evaluated (from the snapshot) with the region values."""
    conditions = []
    for condition in item.get("conditions", []):
        name = condition["condition_name"]
        series = (values.get(name) or {}).get(metric) or []
        conditions.append(
            ItemCondition(
                name=name,
                cells=[
                    RegionCell(
                        content=str(region.get("content", "")),
                        value=series[i] if i < len(series) else None,
                    )
                    for i, region in enumerate(condition["regions"])
                ],
            )
        )
    return conditions


def _count(diagnostics: dict[str, Any] | None, key: str) -> int | None:
    value = (diagnostics or {}).get(key)
    return int(value) if isinstance(value, int | float) else None


# --- bulk export ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportedEvaluation:
    """What the long-format export needs of one evaluation besides its item rows."""

    id: int
    model: str
    suite: str
    region_meta: dict[str, str]
    formulas: list[str]


def export_selection(
    *,
    model: LanguageModel | None = None,
    suite: Suite | None = None,
    tag: str = "",
    include_hidden: bool = False,
) -> list[ExportedEvaluation]:
    """The current done evaluations (the leaderboard's cells) of one model, one suite, one
    tag's suites ("untagged" for suites without tags) or all of them, by suite then model.
    Two queries; the snapshots are not read, only their region names."""
    current = Evaluation.objects.filter(
        status=DONE,
        content_hash=F("suite__content_hash"),
        word_probability="tokens",
        subset_size=0,
    )
    if not include_hidden:
        current = current.filter(model__is_hidden=False)
    if model is not None:
        current = current.filter(model=model)
    if suite is not None:
        current = current.filter(suite=suite)
    if tag == UNTAGGED:
        current = current.filter(suite__tags__isnull=True)
    elif tag:
        current = current.filter(suite__tags__name=tag)
    rows = list(
        current.order_by("suite__name", "model__name").values_list(
            "id", "model__name", "suite__name", "snapshot_row__content__region_meta"
        )
    )
    formulas: dict[int, list[str]] = defaultdict(list)
    for evaluation_id, formula in (
        PredictionResult.objects.filter(evaluation_id__in=[r[0] for r in rows])
        .order_by("evaluation_id", "position")
        .values_list("evaluation_id", "formula")
    ):
        formulas[evaluation_id].append(formula)
    return [
        ExportedEvaluation(pk, model_name, suite_name, dict(meta or {}), formulas[pk])
        for pk, model_name, suite_name, meta in rows
    ]


def export_item_rows(
    evaluation_ids: Sequence[int],
) -> Iterable[tuple[int, int, dict[str, Any], list[bool | None]]]:
    """(evaluation id, item number, values, outcomes) of the evaluations' items in item
    order, read in chunks so that a whole leaderboard never sits in memory at once."""
    for evaluation_id in evaluation_ids:
        yield from (
            (evaluation_id, number, values, list(outcomes or []))
            for number, values, outcomes in ItemResult.objects.filter(
                ITEM_ROWS_SHOWN, evaluation_id=evaluation_id
            )
            .order_by("position")
            .values_list("item_number", "values", "outcomes")
            .iterator(chunk_size=500)
        )
