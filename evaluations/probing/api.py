"""REST API for probing runs: ask for runs, list them, one run with its layers, its CSV,
retry and cancel; the probing leaderboard. Thin views over the services and selectors."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.permissions import AllowAny, IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.models import LanguageModel, ProbingRun
from evaluations.probing import exports as probing_exports
from evaluations.probing import selectors as probing_selectors
from evaluations.probing import services as probing_services
from evaluations.probing.controls import DEFAULT_SEEDS, MAX_SEEDS
from evaluations.probing.views import probing_board_from, probing_run_csv
from evaluations.runs.api import (
    BAD_FILTER,
    RUN_FILTER_PARAMETERS,
    request_body,
    request_schema,
    requested_answer,
    run_action_apis,
    run_filters_of,
)
from gym.rest import NameField
from suites.corpora.models import Corpus
from suites.models import ProbingTask


class ProbingRunSerializer(serializers.ModelSerializer):
    model = serializers.CharField(source="model.name")
    task = serializers.CharField(source="task.name")
    outdated = serializers.BooleanField(read_only=True)
    progress_text = serializers.CharField(read_only=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    frequency_corpus = serializers.CharField(
        source="frequency_corpus.name", read_only=True, allow_null=True, default=None
    )
    frequency_source = serializers.CharField(read_only=True)

    class Meta:
        model = ProbingRun
        fields = [
            "id",
            "model",
            "task",
            "content_hash",
            "outdated",
            "pooling",
            "probe",
            "seeds",
            "mdl",
            "frequency_corpus",
            "frequency_source",
            "status",
            "enqueued",
            "attempt",
            "progress_done",
            "progress_total",
            "progress_text",
            "error",
            "best_layer",
            "best_va",
            "best_te",
            "best_selectivity",
            "baselines",
            "created_at",
            "started_at",
            "finished_at",
            "url",
        ]


class ProbingRunDetailSerializer(ProbingRunSerializer):
    layers = serializers.SerializerMethodField()
    human = serializers.SerializerMethodField()

    class Meta(ProbingRunSerializer.Meta):
        fields = [*ProbingRunSerializer.Meta.fields, "layers", "confusion", "diagnostics", "human"]

    def get_human(self, run: ProbingRun) -> dict[str, Any] | None:
        # The task's human baseline row now: people's accuracy, interval, agreement.
        return probing_selectors.human_accuracy(run.task)

    def get_layers(self, run: ProbingRun) -> list[dict[str, Any]]:
        # The return type is the schema's: an array of objects.
        return [dict(row) for row in probing_selectors.layer_rows(run)]


class ProbingRunRequestSerializer(serializers.Serializer):
    task = NameField(slug_field="name", queryset=ProbingTask.objects.all())
    models = serializers.ListField(
        child=NameField(slug_field="name", queryset=LanguageModel.objects.filter(is_hidden=False)),
        min_length=1,
        max_length=100,
    )
    # The model's choices, so that the schema has one enum of each.
    pooling = serializers.ChoiceField(ProbingRun.Pooling.choices, default="mean")
    probe = serializers.ChoiceField(ProbingRun.Probe.choices, default="logreg")
    seeds = serializers.IntegerField(min_value=1, max_value=MAX_SEEDS, default=DEFAULT_SEEDS)
    mdl = serializers.BooleanField(default=False)
    frequency_corpus = NameField(
        slug_field="name",
        queryset=Corpus.objects.all(),
        required=False,
        allow_null=True,
        default=None,
        help_text="A corpus's name: the frequency baseline counts the target forms in it "
        "instead of the CMU trigram's unigrams (the default).",
        error_messages={
            "does_not_exist": "no corpus is named {value}: name an uploaded corpus, or "
            "leave frequency_corpus out for the CMU unigrams"
        },
    )


class ProbingRunListCreate(generics.ListAPIView):
    """List probing runs (filter by model, task, status, mine) or ask for new ones."""

    serializer_class = ProbingRunSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]

    @extend_schema(
        parameters=[
            *RUN_FILTER_PARAMETERS,
            OpenApiParameter("task", str, description="A probing task's name"),
        ],
        description=f"Newest first, paged (`page`). 400: {BAD_FILTER}",
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[ProbingRun]:
        listed = probing_selectors.run_list(
            task=self.request.query_params.get("task", "").strip(), include_hidden=True
        )
        return run_filters_of(self.request, listed, kind=probing_services.PROBING_RUNS.name)

    @request_schema(
        ProbingRunRequestSerializer,
        ProbingRunSerializer,
        "One run per (model, task content, pooling, probe, seeds, mdl, "
        "frequency_corpus); asking again returns the existing ones (200). 400 for an n-gram "
        "model (no hidden states), last-token pooling of a masked model, an unknown "
        "frequency corpus or one for a task type without the frequency baseline; 503 when "
        "the task queue is unreachable.",
    )
    def post(self, request: Request) -> Response:
        body = request_body(ProbingRunRequestSerializer, request)
        outcome = probing_services.probing_run_request(user=request.user, **body)
        return requested_answer(ProbingRunSerializer, outcome.runs, outcome.created)


class ProbingRunDetail(generics.RetrieveAPIView):
    """One run; when done, its layers (va and te accuracy, hyperparameters), baselines
    and the te confusion matrix at the layer chosen on va."""

    serializer_class = ProbingRunDetailSerializer
    queryset = ProbingRun.objects.select_related("model", "task", "frequency_corpus")


class ProbingRunCSV(APIView):
    """A done run as CSV, one row per layer."""

    permission_classes = [AllowAny]

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.BINARY, 404: None})
    def get(self, request: Request, pk: int) -> HttpResponse:
        return probing_run_csv(request, pk)


def _run(pk: int) -> ProbingRun:
    return get_object_or_404(ProbingRun.objects.select_related("task", "model"), pk=pk)


ProbingRunRetry, ProbingRunCancel = run_action_apis("ProbingRun", _run, ProbingRunSerializer)


class ProbingLeaderboardAPI(APIView):
    """Models x probing tasks: te accuracy at the layer chosen on va (current task content,
    one pooling and probe), with the majority, length and frequency baselines and the
    human row (accuracy, 95% interval, each annotator, Cohen's or Fleiss' kappa)."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            OpenApiParameter("pooling", str, enum=list(ProbingRun.Pooling.values)),
            OpenApiParameter("probe", str, enum=list(ProbingRun.Probe.values)),
            OpenApiParameter(
                "training",
                int,
                description="A training run's id: its checkpoints are the rows, by tokens "
                "seen (`training`, and `tokens` in each row); 404 for no such run",
            ),
        ],
        responses={200: OpenApiTypes.OBJECT, 404: None},
    )
    def get(self, request: Request) -> Response:
        return Response(probing_exports.board_data(probing_board_from(request)))
