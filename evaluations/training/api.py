"""REST API of training runs: thin views over the services and selectors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.permissions import IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.models import LanguageModel
from evaluations.runs.api import request_body, run_action_apis
from evaluations.subsets import subset_parse
from evaluations.training import corpus_check, selectors, series, services
from evaluations.training.models import ModelSeries, SeriesMember, TrainingRun
from gym.rest import NameField
from suites.catalog_api import not_found
from suites.corpora.models import Corpus
from suites.models import MinimalPairSet, ProbingTask, Suite


class TrainingRunSerializer(serializers.ModelSerializer):
    model = serializers.CharField(source="model.name", read_only=True)
    corpus = serializers.CharField(source="corpus.name", read_only=True)
    kind = serializers.CharField(source="training_kind", read_only=True)
    validation_corpus = serializers.CharField(
        source="validation_corpus.name", read_only=True, allow_null=True, default=None
    )
    base_model = serializers.CharField(
        source="base_model.name", read_only=True, allow_null=True, default=None
    )
    # The bytes the checkpoint folders still on disk take (retention removes some).
    disk_bytes = serializers.IntegerField(read_only=True)
    suites: serializers.SlugRelatedField[Suite] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name"
    )
    pair_sets: serializers.SlugRelatedField[MinimalPairSet] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name"
    )
    probing_tasks: serializers.SlugRelatedField[ProbingTask] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name"
    )
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    progress_text = serializers.CharField(read_only=True)
    # Trained on content the corpus no longer has (as every kind's runs say of theirs).
    outdated = serializers.BooleanField(read_only=True)

    class Meta:
        model = TrainingRun
        fields = [
            "id",
            "url",
            "model",
            "corpus",
            "kind",
            "base_model",
            "validation_corpus",
            "options",
            "suites",
            "pair_sets",
            "probing_tasks",
            "threshold",
            "status",
            "attempt",
            "progress_done",
            "progress_total",
            "progress_text",
            "enqueued",
            "outdated",
            "error",
            "checkpoints",
            "disk_bytes",
            "created_at",
            "started_at",
            "finished_at",
        ]


class TrainingRunDetailSerializer(TrainingRunSerializer):
    loss = serializers.SerializerMethodField()
    learning_curves = serializers.SerializerMethodField()
    corpus_check = serializers.SerializerMethodField()

    class Meta(TrainingRunSerializer.Meta):
        fields = [
            *TrainingRunSerializer.Meta.fields,
            "summary",
            "loss",
            "learning_curves",
            "corpus_check",
        ]

    def get_loss(self, run: TrainingRun) -> dict[str, Any]:
        return selectors.loss_curves(run)

    def get_learning_curves(self, run: TrainingRun) -> dict[str, Any]:
        return selectors.learning_curves(run)

    def get_corpus_check(self, run: TrainingRun) -> dict[str, Any]:
        return corpus_check.run_check(run)


def _names(queryset: QuerySet[Any], *, max_length: int) -> serializers.ListField:
    """Names of rows of `queryset` (400 for one that names none), none by default."""
    return serializers.ListField(
        child=NameField(slug_field="name", queryset=queryset),
        required=False,
        default=list,
        max_length=max_length,
    )


class TrainingRequestSerializer(serializers.Serializer):
    corpus = NameField(slug_field="name", queryset=Corpus.objects.all())
    name = serializers.CharField(max_length=80)
    kind = serializers.ChoiceField(TrainingRun.Kind.choices)
    options = serializers.DictField(required=False, default=dict)
    validation_corpus = NameField(
        slug_field="name", queryset=Corpus.objects.all(), required=False, allow_null=True
    )
    suites = _names(Suite.objects.all(), max_length=500)
    pair_sets = _names(MinimalPairSet.objects.all(), max_length=500)
    probing_tasks = _names(ProbingTask.objects.all(), max_length=100)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, default=list, max_length=50
    )
    threshold = serializers.FloatField(required=False, default=0.8)


def unknown_fields(data: Any) -> dict[str, str]:
    """Each top-level field of a training request that is none of its fields: a training
    option given beside `options` instead of in it is said so (it would be dropped, and
    its default trained with)."""
    if not isinstance(data, Mapping):
        return {}
    known = list(TrainingRequestSerializer().fields)
    errors: dict[str, str] = {}
    for key in sorted(str(k) for k in data if k not in known)[:20]:
        shown = key[:40]
        if key in services.ALL_OPTIONS:
            errors[shown] = (
                f"unknown field {shown!r}: {shown} is a training option and goes under "
                f'options, as {{"options": {{"{shown}": ...}}}}'
            )
        else:
            errors[shown] = (
                f"unknown field {shown!r}: a training request's fields are {', '.join(known)}"
            )
    return errors


CHECK_FIELDS = ("suites", "pair_sets", "probing_tasks", "tags")


class CorpusCheckQuery(serializers.Serializer):
    """The benchmarks to check a corpus against, as a run request names them."""

    suites = _names(Suite.objects.all(), max_length=500)
    pair_sets = _names(MinimalPairSet.objects.all(), max_length=500)
    probing_tasks = _names(ProbingTask.objects.all(), max_length=100)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, default=list, max_length=50
    )


class CorpusCheck(APIView):
    """How many sentences of the named suites (and the suites with any of `tags`),
    minimal-pair sets and probing tasks occur in the corpus, as whole lines after
    normalisation (docs/training.md, The corpus check). Each name is a parameter of its
    own, repeated for several (`?suites=A&suites=B`). The first check of a benchmark
    reads the whole corpus once; the answer is cached."""

    permission_classes = [IsAuthenticatedOrReadOnly]

    @extend_schema(
        parameters=[
            OpenApiParameter(field, str, many=True, description=f"{field} to check (repeat)")
            for field in CHECK_FIELDS
        ],
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, name: str) -> Response:
        corpus = Corpus.objects.filter(name=name).first()
        if corpus is None:
            return not_found("corpus", name)
        unknown = sorted(set(request.query_params) - set(CHECK_FIELDS))
        if unknown:
            raise services.TrainingRequestInvalid(
                {
                    field: f"unknown parameter {field[:40]!r}: give suites, pair_sets, "
                    "probing_tasks or tags"
                    for field in unknown
                }
            )
        query = CorpusCheckQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        asked = query.validated_data
        tagged, problems = services.tagged_suites(asked["tags"])
        if problems:
            raise services.TrainingRequestInvalid(problems)
        benchmarks = [*asked["suites"], *tagged, *asked["pair_sets"], *asked["probing_tasks"]]
        return Response({"corpus": corpus.name, **corpus_check.corpus_check(corpus, benchmarks)})


class TrainingRunListCreate(generics.ListAPIView):
    """Training runs, newest first (paged), or ask for a new one."""

    serializer_class = TrainingRunSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]
    queryset = TrainingRun.objects.select_related(
        "model", "corpus", "validation_corpus", "base_model"
    ).prefetch_related("suites")

    @extend_schema(
        request=TrainingRequestSerializer,
        responses={201: TrainingRunSerializer, 400: OpenApiTypes.OBJECT, 503: None},
        description="Train a model on a corpus: kind 'ngram' (options order 2-6, "
        "min_count, memory_mb: the memory budget, default a quarter of the worker's memory, "
        "disk_mb: a bound on the temporary disk), 'causal' or 'masked' (options preset, steps, batch_tokens, micro_batch, "
        "learning_rate, warmup_steps, weight_decay (0 to 1), checkpoints, save_every, "
        "retention (all, schedule, "
        "last) with keep_last, keep_states, seed; layers, width, heads, context, vocab, "
        "arch change the preset; tokenizer bpe, unigram or model with tokenizer_model; "
        "base_model: a registered causal model to train further; masked runs: presets "
        "tiny-bert, small-bert, custom, tokenizer wordpiece, bpe or model, mask_probability "
        "above 0 and below 1 (0.15), whole_word_masking, and no base_model). "
        "`validation_corpus`: "
        "a second corpus as the validation text. Each checkpoint is registered as a model and "
        "evaluated on `suites`, the suites with any of `tags`, `pair_sets` and "
        "`probing_tasks` (mean pooling, logistic regression; causal and masked runs). 400 names each bad field; "
        "a model over GYM_TRAINING_MAX_PARAMETERS parameters, or whose training is estimated "
        "to need more than GYM_TRAINING_MAX_MEMORY_MB on one GPU, is a 400 at $.options; a "
        "user with GYM_TRAINING_MAX_ACTIVE_PER_USER training runs queued or running gets 400 "
        "too_many_runs (staff excepted); 503 when the queue is down.",
    )
    def post(self, request: Request) -> Response:
        unknown = unknown_fields(request.data)
        if unknown:
            raise services.TrainingRequestInvalid(unknown)
        body = request_body(TrainingRequestSerializer, request)
        run = services.training_request(user=request.user, **body)
        return Response(TrainingRunSerializer(run).data, status=status.HTTP_201_CREATED)


class TrainingRunDetail(generics.RetrieveAPIView):
    """One training run: progress, loss curves, checkpoints and learning curves."""

    serializer_class = TrainingRunDetailSerializer
    queryset = TrainingRun.objects.select_related("model", "corpus")


def _run(pk: int) -> TrainingRun:
    return get_object_or_404(TrainingRun.objects.select_related("model", "corpus"), pk=pk)


TrainingRunRetry, TrainingRunCancel = run_action_apis("TrainingRun", _run, TrainingRunSerializer)


# Model series (docs/series.md): checkpoints trained elsewhere, read as learning curves.


def _text(max_length: int) -> serializers.CharField:
    return serializers.CharField(
        max_length=max_length, required=False, default="", allow_blank=True, trim_whitespace=True
    )


class SeriesRegisterSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    display_name = _text(200)
    folder = _text(500)
    source = _text(500)  # type: ignore[assignment]  # a field named source
    revisions = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, default=list, max_length=200
    )
    pattern = _text(100)
    steps = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=10**12),
        required=False,
        default=list,
        max_length=200,
    )
    models = _names(LanguageModel.objects.all(), max_length=200)
    tokens = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=10**15, allow_null=True),
        required=False,
        default=list,
        max_length=200,
    )
    tokens_per_step = serializers.IntegerField(
        min_value=1, max_value=10**9, required=False, allow_null=True, default=None
    )
    group = _text(100)
    threshold = serializers.FloatField(min_value=0.0, max_value=1.0, required=False, default=0.8)


class SeriesEvaluateSerializer(serializers.Serializer):
    suites = _names(Suite.objects.all(), max_length=500)
    pair_sets = _names(MinimalPairSet.objects.all(), max_length=500)
    probing_tasks = _names(ProbingTask.objects.all(), max_length=100)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, default=list, max_length=50
    )
    members = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, default=list, max_length=200
    )
    subset = serializers.JSONField(
        required=False,
        default=None,
        allow_null=True,
        help_text='The fast subset: a size (200) or {"size": 200, "seed": 0}, a fixed, '
        "seeded sample of each benchmark (docs/series.md#the-fast-subset)",
    )


class SeriesMemberSerializer(serializers.ModelSerializer):
    model = serializers.CharField(source="model.name", read_only=True)
    revision = serializers.CharField(source="model.revision", read_only=True)

    class Meta:
        model = SeriesMember
        fields = ["model", "revision", "step", "tokens"]


class ModelSeriesSerializer(serializers.ModelSerializer):
    name = serializers.CharField(read_only=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    members = SeriesMemberSerializer(many=True, read_only=True)

    class Meta:
        model = ModelSeries
        fields = [
            "name",
            "display_name",
            "url",
            "source",
            "group",
            "unit",
            "threshold",
            "members",
            "created_at",
        ]


def _refuse_unknown(data: Any, serializer: type[serializers.Serializer]) -> None:
    """400 for each top-level field the request does not know (it would be dropped)."""
    if not isinstance(data, Mapping):
        return
    known = list(serializer().fields)
    unknown = sorted(str(k) for k in data if k not in known)[:20]
    if unknown:
        raise series.SeriesInvalid(
            {
                key[:40]: f"unknown field {key[:40]!r}: the fields are {', '.join(known)}"
                for key in unknown
            }
        )


def _series(name: str) -> ModelSeries:
    return get_object_or_404(ModelSeries, name=name)


class ModelSeriesListCreate(generics.ListAPIView):
    """Model series, or register one."""

    serializer_class = ModelSeriesSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]
    queryset = ModelSeries.objects.prefetch_related("members__model")

    @extend_schema(
        request=SeriesRegisterSerializer,
        responses={201: ModelSeriesSerializer, 400: OpenApiTypes.OBJECT},
        description="Register a series of checkpoints: `folder` (a folder of Trainer "
        "checkpoints, checkpoint-<step>, under the model folders GYM_MODEL_DIRS), or "
        "`source` with `revisions` (and, optionally, one of `steps` per revision, over what "
        "their names say), or `pattern` such as step{N} with `steps` (BabyLM's "
        "chck_<N>M count words), or registered `models` with their `steps` (and `tokens`). "
        "Tokens seen come from trainer_state.json, `tokens_per_step` or the revision's name.",
    )
    def post(self, request: Request) -> Response:
        _refuse_unknown(request.data, SeriesRegisterSerializer)
        body = request_body(SeriesRegisterSerializer, request)
        made = series.series_register(user=request.user, **body)
        return Response(ModelSeriesSerializer(made).data, status=status.HTTP_201_CREATED)


class ModelSeriesDetail(generics.RetrieveAPIView):
    serializer_class = ModelSeriesSerializer
    queryset = ModelSeries.objects.prefetch_related("members__model")
    lookup_field = "name"


class ModelSeriesEvaluate(APIView):
    """Evaluate every member (or `members`) on suites, tags, pair sets and probing tasks,
    on the whole benchmarks or on a fixed, seeded `subset` of each."""

    permission_classes = [IsAuthenticatedOrReadOnly]

    @extend_schema(
        request=SeriesEvaluateSerializer,
        responses={202: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 404: None, 503: None},
    )
    def post(self, request: Request, name: str) -> Response:
        found = _series(name)
        _refuse_unknown(request.data, SeriesEvaluateSerializer)
        body = request_body(SeriesEvaluateSerializer, request)
        body["subset"] = subset_parse(body.get("subset"))
        asked = series.series_evaluate(series=found, user=request.user, **body)
        return Response(asked, status=status.HTTP_202_ACCEPTED)


class ModelSeriesCurves(APIView):
    """Each benchmark's accuracy at each member, with its age of acquisition."""

    permission_classes = [IsAuthenticatedOrReadOnly]

    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: None})
    def get(self, request: Request, name: str) -> Response:
        return Response(selectors.series_curves_body(_series(name)))
