"""What the minimal-pair kind hands other rooms through the run kinds registry
(`RunKind` in `services.py` names these): its results for learning curves and their
chance line, and its sections of the leaderboard page and of a model's page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import template
from django.db.models import F
from django.utils.safestring import SafeString

from evaluations.minimal_pairs import selectors
from evaluations.minimal_pairs.result_views import pair_board
from evaluations.models import LanguageModel, PairEvaluation
from evaluations.runs.reads import KindResult, included, results_of

# A minimal pair is right or wrong: a model that picks one sentence at random is right
# half the time.
PAIRS_CHANCE = 0.5


def pair_results(
    *, models: Sequence[str], benchmarks: Sequence[Any], subset: Any = None
) -> list[KindResult]:
    """The models' results on the sets, as curves show them: runs of each set's own
    metric (as the boards rank them), so that a curve never mixes metrics."""
    return results_of(
        PairEvaluation.objects.filter(word_probability="tokens", metric=F("pair_set__metric")),
        models=models,
        benchmarks=benchmarks,
        field="pair_set",
        score="accuracy",
        subset=subset,
    )


def pair_chances(benchmarks: Sequence[Any]) -> dict[int, float | None]:
    return {b.pk: PAIRS_CHANCE for b in benchmarks}


def pair_metrics(benchmarks: Sequence[Any]) -> dict[int, str]:
    """Each set's curve is of its own metric (`pair_results`)."""
    return {b.pk: b.metric for b in benchmarks}


def board_section(context: template.Context, _subject: None) -> SafeString:
    """The minimal-pair section of the leaderboard page, for the page's query string."""
    request = context["request"]
    data = {"board": pair_board(request), "user": request.user, "prefix": selectors.SORT_PREFIX}
    return included(context, "evaluations/minimal_pairs/_pair_leaderboard.html", data)


def model_section(context: template.Context, model: LanguageModel) -> SafeString:
    data = {"model": model, "results": selectors.model_pair_results(model)}
    return included(context, "evaluations/minimal_pairs/_model_pairs.html", data)
