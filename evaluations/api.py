"""REST API for models and evaluations: thin views over the services."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.permissions import IsAuthenticated, IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations import services
from evaluations.models import Evaluation, LanguageModel
from suites.models import Suite, Tag
from suites.selectors import suites_with_tag


class LanguageModelSerializer(serializers.ModelSerializer):
    registered_by = serializers.CharField(
        source="registered_by.username", default=None, read_only=True
    )

    def to_representation(self, instance: LanguageModel) -> dict[str, Any]:
        data = super().to_representation(instance)
        request = self.context.get("request")
        if not (request is not None and request.user.is_staff):
            # Only staff learn where a local model lies on the server.
            data["source"] = instance.public_source
        return data

    class Meta:
        model = LanguageModel
        fields = [
            "name",
            "display_name",
            "source",
            "revision",
            "kind",
            "parameter_count",
            "description",
            "reference_url",
            "is_baseline",
            "is_hidden",
            "registered_by",
            "created_at",
        ]
        read_only_fields = [
            "kind",
            "parameter_count",
            "is_baseline",
            "is_hidden",
            "registered_by",
            "created_at",
        ]


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
            "status",
            "enqueued",
            "attempt",
            "progress_done",
            "progress_total",
            "error",
            "metric",
            "accuracy",
            "diagnostics",
            "created_at",
            "started_at",
            "finished_at",
            "url",
        ]

    def get_url(self, evaluation: Evaluation) -> str:
        return evaluation.get_absolute_url()


class EvaluationRequestSerializer(serializers.Serializer):
    model = serializers.SlugRelatedField(
        slug_field="name", queryset=LanguageModel.objects.filter(is_hidden=False)
    )
    suites = serializers.ListField(child=serializers.CharField(), required=False, default=list)
    tag = serializers.CharField(required=False, allow_blank=True, default="")

    def validate(self, attrs: dict) -> dict:
        names = attrs["suites"]
        listed = Suite.objects.filter(name__in=names, archived_at__isnull=True)
        found = {s.name: s for s in listed}
        missing = [n for n in names if n not in found]
        if missing:
            raise serializers.ValidationError(
                {"suites": [f"no suite named {n!r}" for n in missing]}
            )
        tag = None
        if attrs["tag"]:
            tag = Tag.objects.filter(name=attrs["tag"]).first()
            if tag is None:
                raise serializers.ValidationError({"tag": [f"no tag named {attrs['tag']!r}"]})
        suites = suites_with_tag([found[n] for n in names], tag)
        if not suites:
            raise serializers.ValidationError(
                "give at least one suite name in 'suites', or a 'tag' that has suites"
            )
        attrs["all_suites"] = suites
        return attrs


class ModelListCreate(generics.ListAPIView):
    serializer_class = LanguageModelSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        models = LanguageModel.objects.select_related("registered_by")
        user = self.request.user
        return models if user.is_staff else models.filter(is_hidden=False)

    @extend_schema(request=LanguageModelSerializer, responses={201: LanguageModelSerializer})
    def post(self, request: Request) -> Response:
        data = LanguageModelSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = {
            k: v
            for k, v in data.validated_data.items()
            if k in {"name", "display_name", "source", "revision", "description", "reference_url"}
        }
        model = services.model_register(user=request.user, **fields)
        return Response(LanguageModelSerializer(model).data, status=status.HTTP_201_CREATED)


class ModelDetail(generics.RetrieveAPIView):
    serializer_class = LanguageModelSerializer
    lookup_field = "name"

    def get_queryset(self):  # type: ignore[no-untyped-def]
        models = LanguageModel.objects.all()
        return models if self.request.user.is_staff else models.filter(is_hidden=False)


class EvaluationListCreate(generics.ListAPIView):
    """List evaluations (filter by model, suite, status) or request new ones."""

    serializer_class = EvaluationSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        evaluations = Evaluation.objects.select_related("model", "suite").order_by("-created_at")
        params = self.request.query_params
        if params.get("model"):
            evaluations = evaluations.filter(model__name=params["model"])
        if params.get("suite"):
            evaluations = evaluations.filter(suite__name=params["suite"])
        if params.get("status"):
            evaluations = evaluations.filter(status=params["status"])
        return evaluations

    @extend_schema(
        request=EvaluationRequestSerializer,
        responses={
            201: EvaluationSerializer(many=True),
            200: EvaluationSerializer(many=True),
            503: None,
        },
        description="One evaluation per (model, suite, suite content hash); asking again returns "
        "the existing ones (200). 503 when the task queue is unreachable: the request can be "
        "repeated and nothing is lost.",
    )
    def post(self, request: Request) -> Response:
        body = EvaluationRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        outcome = services.evaluation_request(
            model=body.validated_data["model"],
            suites=body.validated_data["all_suites"],
            user=request.user,
        )
        code = status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK
        return Response(EvaluationSerializer(outcome.evaluations, many=True).data, status=code)


class EvaluationDetail(generics.RetrieveAPIView):
    serializer_class = EvaluationSerializer
    queryset = Evaluation.objects.select_related("model", "suite")


class EvaluationRetry(APIView):
    """Send a failed or cancelled evaluation again (a new attempt), or send one that never
    reached the task queue. Only the suite's owner, the requester or staff; 409 when
    there is nothing to retry."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=None, responses={200: EvaluationSerializer, 403: None, 409: None, 503: None}
    )
    def post(self, request: Request, pk: int) -> Response:
        evaluation = get_object_or_404(Evaluation.objects.select_related("suite"), pk=pk)
        # BrokerUnavailable (503), RunConflict (409) and PermissionDenied (403) become the
        # API's error shape in its exception handler.
        evaluation = services.evaluation_retry(evaluation=evaluation, user=request.user)
        return Response(EvaluationSerializer(evaluation).data)


class EvaluationCancel(APIView):
    """Cancel a queued or running evaluation. Only the suite's owner, the requester or
    staff; 409 when it is already finished."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={200: EvaluationSerializer, 403: None, 409: None})
    def post(self, request: Request, pk: int) -> Response:
        evaluation = get_object_or_404(Evaluation.objects.select_related("suite"), pk=pk)
        evaluation = services.evaluation_cancel(evaluation=evaluation, user=request.user)
        return Response(EvaluationSerializer(evaluation).data)
