"""What the probing kind hands other rooms through the run kinds registry (`RunKind` in
`services.py` names these): its results for learning curves and their chance line, and
its sections of the leaderboard page and of a model's page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import template
from django.utils.safestring import SafeString

from evaluations.boards import leaderboard as boards
from evaluations.models import LanguageModel, ProbingRun
from evaluations.probing import selectors
from evaluations.runs.reads import KindResult, included, results_of
from evaluations.statistics import majority_rate


def probing_results(
    *, models: Sequence[str], benchmarks: Sequence[Any], subset: Any = None
) -> list[KindResult]:
    """Mean pooling with a logistic regression, as curves show them; the accuracy is te
    at the layer chosen on va."""
    return results_of(
        ProbingRun.objects.filter(pooling="mean", probe="logreg"),
        models=models,
        benchmarks=benchmarks,
        field="task",
        score="best_te",
        subset=subset,
    )


def probing_chances(benchmarks: Sequence[Any]) -> dict[int, float | None]:
    """A task's chance line: always answering the label most frequent in tr."""
    return {b.pk: majority_rate(b.counts) for b in benchmarks}


# What a probing task's curve measures: te accuracy of the probe (`probing_results`) at the
# layer chosen on va.
PROBING_METRIC = "probe"


def probing_metrics(benchmarks: Sequence[Any]) -> dict[int, str]:
    return {b.pk: PROBING_METRIC for b in benchmarks}


def _user(context: template.Context) -> Any:
    return getattr(context.get("request"), "user", None)


def board_section(context: template.Context, _subject: None) -> SafeString:
    """The probing section of the leaderboard page: pooling and probe from the query."""
    request = context.get("request")
    query = request.GET if request is not None else {}
    user = _user(context)
    board = selectors.probing_board(
        pooling=query.get("pooling", "").strip(),
        probe=query.get("probe", "").strip(),
        include_hidden=bool(user is not None and user.is_staff),
        # The page's suite board has already answered 404 for a run that is not there.
        training=boards.board_training(request) if request is not None else None,
    )
    data = {"board": board, "request": request, "user": user}
    return included(context, "evaluations/probing/_probing_leaderboard.html", data)


def model_section(context: template.Context, model: LanguageModel) -> SafeString:
    data = {"model": model, "curves": selectors.model_curves(model)}
    return included(context, "evaluations/probing/_probing_model.html", data)
