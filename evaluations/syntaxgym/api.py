"""REST API of suite evaluations: ask for them, list them, read one, and rerun the
outdated ones. Thin views over `services`; the language models' API is
`evaluations.language_models.api`'s."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.permissions import IsAuthenticated, IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.models import Evaluation, LanguageModel
from evaluations.runs import api as run_api
from evaluations.scoring import WORD_PROBABILITY
from evaluations.syntaxgym import services
from suites.models import Suite, Tag
from suites.syntaxgym.selectors import suites_with_tag


class EvaluationSerializer(serializers.ModelSerializer):
    model = serializers.CharField(source="model.name")
    suite = serializers.CharField(source="suite.name")
    outdated = serializers.BooleanField(read_only=True)
    url = serializers.SerializerMethodField()

    class Meta:
        model = Evaluation
        fields = [
            "id",
            "model",
            "suite",
            "content_hash",
            "outdated",
            *run_api.RUN_STATE_FIELDS,
            "metric",
            "word_probability",
            "accuracy",
            "diagnostics",
            "created_at",
            "started_at",
            "finished_at",
            "url",
        ]

    def get_url(self, evaluation: Evaluation) -> str:
        return evaluation.get_absolute_url()


class RequestedEvaluationSerializer(run_api.QueuedNow, EvaluationSerializer):
    """An evaluation in the answer to a request: `queued_now` tells whether this request
    created it (false: it was already requested for the same content)."""

    class Meta(EvaluationSerializer.Meta):
        fields = [*EvaluationSerializer.Meta.fields, "queued_now"]


def _named(names: list[str], *, queryset: Any, noun: str) -> list[Any]:
    """The rows of `queryset` named `names`, in that order; a 400 (at the field being
    validated) naming each one missing."""
    found = {obj.name: obj for obj in queryset.filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        raise serializers.ValidationError(
            [f"no {noun} named {n!r}" for n in missing], code="does_not_exist"
        )
    return [found[n] for n in dict.fromkeys(names)]


def _visible_models() -> Any:
    return LanguageModel.objects.filter(is_hidden=False)


def _open_suites() -> Any:
    # Archived suites take no new evaluations.
    return Suite.objects.filter(archived_at__isnull=True)


class EvaluationRequestSerializer(serializers.Serializer):
    model = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="One model's name"
    )
    models = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        default=list,
        help_text="Model names; each is queued on every suite (with `model`, if given)",
    )
    suites = serializers.ListField(child=serializers.CharField(), required=False, default=list)
    tag = serializers.CharField(required=False, allow_blank=True, default="")
    word_probability = serializers.ChoiceField(
        choices=list(WORD_PROBABILITY),
        required=False,
        default="tokens",
        help_text="What a region's sum is: 'tokens' (the sum of its token surprisals) or "
        "'corrected' for the word boundary (causal LMs whose tokenizer marks word starts; "
        "see the docs' evaluation page). Corrected runs are separate runs, left out of "
        "the leaderboard and the comparisons",
    )

    def validate_model(self, name: str) -> list[LanguageModel]:
        return _named([name], queryset=_visible_models(), noun="model") if name else []

    def validate_models(self, names: list[str]) -> list[LanguageModel]:
        return _named(names, queryset=_visible_models(), noun="model")

    def validate_suites(self, names: list[str]) -> list[Suite]:
        return _named(names, queryset=_open_suites(), noun="suite")

    def validate_tag(self, name: str) -> Tag | None:
        return _named([name], queryset=Tag.objects, noun="tag")[0] if name else None

    def validate(self, attrs: dict) -> dict:
        models = list(dict.fromkeys([*attrs["model"], *attrs["models"]]))
        if not models:
            raise serializers.ValidationError({"models": ["name at least one model"]})
        suites = suites_with_tag(attrs["suites"], attrs["tag"])
        if not suites:
            raise serializers.ValidationError(
                "give at least one suite name in 'suites', or a 'tag' that has suites"
            )
        attrs["all_models"] = models
        attrs["all_suites"] = suites
        return attrs


class RerunOutdatedSerializer(serializers.Serializer):
    suite = serializers.CharField(required=False, allow_blank=True, default="")
    model = serializers.CharField(required=False, allow_blank=True, default="")

    def validate_suite(self, name: str) -> Suite | None:
        return _named([name], queryset=Suite.objects, noun="suite")[0] if name else None

    def validate_model(self, name: str) -> LanguageModel | None:
        return _named([name], queryset=LanguageModel.objects, noun="model")[0] if name else None

    def validate(self, attrs: dict) -> dict:
        if attrs["suite"] is None and attrs["model"] is None:
            raise serializers.ValidationError("name a 'suite' or a 'model' (or both)")
        return attrs


def _request_response(outcome: services.RequestOutcome) -> Response:
    return run_api.requested_answer(
        RequestedEvaluationSerializer, outcome.evaluations, outcome.created
    )


class EvaluationListCreate(generics.ListAPIView):
    """List evaluations (filter by model, suite, status, mine) or request new ones."""

    serializer_class = EvaluationSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]

    def get_queryset(self) -> QuerySet[Evaluation]:
        evaluations = Evaluation.objects.select_related("model", "suite").order_by("-created_at")
        params = self.request.query_params
        if params.get("suite"):
            evaluations = evaluations.filter(suite__name=params["suite"])
        return run_api.run_filters_of(self.request, evaluations, kind=services.SUITE_RUNS.name)

    @extend_schema(
        parameters=[
            *run_api.RUN_FILTER_PARAMETERS,
            OpenApiParameter("suite", str, description="Only this suite's (its name)"),
        ],
        description=f"Newest first, paged (`page`). 400: {run_api.BAD_FILTER}",
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @run_api.request_schema(
        EvaluationRequestSerializer,
        RequestedEvaluationSerializer,
        "Every model named (`model`, `models`) on every suite named and every "
        "suite of `tag`, in one transaction. One evaluation per (model, suite, suite "
        "content hash): asking again returns the existing ones, with `queued_now` false "
        "(200 when nothing was new). 503 when the task queue is unreachable: the request "
        "can be repeated and nothing is lost.",
    )
    def post(self, request: Request) -> Response:
        body = run_api.request_body(EvaluationRequestSerializer, request)
        outcome = services.evaluations_request(
            models=body["all_models"],
            suites=body["all_suites"],
            user=request.user,
            word_probability=body["word_probability"],
        )
        return _request_response(outcome)


class EvaluationRerunOutdated(APIView):
    """Re-run everything outdated of a suite or a model: queue, on the suite's current
    content, each model whose done results are for an earlier content of the suite and
    that has no run on its current content yet. Nothing is queued twice."""

    permission_classes = [IsAuthenticated]

    @run_api.request_schema(
        RerunOutdatedSerializer,
        RequestedEvaluationSerializer,
        "201 with the runs queued; 200 with an empty list when nothing is "
        "outdated. `suite` and `model` together narrow to that one pair.",
    )
    def post(self, request: Request) -> Response:
        body = run_api.request_body(RerunOutdatedSerializer, request)
        outcome = services.evaluations_rerun_outdated(
            model=body["model"], suite=body["suite"], user=request.user
        )
        return _request_response(outcome)


class EvaluationDetail(generics.RetrieveAPIView):
    serializer_class = EvaluationSerializer
    queryset = Evaluation.objects.select_related("model", "suite")


def _evaluation(pk: int) -> Evaluation:
    return get_object_or_404(Evaluation.objects.select_related("suite"), pk=pk)


EvaluationRetry, EvaluationCancel = run_api.run_action_apis(
    "Evaluation",
    _evaluation,
    EvaluationSerializer,
    retry_doc="""
    Send a failed or cancelled evaluation again (a new attempt), or send one that never
    reached the task queue. Only the suite's owner, the requester or staff; 409 when
    there is nothing to retry.""",
    cancel_doc="""
    Cancel a queued or running evaluation. Only the suite's owner, the requester or
    staff; 409 when it is already finished.""",
)
