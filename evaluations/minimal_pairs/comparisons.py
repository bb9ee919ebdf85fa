"""Two models on one minimal-pair set, pair by pair: each model's accuracy with its 95%
interval, and McNemar's exact test over the pairs (how many pairs only one of them
gets right, and the p-value); and two models on every set they share, the p-values
Holm-adjusted across the sets. Current results only, as on the leaderboard: done runs
of the set's current content, under the analysis options of the stored accuracy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import F

from evaluations import compared_models
from evaluations.boards import leaderboard as boards
from evaluations.minimal_pairs import result_page
from evaluations.models import LanguageModel, PairEvaluation
from evaluations.statistics import ALPHA, PairedTest, holm, paired_by_item, wilson_interval
from suites.models import MinimalPairSet

DONE = PairEvaluation.Status.DONE
LETTERS = "AB"
TWO_AT_A_TIME = "two models are compared at a time"


@dataclass(frozen=True)
class ComparedRun:
    letter: str
    model: LanguageModel
    evaluation_id: int
    accuracy: float | None
    passed: int
    pairs: int

    @property
    def interval(self) -> tuple[float, float] | None:
        """The accuracy's 95% Wilson interval over the set's pairs."""
        return wilson_interval(self.passed, self.pairs)


@dataclass
class PairComparison:
    pair_set: MinimalPairSet
    # The models compared (those with a current result), in the order asked for.
    models: list[ComparedRun]
    # Names asked for that are not compared, each with the reason.
    left_out: list[tuple[str, str]]
    # Two models compared: McNemar's exact test over the pairs both runs analysed.
    paired: PairedTest | None = None

    @property
    def ready(self) -> bool:
        return self.paired is not None


def current_results(
    pair_set: MinimalPairSet, *, include_hidden: bool
) -> list[tuple[LanguageModel, int]]:
    """(model, run id) of every model with a current done run on the set, by display
    name: the comparison page's choices. One query."""
    runs = PairEvaluation.objects.filter(
        pair_set=pair_set,
        status=DONE,
        content_hash=pair_set.content_hash,
        word_probability="tokens",
        subset_size=0,
        metric=pair_set.metric,
    ).select_related("model")
    if not include_hidden:
        runs = runs.filter(model__is_hidden=False)
    return [(r.model, r.pk) for r in runs.order_by("model__display_name")]


def compare_pairs(pair_set: MinimalPairSet, names: Sequence[str]) -> PairComparison:
    """The first two of the named models that have a current run on the set, side by
    side; a name without one (or past the second) is left out with the reason, a name
    given twice counts once."""
    names, left_out = compared_models.read_names(names)
    found = {m.name: m for m in LanguageModel.objects.filter(name__in=names)}
    runs = {
        run.model.name: run
        for run in PairEvaluation.objects.filter(
            pair_set=pair_set,
            status=DONE,
            content_hash=pair_set.content_hash,
            model__name__in=names,
            word_probability="tokens",
            subset_size=0,
            metric=pair_set.metric,
        ).select_related("model", "pair_set")
    }
    chosen = [
        runs[name]
        for name in compared_models.choose(
            names,
            left_out,
            found=found,
            current=runs,
            where="set",
            most=len(LETTERS),
            too_many=TWO_AT_A_TIME,
        )
    ]
    outcomes: list[dict[int, bool]] = []
    compared: list[PairEvaluation] = []
    for run in chosen:
        try:
            outcomes.append(result_page.pair_outcomes(run))
        except result_page.PageQueryError as bad:
            left_out.append((run.model.name, f"its run cannot be analysed: {bad}"))
            continue
        compared.append(run)
    models = [
        ComparedRun(
            letter=letter,
            model=run.model,
            evaluation_id=run.pk,
            accuracy=run.accuracy,
            passed=sum(1 for acc in pairs.values() if acc),
            pairs=len(pairs),
        )
        for letter, run, pairs in zip(LETTERS, compared, outcomes, strict=False)
    ]
    paired = paired_by_item(outcomes[0], outcomes[1]) if len(outcomes) == 2 else None
    return PairComparison(pair_set=pair_set, models=models, left_out=left_out, paired=paired)


@dataclass(frozen=True)
class SetTest:
    """Two models' paired test on one set of several, with its Holm-adjusted p-value."""

    set_name: str
    evaluation_ids: tuple[int, int]
    test: PairedTest
    adjusted_p: float
    # The metric both runs are of: the set's own (the runs are read so).
    metric: str = ""

    @property
    def significant(self) -> bool:
        return self.adjusted_p < ALPHA


@dataclass
class AcrossSets:
    """Two models on every set both have a current result for (within one tag group):
    McNemar's test per set, the p-values Holm-adjusted across those sets."""

    models: list[LanguageModel]
    left_out: list[tuple[str, str]]
    tag: str
    sets: list[SetTest]


def compare_across_sets(names: Sequence[str], *, tag: str = "") -> AcrossSets:
    """The first two named models on every set (of the `tag` group, as the leaderboard
    groups them; every set without one) both have a current result with an accuracy
    for. A set where either run cannot be analysed is left out with the reason."""
    names, left_out = compared_models.read_names(names)
    found = {m.name: m for m in LanguageModel.objects.filter(name__in=names)}
    models = [
        found[name]
        for name in compared_models.choose(
            names, left_out, found=found, most=len(LETTERS), too_many=TWO_AT_A_TIME
        )
    ]
    if len(models) < 2:
        return AcrossSets(models=models, left_out=left_out, tag=tag, sets=[])
    columns = boards.data_columns(MinimalPairSet.objects.all(), metric=True)
    if tag:
        groups = [g for g in boards.tag_groups(columns) if g.tag == tag]
        columns = groups[0].suites if groups else []
    wanted = {c.id: c.name for c in columns}
    runs: dict[tuple[int, int], PairEvaluation] = {}
    for run in PairEvaluation.objects.filter(
        status=DONE,
        content_hash=F("pair_set__content_hash"),
        model__in=models,
        accuracy__isnull=False,
        word_probability="tokens",
        subset_size=0,
        metric=F("pair_set__metric"),
    ).select_related("model", "pair_set"):
        if run.pair_set_id in wanted:
            runs[(run.model_id, run.pair_set_id)] = run
    tested: list[tuple[str, tuple[int, int], PairedTest, str]] = []
    for set_id, set_name in sorted(wanted.items(), key=lambda kv: kv[1]):
        pair = [runs.get((m.pk, set_id)) for m in models]
        if pair[0] is None or pair[1] is None:
            continue
        first, second = pair[0], pair[1]
        try:
            test = paired_by_item(
                result_page.pair_outcomes(first), result_page.pair_outcomes(second)
            )
        except result_page.PageQueryError as bad:
            left_out.append((set_name, f"cannot be analysed: {bad}"))
            continue
        tested.append((set_name, (first.pk, second.pk), test, first.metric))
    adjusted = holm([test.p_value for _n, _ids, test, _m in tested])
    return AcrossSets(
        models=models,
        left_out=left_out,
        tag=tag,
        sets=[
            SetTest(set_name=name, evaluation_ids=ids, test=test, adjusted_p=p, metric=metric)
            for (name, ids, test, metric), p in zip(tested, adjusted, strict=True)
        ],
    )
