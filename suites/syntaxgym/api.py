"""REST API of SyntaxGym test suites: list and upload (the upload convention of every
kind, `suites.catalog_api`), read, replace and delete one, its export, and the tags of
all suites. Thin views over the same `services` and `selectors` the suite pages use; the
grid editor's validation endpoints are `authoring`'s."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.permissions import IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gym.accounts import signed_in
from suites import formats
from suites.catalog import ListQuery
from suites.catalog_api import (
    CatalogListCreate,
    GymDataSerializer,
    RawBodyParser,
    UploadAnswer,
    UploadFields,
    list_schema,
    upload_answer,
    upload_read,
    upload_schema,
)
from suites.catalog_services import change_check
from suites.formats import lm_eval_tasks
from suites.formats.syntaxgym import TAG_MAX_LENGTH, TAGS_MAX_COUNT
from suites.models import Suite, Tag
from suites.syntaxgym import lm_eval as suite_lm_eval
from suites.syntaxgym import selectors, services


class RawJSONParser(RawBodyParser):
    """Hands the body to the format layer untouched, so that malformed JSON gets the same
    located error (line, column) as an upload through the page; read as RawBodyParser
    reads, never past the upload limit."""

    media_type = "application/json"


class TagSerializer(serializers.ModelSerializer):
    suite_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Tag
        fields = ["name", "description", "suite_count"]


class SuiteSummarySerializer(GymDataSerializer):
    api_url_name = "api-suite"

    class Meta:
        model = Suite
        # No description: lists stay small whatever the suites hold; the detail has it.
        fields = [
            "name",
            "owner",
            "tags",
            "metric",
            "region_count",
            "condition_count",
            "item_count",
            "content_hash",
            "created_at",
            "updated_at",
            "url",
        ]


class SuiteDetailSerializer(SuiteSummarySerializer):
    regions = serializers.SerializerMethodField()
    conditions = serializers.SerializerMethodField()
    predictions = serializers.SerializerMethodField()

    class Meta(SuiteSummarySerializer.Meta):
        fields = SuiteSummarySerializer.Meta.fields + [
            "archived_at",
            "description",
            "reference",
            "author",
            "comment",
            "extra_meta",
            "source_format",
            "import_warnings",
            "regions",
            "conditions",
            "predictions",
        ]

    def get_regions(self, suite: Suite) -> list[dict]:
        return [{"number": r.number, "name": r.name} for r in suite.regions.all()]

    def get_conditions(self, suite: Suite) -> list[str]:
        return [c.name for c in suite.conditions.all()]

    def get_predictions(self, suite: Suite) -> list[dict]:
        return [{"formula": p.formula, "original": p.original} for p in suite.predictions.all()]


class SuiteUploadSerializer(UploadAnswer, SuiteDetailSerializer):
    """The answer to an upload: the suite, its import notes, and the name asked for when
    it was saved under another one (on_conflict=rename)."""

    class Meta(SuiteDetailSerializer.Meta):
        fields = [*SuiteDetailSerializer.Meta.fields, *UploadAnswer.FIELDS]


@list_schema(noun="suites", sorts=selectors.SORTS)
class SuiteListCreate(CatalogListCreate):
    """List suites (search, tag filter, sort, pagination) or upload one (a suite file)."""

    serializer_class = SuiteSummarySerializer

    def listed(self, query: ListQuery) -> QuerySet[Suite]:
        return selectors.suite_list(q=query.q, tag=query.tag, sort=query.sort)

    @upload_schema(
        fields=UploadFields,
        raw={"application/json": OpenApiTypes.OBJECT},
        responses={201: SuiteUploadSerializer},
        description="Upload a suite in any SyntaxGym JSON format. `tags` are added to the "
        f"suite's own meta.tags (at most {TAGS_MAX_COUNT} in all, each at most "
        f"{TAG_MAX_LENGTH} characters). 400 lists every problem, each with `path` and "
        "`location`, the place as numbers (section, item, condition, region, "
        "region_number, prediction, key; line and column for CSV); nothing is saved "
        "unless all is valid.",
    )
    def post(self, request: Request) -> Response:
        upload = upload_read(request, SuiteUploadFields)
        report = services.suite_import(
            source=upload.data,
            owner=signed_in(request.user),
            rename_if_taken=upload.rename_if_taken,
            extra_tags=upload.tags or (),
        )
        body = SuiteDetailSerializer(report.suite, context={"request": request}).data
        answer = upload_answer(body, warnings=report.warnings, renamed_from=report.renamed_from)
        return Response(answer, status=status.HTTP_201_CREATED)


class SuiteUploadFields(UploadFields):
    """A suite's upload fields: those of every kind. The name and description other kinds
    take for files that carry none are refused rather than ignored: a suite is named and
    described by its own file. (`filename`, which a raw body may carry for any kind, is
    accepted: a suite's format is read from its content.)"""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = sorted(f for f in ("name", "description") if f in self.initial_data)
        if given:
            raise serializers.ValidationError(
                {
                    field: [
                        f"A suite takes no `{field}` field: its name and description are "
                        "its file's meta.name and meta.description. Change them in the "
                        "file, or give on_conflict=rename to save it under a free name."
                    ]
                    for field in given
                }
            )
        return attrs


class SuiteDetail(APIView):
    permission_classes = [IsAuthenticatedOrReadOnly]
    parser_classes = [RawJSONParser]

    def _get(self, name: str) -> Suite:
        return get_object_or_404(Suite.objects.select_related("owner"), name=name)

    @extend_schema(responses=SuiteDetailSerializer)
    def get(self, request: Request, name: str) -> Response:
        suite = self._get(name)
        return Response(SuiteDetailSerializer(suite, context={"request": request}).data)

    @extend_schema(
        request={"application/json": OpenApiTypes.OBJECT},
        responses={200: SuiteDetailSerializer, 400: OpenApiTypes.OBJECT, 403: None},
        description="Replace the suite's content (owner or staff).",
    )
    def put(self, request: Request, name: str) -> Response:
        suite = self._get(name)
        # Before request.data: a stranger's body is not read at all.
        change_check(request.user, suite, what="the suite", verb="replace")
        report = services.suite_replace(suite=suite, user=request.user, source=request.data)
        body = SuiteDetailSerializer(report.suite, context={"request": request}).data
        body["warnings"] = report.warnings
        return Response(body)

    @extend_schema(
        responses={204: None, 200: SuiteDetailSerializer},
        description="Delete the suite (204), or archive it when it has evaluations (200, the "
        "suite with `archived_at` set): it leaves the lists, its results stay reachable.",
    )
    def delete(self, request: Request, name: str) -> Response:
        suite = self._get(name)
        if services.suite_delete(suite=suite, user=request.user) == "archived":
            return Response(SuiteDetailSerializer(suite, context={"request": request}).data)
        return Response(status=status.HTTP_204_NO_CONTENT)


SUITE_EXPORTS = ("json", "csv", "lm-eval")


class SuiteExport(APIView):
    """The whole suite in the canonical current format, as CSV with `as=csv`, or with
    `as=lm-eval` as a zip of lm-eval tasks, one per prediction, where every prediction
    compares whole sentences (what `manage.py export_lm_eval --suite` writes; `metric`
    sentence or lm_eval names the convention it reproduces)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("as", str, enum=list(SUITE_EXPORTS), description="default: json"),
            OpenApiParameter(
                "metric",
                str,
                enum=sorted(lm_eval_tasks.DELIMITERS),
                description="lm-eval only: the convention (default sentence)",
            ),
        ],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/csv"): str,
            (200, "application/zip"): bytes,
        },
    )
    def get(self, request: Request, name: str) -> HttpResponse:
        suite = get_object_or_404(Suite, name=name)
        kind = str(request.query_params.get("as") or "json").strip()
        if kind not in SUITE_EXPORTS:
            raise serializers.ValidationError({"as": f"choose one of {', '.join(SUITE_EXPORTS)}"})
        data = selectors.suite_canonical(suite)
        if kind == "csv":
            return HttpResponse(formats.to_csv_text(data), content_type="text/csv; charset=utf-8")
        if kind == "lm-eval":
            metric = str(request.query_params.get("metric") or suite_lm_eval.DEFAULT_METRIC)
            return _lm_eval_zip(suite, data, metric)
        return HttpResponse(
            json.dumps(data, ensure_ascii=False), content_type="application/json; charset=utf-8"
        )


def _lm_eval_zip(suite: Suite, data: dict[str, Any], metric: str) -> HttpResponse:
    """The tasks zipped as <task>/...; data_files is relative to where the zip is unpacked,
    so `lm_eval --include_path <task> --tasks <tasks>` runs there as it is."""
    top = lm_eval_tasks.task_name(suite.name)
    try:
        folder = suite_lm_eval.export_suite(
            data,
            suite_name=suite.name,
            content_hash=suite.content_hash,
            metric=metric,
            data_dir=top,
        )
    except lm_eval_tasks.LmEvalTaskInvalid as bad:
        raise serializers.ValidationError({bad.where or "suite": str(bad)}) from None
    response = HttpResponse(lm_eval_tasks.zipped(folder, top), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{top}.zip"'
    response["X-Lm-Eval-Tasks"] = folder.task_list
    return response


class TagList(generics.ListAPIView):
    serializer_class = TagSerializer
    pagination_class = None

    def get_queryset(self) -> QuerySet[Tag]:
        return selectors.tag_counts()
