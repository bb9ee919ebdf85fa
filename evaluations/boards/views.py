"""The leaderboard's page, CSV and API, and a model's page. They read every kind through
the run kinds registry: the main kind's board and its part of the model page
(`RunKind.board`, `RunKind.model_page`), then each kind's own section under them
(`RunKind.board_section`, `RunKind.model_section`, through the `kind_sections` template
tag). A kind that declares these hooks appears here with no edit to this room."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.text import slugify
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.boards import leaderboard as boards
from evaluations.boards.leaderboard import board_query
from evaluations.language_models import registry as model_registry
from evaluations.runs import lifecycle as runs
from gym.downloads import attachment

# The kind whose board is the leaderboard page's table (and its CSV and API), and whose
# results head a model's page: suites, the site's first kind.
MAIN_KIND = "suite"


def _board(request: HttpRequest | Request, *, toggles: bool = False) -> boards.Leaderboard:
    """The leaderboard as the query string asks for it; `training=<run id>`: that run's
    checkpoints as the rows (404 for a run that is not there). With `toggles`, the page's
    `intervals=1` and `significance=1` too (any other value is off)."""
    return runs.kind_named(MAIN_KIND).read_board(
        **board_query(request),
        training=boards.board_training(request),
        intervals=toggles and request.GET.get("intervals", "") == "1",
        significance=toggles and request.GET.get("significance", "") == "1",
    )


def leaderboard_page(request: HttpRequest) -> HttpResponse:
    board = _board(request, toggles=True)
    return render(request, "evaluations/boards/leaderboard.html", {"board": board})


def leaderboard_csv_view(request: HttpRequest) -> HttpResponse:
    board = _board(request, toggles=True)
    name = f"leaderboard-{slugify(board.tag)}.csv" if board.tag else "leaderboard.csv"
    return attachment(boards.leaderboard_csv(board), "text/csv; charset=utf-8", name)


def model_page(request: HttpRequest, name: str) -> HttpResponse:
    # A hidden model's page is seen by those who see it in the API (staff, whoever
    # registered it); to anyone else it is a 404, as in the API.
    model = get_object_or_404(model_registry.visible_models(request.user), name=name)
    main = runs.kind_named(MAIN_KIND).read_model_page(request, model)
    return render(request, "evaluations/boards/model_detail.html", {"model": model, **main})


LEADERBOARD_SCHEMA = inline_serializer(
    "Leaderboard",
    {
        "tag": serializers.CharField(),
        "training": serializers.IntegerField(
            required=False, help_text="With ?training=: the run whose checkpoints are the rows"
        ),
        "sort": serializers.CharField(),
        "direction": serializers.ChoiceField(choices=["asc", "desc"]),
        "tags": serializers.ListField(child=serializers.CharField()),
        "compared_suites": serializers.ListField(child=serializers.CharField()),
        "groups": inline_serializer(
            "LeaderboardGroup",
            {
                "tag": serializers.CharField(),
                "suites": serializers.ListField(child=serializers.CharField()),
                "compared_suites": serializers.ListField(child=serializers.CharField()),
            },
            many=True,
        ),
        "suites": inline_serializer(
            "LeaderboardSuite",
            {
                "name": serializers.CharField(),
                "tags": serializers.ListField(child=serializers.CharField()),
                "compared": serializers.BooleanField(),
            },
            many=True,
        ),
        "rows": inline_serializer(
            "LeaderboardRow",
            {
                "model": serializers.CharField(),
                "display_name": serializers.CharField(),
                "is_baseline": serializers.BooleanField(),
                "tokens": serializers.IntegerField(
                    required=False, allow_null=True, help_text="With ?training=: tokens seen"
                ),
                "overall": serializers.FloatField(allow_null=True),
                "overall_suites": serializers.IntegerField(),
                "covered": serializers.IntegerField(),
                "total": serializers.IntegerField(),
                "ties": serializers.IntegerField(),
                "group_means": serializers.DictField(
                    child=serializers.FloatField(allow_null=True), help_text="By tag"
                ),
                "scores": serializers.DictField(
                    child=inline_serializer(
                        "LeaderboardScore",
                        {
                            "accuracy": serializers.FloatField(allow_null=True),
                            "evaluation": serializers.IntegerField(),
                            "ties": serializers.IntegerField(),
                            "interval": serializers.ListField(
                                child=serializers.FloatField(),
                                min_length=2,
                                max_length=2,
                                allow_null=True,
                                required=False,
                                help_text="With ?intervals=1: the accuracy's 95% Wilson "
                                "interval [low, high] over the suite's evaluable items",
                            ),
                        },
                    ),
                    help_text="By suite name",
                ),
                "versus_above": inline_serializer(
                    "LeaderboardVersusAbove",
                    {
                        "suites": serializers.IntegerField(
                            help_text="Suites both rows have an accuracy for (tested)"
                        ),
                        "smallest_p": serializers.FloatField(
                            allow_null=True,
                            help_text="The smallest Holm-adjusted McNemar p over them",
                        ),
                        "significant": serializers.BooleanField(
                            help_text="Some adjusted p is below 0.05"
                        ),
                    },
                    allow_null=True,
                    required=False,
                    help_text="With ?significance=1: this row against the row above it "
                    "(null for the first row)",
                ),
            },
            many=True,
        ),
    },
)


class LeaderboardAPI(APIView):
    """Models x suites: per-suite accuracy (current suite content only), group means by
    tag and the overall score (mean suite accuracy). Both means compare like with like:
    they are over `compared_suites`, the suites every row has an accuracy for (per group
    too); `overall_suites` is their number, `covered` each model's own count."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            OpenApiParameter("tag", str, description="Keep one tag group ('untagged' too)"),
            OpenApiParameter(
                "sort", str, description="A suite name, 'group:<tag>', 'overall' or 'model'"
            ),
            OpenApiParameter("dir", str, enum=["asc", "desc"]),
            OpenApiParameter(
                "training",
                int,
                description="A training run's id: its checkpoints are the rows, by tokens "
                "seen (sort 'tokens', the default then)",
            ),
            OpenApiParameter(
                "intervals",
                str,
                enum=["1"],
                description="1: each score's 95% Wilson interval (`interval`)",
            ),
            OpenApiParameter(
                "significance",
                str,
                enum=["1"],
                description="1: each row tested against the row above it (`versus_above`): "
                "McNemar's exact test per shared suite, Holm-adjusted",
            ),
        ],
        # 404: `training` names no training run.
        responses={200: LEADERBOARD_SCHEMA, 404: None},
    )
    def get(self, request: Request) -> Response:
        return Response(boards.leaderboard_data(_board(request, toggles=True)))
