"""Reads of minimal-pair results that the leaderboard, the model page and the set page
share: the board of models x minimal-pair sets (built by `boards.board`, as the
suites' one is), and the list of one model's or one set's runs. The result page of one
run has its own module (`result_page`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Unpack

from django.db.models import F

from evaluations.boards import leaderboard as boards
from evaluations.minimal_pairs import result_page as pair_result_page
from evaluations.models import LanguageModel, PairEvaluation
from evaluations.statistics import wilson_interval
from suites.models import MinimalPairSet

DONE = PairEvaluation.Status.DONE
# The leaderboard page's query parameters for this section's sort (the tag is shared).
SORT_PREFIX = "pairs_"


def pair_leaderboard(
    *,
    intervals: bool = False,
    significance: bool = False,
    **query: Unpack[boards.BoardQuery],
) -> boards.Leaderboard:
    """Models x minimal-pair sets: each cell the pair accuracy (default analysis
    options) of the done run on the set's current content; runs on earlier content are
    left out, as on the suites' board. Three queries. `training` (a training run,
    `boards.board_training`) makes its checkpoints the rows, by tokens seen.

    `intervals` adds each cell's 95% Wilson interval over the set's pairs (one more
    query). `significance` tests each row against the one above it, as the suites'
    board does (McNemar per shared set, Holm-adjusted): it reads every shown run's
    per-pair outcomes, from the cached analysis its result page opens with, or by
    analysing the run where no page has yet."""
    # Word-corrected runs measure another quantity: never ranked with the rest.
    current = PairEvaluation.objects.filter(
        status=DONE,
        content_hash=F("pair_set__content_hash"),
        word_probability="tokens",
        metric=F("pair_set__metric"),
        # Runs on a subset (the fast subset for sweeps) are another sample.
        subset_size=0,
    ).order_by()
    cell_interval = None
    if intervals:
        pairs = dict(MinimalPairSet.objects.values_list("id", "pair_count"))

        def cell_interval(set_id: int, accuracy: float, _run: int) -> tuple[float, float] | None:
            count = pairs.get(set_id, 0)
            return wilson_interval(round(accuracy * count), count)

    return boards.board(
        boards.data_columns(MinimalPairSet.objects.all(), metric=True),
        current,
        "pair_set_id",
        **query,
        interval=cell_interval,
        passed=_passed_by_pair if significance else None,
    )


def _passed_by_pair(shown: boards.Leaderboard) -> dict[int, dict[int, bool | None]]:
    """run id -> pair ordinal -> passed, of the board's cells with an accuracy. A run
    that cannot be analysed (its sentences no longer stored) has no outcomes, so the
    test over its set finds no pair in common."""
    passed: dict[int, dict[int, bool | None]] = {}
    runs = PairEvaluation.objects.filter(pk__in=shown.scored_runs()).select_related(
        "model", "pair_set"
    )
    for run in runs.order_by():
        try:
            passed[run.pk] = dict(pair_result_page.pair_outcomes(run))
        except pair_result_page.PageQueryError:
            passed[run.pk] = {}
    return passed


@dataclass
class PairScore:
    """One run of a model on a minimal-pair set, as the model and set pages list them."""

    evaluation_id: int
    set_name: str
    model: LanguageModel
    status: str
    accuracy: float | None
    ties: int
    outdated: bool
    finished_at: datetime | None
    tags: tuple[str, ...] = ()
    metric: str = "nlpscholar"  # how the accuracy compares pairs
    # "subset: 200 of 1,000 pairs, seed 0" for a run on a subset; "" for the whole set.
    subset: str = ""

    @property
    def done(self) -> bool:
        return self.status == DONE


def _scores(runs: list[PairEvaluation], tags: dict[int, tuple[str, ...]]) -> list[PairScore]:
    """Current content first (done ones best first, then those still running or
    failed), then done results of earlier content, marked outdated; a run of earlier
    content that never finished says nothing and is left out."""
    scores = []
    for run in runs:
        outdated = run.content_hash != run.pair_set.content_hash
        if outdated and run.status != DONE:
            continue
        scores.append(
            PairScore(
                evaluation_id=run.pk,
                set_name=run.pair_set.name,
                model=run.model,
                status=run.status,
                accuracy=run.accuracy if run.status == DONE else None,
                ties=run.ties,
                outdated=outdated,
                finished_at=run.finished_at,
                tags=tags.get(run.pair_set_id, ()),
                metric=run.metric,
                subset=run.subset_label,
            )
        )

    def rank(s: PairScore) -> tuple[bool, bool, bool, float, str, str]:
        return (
            s.outdated,
            not s.done,
            s.accuracy is None,
            -(s.accuracy or 0.0),
            s.set_name,
            s.model.display_name.lower(),
        )

    return sorted(scores, key=rank)


def _runs(**filters: object) -> list[PairEvaluation]:
    # Only the columns the lists show: diagnostics and model info may be large.
    # Ordinary runs only, as the suites' lists: word-corrected ones are the API's.
    return list(
        PairEvaluation.objects.filter(word_probability="tokens", **filters)
        .select_related("model", "pair_set")
        .only(
            "id",
            "status",
            "accuracy",
            "ties",
            "metric",
            "content_hash",
            "finished_at",
            "created_at",
            "subset_size",
            "subset_seed",
            "subset_total",
            *(f"model__{field}" for field in LanguageModel.SHOWN_FIELDS),
            "pair_set__name",
            "pair_set__content_hash",
        )  # fmt: skip
        .order_by("-created_at")
    )


def model_pair_results(model: LanguageModel) -> list[PairScore]:
    """The model's minimal-pair runs, set by set (see `_scores` for the order). Two
    queries."""
    runs = _runs(model=model)
    sets = MinimalPairSet.objects.filter(
        pk__in=PairEvaluation.objects.filter(model=model, word_probability="tokens").values(
            "pair_set_id"
        )
    )
    columns = boards.data_columns(sets, metric=True)
    return _scores(runs, {c.id: c.tags for c in columns})


def pair_set_results(pair_set: MinimalPairSet, *, include_hidden: bool = False) -> list[PairScore]:
    """The set's runs by model (see `_scores` for the order). One query."""
    filters: dict[str, object] = {"pair_set": pair_set}
    if not include_hidden:
        filters["model__is_hidden"] = False
    return _scores(_runs(**filters), {})
