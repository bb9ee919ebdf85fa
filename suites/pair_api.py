"""REST API for minimal-pair sets: upload, list, detail, export. Thin views over
suites.pair_sets (the same import service and reads as the pages)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.parsers import BaseParser
from rest_framework.permissions import IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from suites import pair_sets
from suites.catalog import ListQuery
from suites.catalog_api import GymDataSerializer, list_parameters
from suites.models import MinimalPairSet

# Query-string spellings of "yes".
TRUE_VALUES = frozenset({"1", "true", "yes", "on"})


class RawBodyParser(BaseParser):
    """The body untouched (a TSV or JSONL file), for the format layer to read."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None) -> bytes:  # type: ignore[no-untyped-def]
        return stream.read() if stream is not None else b""


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


class PairSetListCreate(generics.ListAPIView):
    """List minimal-pair sets, or upload one: the file as the body, `name` (required),
    `description`, `tags` (comma-separated) and `filename` (.tsv / .jsonl) in the query."""

    serializer_class = PairSetSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]
    parser_classes = [RawBodyParser]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        query = ListQuery.from_api(self.request.query_params)
        return pair_sets.pair_set_list(q=query.q, tag=query.tag, sort=query.sort)

    @extend_schema(parameters=list_parameters(noun="sets", sorts=pair_sets.SORTS))
    def get(self, request: Request, *args, **kwargs) -> Response:  # type: ignore[no-untyped-def]
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request={"text/tab-separated-values": OpenApiTypes.STR},
        parameters=[
            OpenApiParameter("name", str, required=True),
            OpenApiParameter("description", str),
            OpenApiParameter("tags", str, description="comma-separated"),
            OpenApiParameter("filename", str, description="x.tsv or x.jsonl (default: sniffed)"),
            OpenApiParameter(
                "drop_incomplete_pairs",
                bool,
                description="leave out pairs lacking an expected or unexpected sentence "
                "(with a warning) instead of refusing the file",
            ),
        ],
        responses={201: PairSetSerializer, 400: OpenApiTypes.OBJECT},
        description='400 gives {"errors": [{"path", "row", "column", "message"}]}; nothing '
        "is saved unless the whole file is valid.",
    )
    def post(self, request: Request) -> Response:
        data = request.data if isinstance(request.data, bytes) else b""
        if len(data) > settings.GYM_MAX_UPLOAD_BYTES:
            return _too_large()
        params = request.query_params
        try:
            report = pair_sets.minimal_pair_set_import(
                data=data,
                filename=params.get("filename", ""),
                name=params.get("name", ""),
                owner=request.user,
                description=params.get("description", ""),
                tags=params.get("tags", "").split(","),
                drop_incomplete_pairs=params.get("drop_incomplete_pairs", "") in TRUE_VALUES,
            )
        except pair_sets.PairSetInvalid as invalid:
            return _invalid(invalid)
        body = PairSetSerializer(report.pair_set, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED)


def _too_large() -> Response:
    return Response(
        {
            "errors": [
                {
                    "code": "too_large",
                    "path": "file",
                    "message": "the file is larger than the limit",
                }
            ]
        },
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


def _invalid(invalid: pair_sets.PairSetInvalid) -> Response:
    return Response(
        {"errors": [{"code": "invalid", **e.as_dict()} for e in invalid.errors]},
        status=status.HTTP_400_BAD_REQUEST,
    )


class PairSetDetail(APIView):
    permission_classes = [IsAuthenticatedOrReadOnly]
    parser_classes = [RawBodyParser]

    @extend_schema(responses=PairSetSerializer)
    def get(self, request: Request, name: str) -> Response:
        pair_set = get_object_or_404(MinimalPairSet.objects.select_related("owner"), name=name)
        return Response(PairSetSerializer(pair_set, context={"request": request}).data)

    @extend_schema(
        request={"text/tab-separated-values": OpenApiTypes.STR},
        parameters=[
            OpenApiParameter("name", str, description="a new name (default: kept)"),
            OpenApiParameter("description", str, description="default: kept"),
            OpenApiParameter("tags", str, description="comma-separated (default: kept)"),
            OpenApiParameter("filename", str, description="x.tsv or x.jsonl (default: sniffed)"),
            OpenApiParameter("drop_incomplete_pairs", bool, description="as for an upload (POST)"),
        ],
        responses={200: PairSetSerializer, 400: OpenApiTypes.OBJECT, 403: None},
        description="Replace the set's content (owner or staff), validated as an upload; "
        "runs on the old content stay, outdated. `changed` is false when the file holds "
        "the same content (nothing written).",
    )
    def put(self, request: Request, name: str) -> Response:
        pair_set = get_object_or_404(MinimalPairSet.objects.select_related("owner"), name=name)
        data = request.data if isinstance(request.data, bytes) else b""
        if len(data) > settings.GYM_MAX_UPLOAD_BYTES:
            return _too_large()
        params = request.query_params
        tags = params.get("tags")
        try:
            report = pair_sets.minimal_pair_set_replace(
                pair_set=pair_set,
                user=request.user,
                data=data,
                filename=params.get("filename", ""),
                name=params.get("name"),
                description=params.get("description"),
                tags=tags.split(",") if tags is not None else None,
                drop_incomplete_pairs=params.get("drop_incomplete_pairs", "") in TRUE_VALUES,
            )
        except pair_sets.PairSetInvalid as invalid:
            return _invalid(invalid)
        body = PairSetSerializer(report.pair_set, context={"request": request}).data
        return Response({**body, "changed": report.changed, "warnings": report.warnings})


class PairSetExport(APIView):
    """The set as an NLPScholar data TSV, columns in their original order."""

    @extend_schema(responses={(200, "text/tab-separated-values"): str})
    def get(self, request: Request, name: str) -> HttpResponse:
        pair_set = get_object_or_404(MinimalPairSet, name=name)
        return HttpResponse(
            pair_sets.pair_set_export(pair_set),
            content_type="text/tab-separated-values; charset=utf-8",
        )
