"""Pages and downloads of minimal-pair results: the result page of one run (its
progress while it runs), the leaderboard section's board and its CSV and JSON. Thin:
each parses the request, calls a selector and renders."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations import exports, pair_result_page, pair_results, pair_selectors, selectors
from evaluations.minimal_pairs.analysis import table_to_tsv
from evaluations.minimal_pairs.tokens import predictions_to_tsv
from evaluations.models import PairEvaluation


def pair_board(request: HttpRequest | Request) -> selectors.Leaderboard:
    """The minimal-pair board as the query string asks for it: the tag shared with the
    suites' board, the sort its own (pairs_sort, pairs_dir); staff also see hidden
    models."""
    prefix = pair_selectors.SORT_PREFIX
    return pair_selectors.pair_leaderboard(
        tag=request.GET.get("tag", "").strip(),
        sort=request.GET.get(f"{prefix}sort", "").strip(),
        direction=request.GET.get(f"{prefix}dir", "").strip(),
        include_hidden=bool(request.user.is_staff),
    )


def pair_leaderboard_csv_view(request: HttpRequest) -> HttpResponse:
    board = pair_board(request)
    stem = f"leaderboard-minimal-pairs-{slugify(board.tag)}" if board.tag else None
    response = HttpResponse(
        exports.leaderboard_csv(board, noun="sets"), content_type="text/csv; charset=utf-8"
    )
    name = f"{stem or 'leaderboard-minimal-pairs'}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


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
        return Response(exports.leaderboard_data(pair_board(request), noun="sets"))


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
# The four NLPScholar tables, as the page's downloads name them.
TABLES = [
    ("tokens", "token table"),
    ("by_word", "by_word"),
    ("by_pair", "by_pair"),
    ("by_cond", "by_cond"),
]


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
        tables=TABLES,
        default_label=f"{defaults.pred_measure}, {defaults.word_summary}, "
        f"punctuation {defaults.punctuation}",
    )
    return render(request, "evaluations/pair_result.html", context)


def pair_table_view(request: HttpRequest, pk: int, table: str) -> HttpResponse:
    """One of the four NLPScholar tables of a done run as TSV, under the query string's
    analysis options, named as NLPScholar names its files."""
    evaluation = _run(pk)
    if evaluation.status != PairEvaluation.Status.DONE:
        raise Http404("This run has no results yet.")
    if table not in dict(TABLES):
        raise Http404(f"No table {table[:30]!r}: choose one of {', '.join(dict(TABLES))}.")
    stem = f"{slugify(evaluation.pair_set.name) or 'pairs'}__{evaluation.model.name}"
    if table == "tokens":
        text, name = predictions_to_tsv(pair_results.token_table(evaluation)), f"{stem}_predictions"
    else:
        try:
            options = pair_result_page.page_options(request.GET, evaluation.pair_set)
            analysis = pair_results.analyze_evaluation(evaluation, options, tables=(table,))
        except (pair_result_page.PageQueryError, pair_results.PairAnalysisInvalid) as bad:
            return render(request, "400.html", {"message": str(bad)}, status=400)
        text = table_to_tsv(getattr(analysis, table))
        name = stem + {"by_cond": "", "by_pair": "_bypair", "by_word": "_byword"}[table]
    response = HttpResponse(text, content_type="text/tab-separated-values; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.tsv"'
    return response
