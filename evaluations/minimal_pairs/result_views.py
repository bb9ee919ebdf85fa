"""Pages and downloads of minimal-pair results: the result page of one run (its
progress while it runs), the leaderboard section's board and its CSV and JSON. Thin:
each parses the request, calls a selector and renders."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations import leaderboard as boards
from evaluations.leaderboard import board_query
from evaluations.minimal_pairs import result_page as pair_result_page
from evaluations.minimal_pairs import results as pair_results
from evaluations.minimal_pairs import selectors as pair_selectors
from evaluations.models import PairEvaluation
from gym.downloads import attachment


def pair_board(request: HttpRequest | Request) -> boards.Leaderboard:
    """The minimal-pair board as the query string asks for it: the tag shared with the
    suites' board, the sort its own (pairs_sort, pairs_dir); staff also see hidden
    models."""
    return pair_selectors.pair_leaderboard(**board_query(request, pair_selectors.SORT_PREFIX))


def pair_leaderboard_csv_view(request: HttpRequest) -> HttpResponse:
    board = pair_board(request)
    stem = f"leaderboard-minimal-pairs-{slugify(board.tag)}" if board.tag else None
    name = f"{stem or 'leaderboard-minimal-pairs'}.csv"
    return attachment(boards.leaderboard_csv(board, noun="sets"), "text/csv; charset=utf-8", name)


class PairLeaderboardAPI(APIView):
    """Models x minimal-pair sets: per-set pair accuracy under the default analysis
    options (current set content only), group means by tag and the overall score (mean
    set accuracy)."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            OpenApiParameter("tag", str, description="Keep one tag group ('untagged' too)"),
            OpenApiParameter(
                "pairs_sort",
                str,
                description="A set name, 'group:<tag>', 'overall' or 'model'",
            ),
            OpenApiParameter("pairs_dir", str, enum=["asc", "desc"]),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        return Response(boards.leaderboard_data(pair_board(request), noun="sets"))


MEASURES = [
    ("surp", "surprisal"),
    ("prob", "probability"),
    ("perplexity", "perplexity"),
]
PUNCTUATION = [
    ("previous", "with the word before"),
    ("next", "with the word after"),
    ("separate", "as words of its own"),
    ("ignore", "left out"),
]
# The four NLPScholar tables (the API's table endpoint serves them), as the page's
# downloads label them and the file-name endings NLPScholar gives them.
TABLES = [
    ("tokens", "token table", "_predictions"),
    ("by_word", "by_word", "_byword"),
    ("by_pair", "by_pair", "_bypair"),
    ("by_cond", "by_cond", ""),
]


def _downloads(evaluation: PairEvaluation) -> list[tuple[str, str, str]]:
    """(table, label, file name) of the page's four TSV downloads."""
    stem = f"{slugify(evaluation.pair_set.name) or 'pairs'}__{evaluation.model.name}"
    return [(table, label, f"{stem}{ending}.tsv") for table, label, ending in TABLES]


def _run(pk: int) -> PairEvaluation:
    return get_object_or_404(
        PairEvaluation.objects.select_related("model", "pair_set", "requested_by"), pk=pk
    )


def pair_result_view(request: HttpRequest, pk: int) -> HttpResponse:
    """A run's progress while it runs, its results once done."""
    evaluation = _run(pk)
    context: dict[str, Any] = {"evaluation": evaluation}
    if evaluation.status != PairEvaluation.Status.DONE:
        return render(request, "evaluations/pair_result.html", context)
    try:
        page = pair_result_page.result_page(evaluation, request.GET)
    except pair_result_page.PageQueryError as bad:
        return render(request, "400.html", {"message": str(bad)}, status=400)
    defaults = pair_results.DEFAULT_OPTIONS
    context.update(
        result=page,
        plot=page.summary.plot(),
        option_params=pair_result_page.options_query(page.options),
        measure_choices=MEASURES,
        punctuation_choices=PUNCTUATION,
        tables=_downloads(evaluation),
        default_label=f"{defaults.pred_measure}, {defaults.word_summary}, "
        f"punctuation {defaults.punctuation}",
    )
    return render(request, "evaluations/pair_result.html", context)
