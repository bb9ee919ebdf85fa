"""API of minimal pairs' results: the analysis of a posted predictions TSV against a
stored set (nothing stored; the same function as `minimal_pairs analyze`), evaluations
(ask, list, status, retry, cancel), their four tables with analysis options, and the
import of NLPScholar predictions. Lives in evaluations because suites never imports
evaluations. Thin views over evaluations.minimal_pairs.services and .results."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from django.db.models import QuerySet
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.permissions import IsAuthenticated, IsAuthenticatedOrReadOnly
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.minimal_pairs import results as pair_results
from evaluations.minimal_pairs import services as pair_services
from evaluations.minimal_pairs.analysis import (
    METRICS,
    PRED_MEASURES,
    PUNCTUATION,
    WORD_SUMMARIES,
    AnalysisError,
    AnalysisOptions,
    Table,
    analyze_minimal_pairs,
    table_to_tsv,
)
from evaluations.minimal_pairs.tokens import (
    COLUMNS,
    TokenTable,
    parse_predictions_tsv,
    predictions_to_tsv,
)
from evaluations.models import LanguageModel, PairEvaluation
from evaluations.runs import lifecycle as runs
from evaluations.runs.api import (
    BAD_FILTER,
    RUN_FILTER_PARAMETERS,
    RUN_STATE_FIELDS,
    QueuedNow,
    request_body,
    request_schema,
    requested_answer,
    run_action_apis,
    run_filters_of,
)
from evaluations.scoring import WORD_PROBABILITY
from gym.errors import error_body, invalid_entries
from gym.rest import NameField
from suites.catalog_api import UPLOAD_PARSERS, file_body, upload_received
from suites.catalog_services import upload_limits
from suites.formats.minimal_pairs import MinimalPairFormatError
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet

PAIR_TABLES = ("tokens", "by_word", "by_pair", "by_cond")


class PairSetAnalyze(APIView):
    """Analyse a predictions TSV (NLPScholar's evaluate columns, from NLPScholar itself
    or `minimal_pairs evaluate`) against the stored set; nothing is stored. The file and
    the options come as in every upload: the multipart field `file` with the options
    beside it, or the file as the body with the options in the query. `metric`: the
    set's own (from its format) unless asked, as a pair run's; the answer names it."""

    parser_classes = UPLOAD_PARSERS

    @extend_schema(
        request=file_body("text/tab-separated-values"),
        parameters=[
            OpenApiParameter("table", str, enum=["by_cond", "by_pair", "by_word"]),
            OpenApiParameter(
                "metric", str, enum=list(METRICS), description="default: the set's own metric"
            ),
            OpenApiParameter("pred_measure", str, enum=["surp", "prob", "perplexity"]),
            OpenApiParameter("word_summary", str, enum=["mean", "sum"]),
            OpenApiParameter("punctuation", str, enum=["previous", "next", "separate", "ignore"]),
            OpenApiParameter("conditions", str, description="condition columns, comma-separated"),
            OpenApiParameter("as", str, enum=["json", "tsv"]),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request, name: str) -> HttpResponse:
        pair_set = get_object_or_404(MinimalPairSet, name=name)
        data, _, params = upload_received(request)
        table = params.get("table", "by_cond")
        # A located 400 (`$.metric`) as the tables' `?metric=` gives.
        metric = pair_results.metric_asked(params, pair_set.metric)
        try:
            if table not in ("by_cond", "by_pair", "by_word"):
                raise AnalysisError("table must be by_cond, by_pair or by_word")
            tokens = parse_predictions_tsv(data, upload_limits())
            options = AnalysisOptions(
                pred_measure=params.get("pred_measure", "surp"),
                word_summary=params.get("word_summary", "mean"),
                punctuation=params.get("punctuation", "previous"),
                conditions=tuple(
                    c.strip() for c in params.get("conditions", "").split(",") if c.strip()
                ),
                metric=metric,
            )
            result = analyze_minimal_pairs(
                tokens, pair_sets.pair_set_data(pair_set), options, tables=(table,)
            )
        except MinimalPairFormatError as exc:
            return Response(
                error_body(*invalid_entries(exc.errors)), status=status.HTTP_400_BAD_REQUEST
            )
        except AnalysisError as exc:
            return Response(
                {"errors": [{"code": "invalid", "path": "analysis", "message": str(exc)}]},
                status=status.HTTP_400_BAD_REQUEST,
            )
        out = getattr(result, table)
        if params.get("as") == "tsv":
            if metric != "nlpscholar":
                # As a run's tables: named where it is not NLPScholar's own analysis.
                out = with_column(out, "metric", metric)
            return HttpResponse(
                table_to_tsv(out), content_type="text/tab-separated-values; charset=utf-8"
            )
        return Response(
            {
                "columns": out.columns,
                "rows": out.rows,
                "metric": metric,
                "warnings": result.warnings,
            }
        )


# ---------------------------------------------------------------- evaluations (runs)


class PairEvaluationSerializer(serializers.ModelSerializer):
    model = serializers.CharField(source="model.name")
    pair_set = serializers.CharField(source="pair_set.name")
    outdated = serializers.BooleanField(read_only=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    api_url = serializers.SerializerMethodField()
    import_warnings = serializers.SerializerMethodField(
        help_text="What an import of predictions left out of its file (empty otherwise)"
    )

    class Meta:
        model = PairEvaluation
        fields = [
            "id",
            "model",
            "pair_set",
            "content_hash",
            "outdated",
            "origin",
            *RUN_STATE_FIELDS,
            "word_probability",
            "metric",
            "accuracy",
            "ties",
            "created_at",
            "started_at",
            "finished_at",
            "url",
            "api_url",
            "import_warnings",
        ]

    def get_api_url(self, evaluation: PairEvaluation) -> str:
        return reverse("api-pair-evaluation", args=[evaluation.pk])

    def get_import_warnings(self, evaluation: PairEvaluation) -> list[str]:
        return [str(w) for w in (evaluation.diagnostics or {}).get("import_warnings") or []]


class RequestedPairEvaluationSerializer(QueuedNow, PairEvaluationSerializer):
    """A run in the answer to a request: `queued_now` tells whether this request created
    it (false: it was already there for the same content, worker-run or imported)."""

    class Meta(PairEvaluationSerializer.Meta):
        fields = [*PairEvaluationSerializer.Meta.fields, "queued_now"]


class PairEvaluationDetailSerializer(PairEvaluationSerializer):
    tables = serializers.SerializerMethodField()

    class Meta(PairEvaluationSerializer.Meta):
        # Not model_info: it holds the worker's paths of local models.
        fields = [*PairEvaluationSerializer.Meta.fields, "diagnostics", "tables"]

    def get_tables(self, evaluation: PairEvaluation) -> dict[str, str]:
        return {
            name: reverse("api-pair-evaluation-table", args=[evaluation.pk, name])
            for name in PAIR_TABLES
        }


MAX_ASKED = 100


class PairEvaluationRequestSerializer(serializers.Serializer):
    models = serializers.ListField(
        child=NameField(slug_field="name", queryset=LanguageModel.objects.filter(is_hidden=False)),
        min_length=1,
        max_length=MAX_ASKED,
    )
    sets = serializers.ListField(
        child=NameField(slug_field="name", queryset=MinimalPairSet.objects),
        min_length=1,
        max_length=MAX_ASKED,
    )
    word_probability = serializers.ChoiceField(
        choices=list(WORD_PROBABILITY),
        required=False,
        default="tokens",
        help_text="What a token's surprisal is: 'tokens' (the model's) or 'corrected': each "
        "word's last token also carries the word-boundary correction, so that word and ROI "
        "sums are word surprisals (causal LMs whose tokenizer marks word starts; see the "
        "docs' evaluation page). Corrected runs are separate runs, left out of the "
        "leaderboard and the comparisons",
    )
    metric = serializers.ChoiceField(
        choices=PairEvaluation._meta.get_field("metric").choices or list(METRICS),
        required=False,
        default=None,
        allow_null=True,
        help_text="How pairs are compared: 'sentence' (the whole sentence's log probability "
        "after the start token), 'nlpscholar' (NLPScholar's analysis) or 'lm_eval' (the "
        "whole sentence as lm-evaluation-harness scores it: a leading space after the "
        "end-of-text token). Without it, each set's own (from its format). Runs of "
        "another metric are separate runs",
    )


class PairEvaluationListCreate(generics.ListAPIView):
    """List minimal-pair evaluations (filter by model, set, status, origin, mine) or ask
    for models on sets."""

    serializer_class = PairEvaluationSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]

    @extend_schema(
        parameters=[
            *RUN_FILTER_PARAMETERS,
            OpenApiParameter("set", str, description="A minimal-pair set's name"),
            OpenApiParameter("origin", str, enum=list(PairEvaluation.Origin.values)),
            OpenApiParameter("word_probability", str, enum=list(WORD_PROBABILITY)),
            OpenApiParameter("metric", str, enum=list(METRICS)),
        ],
        description=f"Newest first, paged (`page`). 400: {BAD_FILTER}",
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[PairEvaluation]:
        runs = PairEvaluation.objects.select_related("model", "pair_set").order_by("-created_at")
        params = self.request.query_params
        for param, lookup in (("set", "pair_set__name"), ("origin", "origin")):
            if params.get(param, "").strip():
                runs = runs.filter(**{lookup: params[param].strip()})
        asked = params.get("word_probability", "").strip()
        if asked:
            if asked not in WORD_PROBABILITY:
                raise serializers.ValidationError(
                    {"word_probability": f"choose one of {', '.join(WORD_PROBABILITY)}"}
                )
            runs = runs.filter(word_probability=asked)
        metric = params.get("metric", "").strip()
        if metric:
            if metric not in METRICS:
                raise serializers.ValidationError({"metric": f"choose one of {', '.join(METRICS)}"})
            runs = runs.filter(metric=metric)
        return run_filters_of(self.request, runs, kind=pair_services.PAIR_RUNS.name)

    @request_schema(
        PairEvaluationRequestSerializer,
        RequestedPairEvaluationSerializer,
        "One run per (model, set, set content hash); asking again returns the "
        "existing ones (200; 201 when at least one is new). 400 for a model registered only "
        "for imported results; 503 when the task queue is unreachable (the runs are kept and "
        "sent when it is back).",
    )
    def post(self, request: Request) -> Response:
        body = request_body(PairEvaluationRequestSerializer, request)
        outcome = pair_services.pair_evaluation_request(
            user=request.user,
            models=body["models"],
            pair_sets=body["sets"],
            word_probability=body["word_probability"],
            metric=body.get("metric"),
        )
        return requested_answer(
            RequestedPairEvaluationSerializer, outcome.evaluations, outcome.created
        )


def _evaluation(pk: int) -> PairEvaluation:
    return get_object_or_404(PairEvaluation.objects.select_related("model", "pair_set"), pk=pk)


class PairEvaluationDetail(APIView):
    """One evaluation: status, progress, accuracy (default analysis options), error, and
    the addresses of its four tables."""

    @extend_schema(responses=PairEvaluationDetailSerializer)
    def get(self, request: Request, pk: int) -> Response:
        return Response(PairEvaluationDetailSerializer(_evaluation(pk)).data)


PairEvaluationRetry, PairEvaluationCancel = run_action_apis(
    "PairEvaluation",
    _evaluation,
    PairEvaluationSerializer,
    retry_doc="""
    Send a failed or cancelled run again (a new attempt), or one that never reached
    the queue. The set's owner, the requester or staff; 409 when there is nothing to do.""",
    cancel_doc="""
    Cancel a queued or running run. The set's owner, the requester or staff; 409 when
    it is finished.""",
)


class TSVRenderer(BaseRenderer):
    """`?format=tsv`: the table as NLPScholar's files hold it."""

    media_type = "text/tab-separated-values"
    format = "tsv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        return data.encode("utf-8") if isinstance(data, str) else b""


class PairEvaluationTable(APIView):
    """One table of a done evaluation: `tokens` (NLPScholar's evaluate columns), `by_word`,
    `by_pair` or `by_cond` under the analysis options of the query string. JSON by
    default; `?format=tsv` gives exactly what `minimal_pairs analyze` (or `evaluate`, for
    tokens) writes."""

    renderer_classes = [JSONRenderer, TSVRenderer]

    @extend_schema(
        operation_id="pairs_evaluations_table_retrieve",
        parameters=[
            OpenApiParameter(
                "metric", str, enum=list(METRICS), description="default: the run's metric"
            ),
            OpenApiParameter("pred_measure", str, enum=list(PRED_MEASURES)),
            OpenApiParameter("word_summary", str, enum=list(WORD_SUMMARIES)),
            OpenApiParameter("punctuation", str, enum=list(PUNCTUATION)),
            OpenApiParameter("conditions", str, description="condition columns, comma-separated"),
            OpenApiParameter("format", str, enum=["json", "tsv"]),
        ],
        responses={200: OpenApiTypes.OBJECT, 409: None},
    )
    def get(self, request: Request, pk: int, table: str) -> Response:
        if table not in PAIR_TABLES:
            raise Http404(f"no table {table[:50]!r}; choose one of {', '.join(PAIR_TABLES)}")
        evaluation = _evaluation(pk)
        options = pair_results.analysis_options(request.query_params, evaluation.metric)
        if evaluation.status != PairEvaluation.Status.DONE:
            raise runs.RunConflict(
                f"This evaluation is {evaluation.status}; its tables exist once it is done."
            )
        tsv = request.accepted_renderer.format == "tsv"
        # Named only for word-corrected runs, as `minimal_pairs evaluate` does: a last
        # column of the TSV, a key of the JSON.
        corrected = word_probability_named(evaluation)
        if table == "tokens":
            tokens = pair_results.token_table(evaluation)
            if tsv:
                return Response(predictions_to_tsv(tokens, word_probability=corrected))
            return Response({**tokens_json(tokens), **_named(corrected)})
        analysis = pair_results.analyze_evaluation(evaluation, options, tables=(table,))
        out = getattr(analysis, table)
        if tsv:
            out = with_word_probability(out, corrected)
            if options.metric != "nlpscholar":
                # Named where it is not NLPScholar's, whose files stay as NLPScholar writes them.
                out = with_column(out, "metric", options.metric)
            return Response(table_to_tsv(out))
        return Response(
            {
                "columns": out.columns,
                "rows": [[json_cell(v) for v in row] for row in out.rows],
                "options": asdict(options),
                "metric": options.metric,
                "warnings": analysis.warnings,
                **_named(corrected),
            }
        )

    def handle_exception(self, exc: Exception) -> Response:
        # Errors are JSON in the API's one shape, also when a TSV was asked for.
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)


def word_probability_named(evaluation: PairEvaluation) -> str | None:
    """What a word-corrected run's exports say it holds (None for ordinary runs): what
    its worker applied ("tokens" for a model the correction does not apply to)."""
    if evaluation.word_probability == "tokens":
        return None
    applied = (evaluation.diagnostics or {}).get("word_probability")
    return str(applied or evaluation.word_probability)


def _named(word_probability: str | None) -> dict[str, str]:
    return {} if word_probability is None else {"word_probability": word_probability}


def with_column(table: Table, name: str, value: str) -> Table:
    """The table with a last column `name` holding `value` on every row."""
    return Table(
        columns=[*table.columns, name],
        rows=[[*row, value] for row in table.rows],
        index=table.index,
    )


def with_word_probability(table: Table, word_probability: str | None) -> Table:
    """The table with a last `word_probability` column holding it on every row (the
    table itself when None)."""
    if word_probability is None:
        return table
    return Table(
        columns=[*table.columns, "word_probability"],
        rows=[[*row, word_probability] for row in table.rows],
        index=table.index,
    )


def json_cell(value: object) -> object:
    """JSON has no NaN: a missing value is null."""
    return None if isinstance(value, float) and math.isnan(value) else value


def tokens_json(tokens: TokenTable) -> dict[str, Any]:
    columns = {
        "token": tokens.token,
        "sentid": tokens.sentid,
        "word": tokens.word,
        "wordpos": tokens.wordpos.tolist(),
        "model": tokens.model,
        "tokenizer": tokens.tokenizer,
        "punctuation": tokens.punctuation.tolist(),
        "prob": [json_cell(v) for v in tokens.prob.tolist()],
        "surp": [json_cell(v) for v in tokens.surp.tolist()],
    }
    return {
        "columns": list(COLUMNS),
        "rows": [list(row) for row in zip(*columns.values(), strict=True)],
    }


class PairPredictionsImport(APIView):
    """Import an NLPScholar predictions TSV (the multipart field `file`, or the body, as
    every upload takes a file) as the results of a model on the set: `model` (a
    registered model's name) in the query or beside `file`; `register=1` registers a
    name-only model (source `imported:<name>`, never run on a worker) when there is none;
    `file_model` picks one model of a file that holds several; `drop_unknown_rows=1`
    leaves out rows whose sentid is not in the set (a set uploaded with incomplete pairs
    left out), counted in the answer's `import_warnings`. The set's owner or staff.
    400 lists every problem with row and column; nothing is saved on any error; 409
    when the model already has results on this content of the set."""

    parser_classes = UPLOAD_PARSERS
    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=file_body("text/tab-separated-values"),
        parameters=[
            OpenApiParameter("model", str, required=True),
            OpenApiParameter("register", bool),
            OpenApiParameter("display_name", str),
            OpenApiParameter("file_model", str),
            OpenApiParameter(
                "drop_unknown_rows",
                bool,
                description="leave out rows whose sentid is not in the set, with a warning",
            ),
        ],
        responses={201: PairEvaluationSerializer, 409: None},
    )
    def post(self, request: Request, name: str) -> Response:
        pair_set = get_object_or_404(MinimalPairSet, name=name)
        data, _, params = upload_received(request)
        evaluation = pair_services.pair_predictions_import(
            pair_set=pair_set,
            model_name=params.get("model", ""),
            register=params.get("register", "") in ("1", "true", "yes", "on"),
            display_name=params.get("display_name", ""),
            data=data,
            user=request.user,
            file_model=params.get("file_model", ""),
            drop_unknown_rows=params.get("drop_unknown_rows", "") in ("1", "true", "yes", "on"),
        )
        return Response(PairEvaluationSerializer(evaluation).data, status=status.HTTP_201_CREATED)
