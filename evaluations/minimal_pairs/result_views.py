"""Pages and downloads of minimal-pair results: the result page of one run (its
progress while it runs), the leaderboard section's board and its CSV and JSON. Thin:
each parses the request, calls a selector and renders."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations import comparison_api
from evaluations.boards import leaderboard as boards
from evaluations.boards.leaderboard import board_query
from evaluations.compared_models import parse_model_names
from evaluations.minimal_pairs import comparisons as pair_comparisons
from evaluations.minimal_pairs import result_page as pair_result_page
from evaluations.minimal_pairs import results as pair_results
from evaluations.minimal_pairs import selectors as pair_selectors
from evaluations.models import PairEvaluation
from evaluations.statistics import paired_test_data
from gym.downloads import attachment
from suites.catalog import gym_data_or_404
from suites.models import MinimalPairSet


def pair_board(request: HttpRequest | Request) -> boards.Leaderboard:
    """The minimal-pair board as the query string asks for it: the tag and the toggles
    (`intervals=1`, `significance=1`; any other value is off) and the training run
    (`training=<run id>`: its checkpoints as the rows; 404 for a run that is not there)
    shared with the suites' board, the sort its own (pairs_sort, pairs_dir); staff also
    see hidden models."""
    return pair_selectors.pair_leaderboard(
        **board_query(request, pair_selectors.SORT_PREFIX),
        training=boards.board_training(request),
        intervals=request.GET.get("intervals", "") == "1",
        significance=request.GET.get("significance", "") == "1",
    )


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
            OpenApiParameter(
                "training",
                int,
                description="A training run's id: its checkpoints are the rows, by tokens "
                "seen (`training`, and `tokens` in each row); 404 for no such run",
            ),
            OpenApiParameter(
                "intervals",
                str,
                enum=["1"],
                description="1: each score's 95% Wilson interval over the set's pairs (`interval`)",
            ),
            OpenApiParameter(
                "significance",
                str,
                enum=["1"],
                description="1: each row tested against the row above it (`versus_above`): "
                "McNemar's exact test over the pairs of each shared set, Holm-adjusted",
            ),
        ],
        # 404: `training` names no training run.
        responses={200: OpenApiTypes.OBJECT, 404: None},
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
    if evaluation.word_probability != "tokens":
        stem += f"__{evaluation.word_probability}"  # beside the ordinary run's files
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
        return render(request, "evaluations/minimal_pairs/pair_result.html", context)
    try:
        page = pair_result_page.result_page(evaluation, request.GET)
    except pair_result_page.PageQueryError as bad:
        return render(request, "400.html", {"message": str(bad)}, status=400)
    defaults = pair_results.run_options(evaluation)
    context.update(
        result=page,
        metric_choices=metric_choices(evaluation),
        plot=page.summary.plot(),
        option_params=pair_result_page.options_query(page.options),
        measure_choices=MEASURES,
        punctuation_choices=PUNCTUATION,
        tables=_downloads(evaluation),
        default_label=f"metric {defaults.metric}, {defaults.pred_measure}, "
        f"{defaults.word_summary}, punctuation {defaults.punctuation}",
    )
    return render(request, "evaluations/minimal_pairs/pair_result.html", context)


METRIC_LABELS = {
    "sentence": "whole-sentence log probability",
    "nlpscholar": "NLPScholar's analysis",
    "lm_eval": "as lm-evaluation-harness",
}


def metric_choices(evaluation: PairEvaluation) -> list[tuple[str, str]]:
    """The metrics the run's tokens allow (an lm_eval run's only its own)."""
    if evaluation.metric == "lm_eval":
        return [("lm_eval", METRIC_LABELS["lm_eval"])]
    return [(m, METRIC_LABELS[m]) for m in ("sentence", "nlpscholar")]


def _model_names(request: HttpRequest | Request) -> list[str]:
    """`models=a,b` or a form's repeated `models`, read as the suites' comparison reads
    them (a NUL, which PostgreSQL refuses, never gets here: the middleware answers 400
    to it)."""
    return parse_model_names(request.GET.getlist("models"))


def _pair_set(name: str) -> MinimalPairSet:
    return gym_data_or_404(MinimalPairSet, name, noun="minimal-pair set")


def pair_compare_page(request: HttpRequest, name: str) -> HttpResponse:
    """Two models side by side on one minimal-pair set: `?models=a,b`."""
    pair_set = _pair_set(name)
    names = _model_names(request)
    comparison = pair_comparisons.compare_pairs(pair_set, names)
    choices = pair_comparisons.current_results(pair_set, include_hidden=bool(request.user.is_staff))
    return render(
        request,
        "evaluations/minimal_pairs/pair_compare.html",
        {"comparison": comparison, "pair_set": pair_set, "choices": choices, "asked": names},
    )


PAIR_COMPARISON_SCHEMA = inline_serializer(
    "PairSetComparison",
    {
        "set": serializers.CharField(),
        "metric": serializers.CharField(
            help_text="The metric the accuracies compare pairs by: the set's own "
            "(sentence, nlpscholar or lm_eval); only runs of it are compared"
        ),
        "models": inline_serializer(
            "ComparedPairRun",
            comparison_api.compared_fields(
                over="the pairs", counts={"pairs": "Pairs the run analysed", "pairs_passed": None}
            ),
            many=True,
        ),
        "left_out": comparison_api.left_out_schema("PairComparisonLeftOut"),
        "paired_test": comparison_api.paired_test_schema(
            "PairedPairTest",
            counted=("pairs", "Pairs both runs analysed"),
            only_first="Pairs A gets right, B not",
            only_second="Pairs B gets right, A not",
            about="Two models compared: McNemar's exact two-sided test over the pairs "
            "(null otherwise)",
        ),
    },
)


def pair_comparison_data(comparison: pair_comparisons.PairComparison) -> dict[str, object]:
    return {
        "set": comparison.pair_set.name,
        "metric": comparison.pair_set.metric,
        "models": [
            comparison_api.compared_data(m, pairs=m.pairs, pairs_passed=m.passed)
            for m in comparison.models
        ],
        "left_out": comparison_api.left_out_data(comparison.left_out),
        "paired_test": paired_test_data(comparison.paired, counted="pairs"),
    }


class PairSetComparisonAPI(APIView):
    """Two models on one minimal-pair set (current results, the leaderboard's analysis
    options): each one's accuracy with its 95% interval, and McNemar's exact test of
    their difference over the pairs."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            comparison_api.models_parameter(
                "Model names, comma-separated (the first two with a current "
                "result are compared); without it, the first two models with a current "
                "result on the set, by name",
            )
        ],
        responses={200: PAIR_COMPARISON_SCHEMA, 400: None, 404: None},
    )
    def get(self, request: Request, name: str) -> Response:
        names = _model_names(request)
        pair_set = _pair_set(name)
        if not names:
            staff = bool(request.user.is_staff)
            names = [
                m.name
                for m, _pk in pair_comparisons.current_results(pair_set, include_hidden=staff)
            ]
        return Response(pair_comparison_data(pair_comparisons.compare_pairs(pair_set, names)))


ACROSS_SETS_SCHEMA = inline_serializer(
    "PairComparisonAcrossSets",
    {
        "tag": serializers.CharField(),
        "models": inline_serializer(
            "ComparedPairModel",
            {
                "letter": serializers.CharField(),
                "model": serializers.CharField(),
                "display_name": serializers.CharField(),
            },
            many=True,
        ),
        "left_out": comparison_api.left_out_schema("PairAcrossLeftOut"),
        "sets": inline_serializer(
            "PairSetTest",
            {
                "set": serializers.CharField(),
                "metric": serializers.CharField(
                    help_text="The metric both runs compare pairs by: the set's own"
                ),
                "evaluations": serializers.ListField(
                    child=serializers.IntegerField(), min_length=2, max_length=2
                ),
                "pairs": serializers.IntegerField(),
                "only_first": serializers.IntegerField(),
                "only_second": serializers.IntegerField(),
                "both_pass": serializers.IntegerField(),
                "both_fail": serializers.IntegerField(),
                "p_value": serializers.FloatField(help_text="McNemar, exact, two-sided"),
                "adjusted_p": serializers.FloatField(help_text="Holm-adjusted across the sets"),
                "significant": serializers.BooleanField(help_text="adjusted_p < 0.05"),
            },
            many=True,
        ),
        "significant_sets": serializers.IntegerField(),
    },
)


def across_sets_data(result: pair_comparisons.AcrossSets) -> dict[str, object]:
    return {
        "tag": result.tag,
        "models": [
            {"letter": letter, "model": m.name, "display_name": m.display_name}
            for letter, m in zip(pair_comparisons.LETTERS, result.models, strict=False)
        ],
        "left_out": comparison_api.left_out_data(result.left_out),
        "sets": [
            {
                "set": t.set_name,
                "metric": t.metric,
                "evaluations": list(t.evaluation_ids),
                **t.test.counts("pairs"),
                "adjusted_p": t.adjusted_p,
                "significant": t.significant,
            }
            for t in result.sets
        ],
        "significant_sets": sum(1 for t in result.sets if t.significant),
    }


class PairComparisonAcrossSetsAPI(APIView):
    """Two models on every minimal-pair set both have a current result for (one tag
    group with `tag`): McNemar's exact test over each set's pairs, the p-values
    Holm-adjusted across the sets, so that one set in twenty coming out "significant"
    by chance is not read as a difference."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "models", str, description="Two model names, comma-separated", required=True
            ),
            OpenApiParameter("tag", str, description="Keep one tag group ('untagged' too)"),
        ],
        responses={200: ACROSS_SETS_SCHEMA, 400: None},
    )
    def get(self, request: Request) -> Response:
        names = _model_names(request)
        if len(names) < 2:
            raise ValidationError({"models": ["name two models, comma-separated"]})
        tag = request.GET.get("tag", "").strip()
        return Response(across_sets_data(pair_comparisons.compare_across_sets(names, tag=tag)))
