"""REST API for corpora: thin views over the service."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from gym.accounts import signed_in
from suites.catalog import ListQuery
from suites.catalog_api import (
    CatalogDetail,
    CatalogListCreate,
    GymDataSerializer,
    errors_answer,
    list_schema,
)
from suites.catalog_services import tag_slugs
from suites.corpora.models import Corpus
from suites.corpora.services import (
    CORPUS_SORTS,
    CorpusInvalid,
    corpus_histogram,
    corpus_import,
    corpus_list,
)
from suites.corpora.views import corpus_name_from_file
from suites.formats.report import SuiteError


class CorpusSerializer(GymDataSerializer):
    api_url_name = "api-corpus"

    class Meta:
        model = Corpus
        fields = [
            "name",
            "url",
            "description",
            "tags",
            "owner",
            "source_format",
            "gzipped",
            "line_count",
            "word_count",
            "char_count",
            "bytes",
            "validation_lines",
            "content_hash",
            "created_at",
        ]


class CorpusDetailSerializer(CorpusSerializer):
    histogram = serializers.SerializerMethodField()

    class Meta(CorpusSerializer.Meta):
        fields = [
            *CorpusSerializer.Meta.fields,
            "blank_lines",
            "validation_fraction",
            "validation_max",
            "validation_seed",
            "length_counts",
            "histogram",
            "sample",
        ]

    def get_histogram(self, corpus: Corpus) -> dict:
        return corpus_histogram(corpus)


N = TypeVar("N")


def _number(raw: object, kind: Callable[[str], N], field: str) -> tuple[N | None, list[SuiteError]]:
    try:
        return kind(str(raw)), []
    except (TypeError, ValueError):
        return None, [SuiteError(field, f"not a number: {str(raw)[:40]!r}")]


@list_schema(noun="corpora", sorts=CORPUS_SORTS)
class CorpusListCreate(CatalogListCreate):
    """List corpora (search, tag, ordering, pagination) or upload one."""

    serializer_class = CorpusSerializer
    parser_classes = [MultiPartParser, FormParser]

    def listed(self, query: ListQuery) -> QuerySet[Corpus]:
        return corpus_list(q=query.q, tag=query.tag, sort=query.sort)

    @extend_schema(
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "tags": {"type": "string", "description": "comma-separated"},
                    "validation_fraction": {"type": "number", "default": 0.01},
                    "validation_max": {"type": "integer", "default": 10000},
                    "validation_seed": {"type": "integer", "default": 0},
                },
                "required": ["file"],
            }
        },
        responses={201: CorpusDetailSerializer, 400: OpenApiTypes.OBJECT},
        description="Upload a corpus: NLPScholar TSV with a 'text' column or plain text "
        "(one sequence per line), either gzipped. 400 names the line of the problem; "
        "nothing is kept unless the whole file is valid.",
    )
    def post(self, request: Request) -> Response:
        upload = request.FILES.get("file")
        if upload is None:
            return errors_answer([SuiteError("file", "send the corpus as the 'file' field")])
        if upload.size > settings.GYM_MAX_CORPUS_BYTES:
            return errors_answer(
                [
                    SuiteError(
                        "file",
                        f"the file is {upload.size:,} bytes; the limit for corpora is "
                        f"{settings.GYM_MAX_CORPUS_BYTES:,} bytes",
                    )
                ],
                status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        data = request.data
        fraction, errors = _number(
            data.get("validation_fraction", 0.01), float, "validation_fraction"
        )
        maximum, more = _number(data.get("validation_max", 10000), int, "validation_max")
        seed, most = _number(data.get("validation_seed", 0), int, "validation_seed")
        if errors or more or most:
            return errors_answer(errors + more + most)
        assert fraction is not None and maximum is not None and seed is not None
        name = str(data.get("name", "")).strip() or corpus_name_from_file(upload.name)
        try:
            corpus = corpus_import(
                source=upload,
                name=name,
                owner=signed_in(request.user),
                file_name=upload.name,
                description=str(data.get("description", "")),
                tags=tag_slugs(str(data.get("tags", "")).split(",")),
                validation_fraction=fraction,
                validation_max=maximum,
                validation_seed=seed,
            )
        except CorpusInvalid as invalid:
            return errors_answer(invalid.errors)
        body = CorpusDetailSerializer(corpus, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED)


class CorpusDetail(CatalogDetail):
    model = Corpus
    noun = "corpus"
    serializer_class = CorpusDetailSerializer
