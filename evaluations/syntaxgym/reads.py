"""What the suite kind hands other rooms through the run kinds registry (`RunKind` in
`services.py` names these): its results for learning curves and their chance line, its
board (the leaderboard page's table) and the head of a model's page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import F
from django.http import HttpRequest

from evaluations.baseline import BASELINE_NAME
from evaluations.models import Evaluation, LanguageModel
from evaluations.runs.reads import KindResult, results_of
from evaluations.syntaxgym import comparisons, selectors


def suite_results(
    *, models: Sequence[str], benchmarks: Sequence[Any], subset: Any = None
) -> list[KindResult]:
    """The models' results on the suites, as curves show them (word probabilities of
    whole tokens, the site's default)."""
    return results_of(
        Evaluation.objects.filter(word_probability="tokens"),
        models=models,
        benchmarks=benchmarks,
        field="suite",
        score="accuracy",
        subset=subset,
    )


def suite_chances(benchmarks: Sequence[Any]) -> dict[int, float | None]:
    """A suite's chance line: the random baseline's done result on the suite's current
    content where there is one (a suite's predictions have no chance level in general:
    a model at random satisfies an unknown share of them)."""
    baseline = Evaluation.objects.filter(
        model__name=BASELINE_NAME,
        suite__in=benchmarks,
        status=Evaluation.Status.DONE,
        word_probability="tokens",
        subset_size=0,
        content_hash=F("suite__content_hash"),
    ).order_by("pk")
    return dict(baseline.values_list("suite_id", "accuracy"))


# What a suite's curve measures: the share of its evaluable items whose predictions all hold.
SUITE_METRIC = "predictions"


def suite_metrics(benchmarks: Sequence[Any]) -> dict[int, str]:
    return {b.pk: SUITE_METRIC for b in benchmarks}


def model_page(request: HttpRequest, model: LanguageModel) -> dict[str, Any]:
    """The head of a model's page: its suite scores, the scatter against another model
    (`?vs=`) and, for a signed-in user, its outdated evaluations."""
    staff = bool(request.user.is_staff)
    return {
        "scores": selectors.model_scores(model),
        "scatter": comparisons.model_scatter(
            model, request.GET.get("vs", "").strip(), include_hidden=staff
        ),
        "outdated": selectors.outdated_pairs(model=model) if request.user.is_authenticated else [],
    }
