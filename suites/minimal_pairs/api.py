"""REST API for minimal-pair sets: upload, list, detail, export. Thin views over
suites.minimal_pairs.sets (the same import service and reads as the pages)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from suites.catalog import ListQuery
from suites.catalog_api import (
    UPLOAD_PARSERS,
    CatalogListCreate,
    GymDataSerializer,
    NamedUploadFields,
    UploadAnswer,
    list_schema,
    upload_answer,
    upload_read,
    upload_schema,
)
from suites.catalog_services import change_check
from suites.formats import lm_eval_tasks, pair_datasets
from suites.minimal_pairs import lm_eval
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet


class PairSetSerializer(GymDataSerializer):
    api_url_name = "api-pair-set"

    class Meta:
        model = MinimalPairSet
        fields = [
            "name",
            "description",
            "owner",
            "tags",
            "source_format",
            "metric",
            "columns",
            "condition_columns",
            "pair_count",
            "sentence_count",
            "content_hash",
            "import_warnings",
            "created_at",
            "updated_at",
            "url",
        ]


class PairSetUploadSerializer(UploadAnswer, PairSetSerializer):
    """The answer to an upload: the set, its import notes, and the name asked for when
    it was saved under another one (on_conflict=rename)."""

    class Meta(PairSetSerializer.Meta):
        fields = [*PairSetSerializer.Meta.fields, *UploadAnswer.FIELDS]


class PairSetReplaceSerializer(PairSetUploadSerializer):
    changed = serializers.BooleanField(
        read_only=True, help_text="false when the file holds the same content (nothing written)"
    )

    class Meta(PairSetUploadSerializer.Meta):
        fields = [*PairSetUploadSerializer.Meta.fields, "changed"]


class PairSetUploadFields(NamedUploadFields):
    """A minimal-pair set's upload fields (a replace keeps name, description and tags
    that are not given)."""

    drop_incomplete_pairs = serializers.BooleanField(
        default=False,
        help_text="leave out pairs lacking an expected or unexpected sentence (with a "
        "warning) instead of refusing the file",
    )
    file_format = serializers.ChoiceField(
        choices=pair_datasets.format_choices(),
        default="",
        help_text="the file's format (empty: detected from the content)",
    )


def _answer(request: Request, report: pair_sets.PairSetReport) -> dict[str, object]:
    body = PairSetSerializer(report.pair_set, context={"request": request}).data
    return upload_answer(body, warnings=report.warnings, renamed_from=report.renamed_from)


_FORMATS = (
    "a minimal-pair file: NLPScholar TSV, BLiMP-style JSON Lines or Parquet, CLAMS, Zorro, "
    "... (`file_format`, else detected from the content)"
)


@list_schema(noun="sets", sorts=pair_sets.SORTS)
class PairSetListCreate(CatalogListCreate):
    """List minimal-pair sets, or upload one."""

    serializer_class = PairSetSerializer

    def listed(self, query: ListQuery) -> QuerySet[MinimalPairSet]:
        return pair_sets.pair_set_list(q=query.q, tag=query.tag, sort=query.sort)

    @upload_schema(
        fields=PairSetUploadFields,
        raw={"text/tab-separated-values": OpenApiTypes.STR},
        responses={201: PairSetUploadSerializer},
        description=f"Upload {_FORMATS} as a set. 400 lists every problem (`path`, `row`, "
        "`column`); nothing is saved unless the whole file is valid.",
    )
    def post(self, request: Request) -> Response:
        upload = upload_read(request, PairSetUploadFields)
        report = pair_sets.minimal_pair_set_import(
            data=upload.data,
            filename=upload.filename,
            name=upload.name_or_stem(),
            owner=request.user,
            description=upload.fields.get("description", ""),
            tags=upload.tags or (),
            drop_incomplete_pairs=upload.fields["drop_incomplete_pairs"],
            rename_if_taken=upload.rename_if_taken,
            file_format=upload.fields["file_format"],
        )
        return Response(_answer(request, report), status=status.HTTP_201_CREATED)


class PairSetDetail(APIView):
    permission_classes = [IsAuthenticatedOrReadOnly]
    parser_classes = UPLOAD_PARSERS

    @extend_schema(responses=PairSetSerializer)
    def get(self, request: Request, name: str) -> Response:
        pair_set = get_object_or_404(MinimalPairSet.objects.select_related("owner"), name=name)
        return Response(PairSetSerializer(pair_set, context={"request": request}).data)

    @upload_schema(
        fields=PairSetUploadFields,
        raw={"text/tab-separated-values": OpenApiTypes.STR},
        responses={200: PairSetReplaceSerializer},
        description=f"Replace the set's content (owner or staff) with {_FORMATS}, "
        "validated as an upload; name, description and tags stay unless given. Runs on "
        "the old content stay, outdated. `changed` is false when the file holds the same "
        "content (nothing written).",
    )
    def put(self, request: Request, name: str) -> Response:
        pair_set = get_object_or_404(MinimalPairSet.objects.select_related("owner"), name=name)
        # Before the body is read: a stranger's file is not read at all.
        change_check(request.user, pair_set, what="the set", verb="replace")
        upload = upload_read(request, PairSetUploadFields)
        report = pair_sets.minimal_pair_set_replace(
            pair_set=pair_set,
            user=request.user,
            data=upload.data,
            filename=upload.filename,
            name=upload.fields.get("name"),
            description=upload.fields.get("description"),
            tags=upload.tags,
            drop_incomplete_pairs=upload.fields["drop_incomplete_pairs"],
            rename_if_taken=upload.rename_if_taken,
            file_format=upload.fields["file_format"],
        )
        return Response({**_answer(request, report), "changed": report.changed})


EXPORTS = ("tsv", "lm-eval")


class PairSetExport(APIView):
    """The set as an NLPScholar data TSV, columns in their original order, or with
    `as=lm-eval` as a zip of an lm-eval task folder (what `manage.py export_lm_eval`
    writes; `metric` lm_eval or sentence names the convention it reproduces)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("as", str, enum=list(EXPORTS), description="default: tsv"),
            OpenApiParameter(
                "metric",
                str,
                enum=sorted(lm_eval.DELIMITERS),
                description="lm-eval only: the convention (default lm_eval)",
            ),
        ],
        responses={(200, "text/tab-separated-values"): str, (200, "application/zip"): bytes},
    )
    def get(self, request: Request, name: str) -> HttpResponse:
        pair_set = get_object_or_404(MinimalPairSet, name=name)
        kind = str(request.query_params.get("as") or "tsv").strip()
        if kind not in EXPORTS:
            raise serializers.ValidationError({"as": f"choose one of {', '.join(EXPORTS)}"})
        if kind == "lm-eval":
            return _lm_eval_zip(pair_set, str(request.query_params.get("metric") or "lm_eval"))
        return HttpResponse(
            pair_sets.pair_set_export(pair_set),
            content_type="text/tab-separated-values; charset=utf-8",
        )


def _lm_eval_zip(pair_set: MinimalPairSet, metric: str) -> HttpResponse:
    """The task folder zipped as <task>/...; its data_files is relative to where the zip is
    unpacked, so `lm_eval --include_path <task> --tasks <task>` runs there as it is."""
    task = lm_eval.task_name(pair_set.name)
    try:
        folder = lm_eval.export_task(
            pair_sets.pair_set_data(pair_set),
            set_name=pair_set.name,
            content_hash=pair_set.content_hash,
            metric=metric,
            data_dir=task,
        )
    except lm_eval.LmEvalTaskInvalid as bad:
        raise serializers.ValidationError({bad.where or "set": str(bad)}) from None
    response = HttpResponse(lm_eval_tasks.zipped(folder, task), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{task}.zip"'
    return response
