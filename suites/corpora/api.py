"""REST API for corpora: thin views over the service."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from gym.accounts import signed_in
from suites import catalog_api
from suites.catalog import ListQuery
from suites.corpora import reading
from suites.corpora.models import Corpus
from suites.corpora.services import (
    CORPUS_SORTS,
    corpus_histogram,
    corpus_import,
    corpus_list,
    sample_lines,
)
from suites.corpora.views import corpus_name_from_file


class CorpusSerializer(catalog_api.GymDataSerializer):
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


_SAMPLE_SCHEMA = {
    "type": "array",
    "description": "Sample lines as [line number, text]; a text longer than "
    "GYM_SAMPLE_LINE_CHARS characters is cut to them and ends in '…'",
    "items": {"type": "array", "items": {"oneOf": [{"type": "integer"}, {"type": "string"}]}},
}


class CorpusDetailSerializer(CorpusSerializer):
    histogram = serializers.SerializerMethodField()
    sample = serializers.SerializerMethodField()

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

    @extend_schema_field(_SAMPLE_SCHEMA)
    def get_sample(self, corpus: Corpus) -> list[list[Any]]:
        return sample_lines(corpus.sample)


class CorpusUploadSerializer(CorpusDetailSerializer, catalog_api.UploadAnswer):
    class Meta(CorpusDetailSerializer.Meta):
        fields = [*CorpusDetailSerializer.Meta.fields, *catalog_api.UploadAnswer.FIELDS]


class CorpusUploadFields(catalog_api.NamedUploadFields):
    """A corpus's upload fields: how its validation lines are drawn."""

    validation_fraction = serializers.FloatField(
        default=reading.DEFAULT_VALIDATION_FRACTION,
        help_text="the share of lines held out for validation, from 0 up to (not including) 1",
    )
    validation_max = serializers.IntegerField(
        default=reading.DEFAULT_VALIDATION_MAX,
        help_text="at most this many validation lines (0 to 10,000,000)",
    )
    validation_seed = serializers.IntegerField(
        default=reading.DEFAULT_VALIDATION_SEED, help_text="the seed of the draw"
    )


@catalog_api.list_schema(noun="corpora", sorts=CORPUS_SORTS)
class CorpusListCreate(catalog_api.CatalogListCreate):
    """List corpora (search, tag, ordering, pagination) or upload one."""

    serializer_class = CorpusSerializer

    def listed(self, query: ListQuery) -> QuerySet[Corpus]:
        return corpus_list(q=query.q, tag=query.tag, sort=query.sort)

    @catalog_api.upload_schema(
        fields=CorpusUploadFields,
        raw={"text/plain": OpenApiTypes.STR},
        responses={201: CorpusUploadSerializer},
        description="Upload a corpus: NLPScholar TSV with a 'text' column or plain text "
        "(one sequence per line), either gzipped. 400 names the line of the problem; "
        "nothing is kept unless the whole file is valid. Corpora have their own size "
        "limit, GYM_MAX_CORPUS_BYTES, and the file is read as it arrives.",
    )
    def post(self, request: Request) -> Response:
        upload = catalog_api.upload_stream(
            request,
            CorpusUploadFields,
            limit=settings.GYM_MAX_CORPUS_BYTES,
            setting="GYM_MAX_CORPUS_BYTES",
        )
        fields = upload.fields
        # The default name drops the corpus's extensions (.tsv.gz), as the upload page does.
        asked = fields.get("name") or (
            corpus_name_from_file(upload.filename) if upload.filename else ""
        )
        corpus = corpus_import(
            source=upload.stream,
            name=asked,
            owner=signed_in(request.user),
            file_name=upload.filename,
            description=fields.get("description", ""),
            tags=upload.tags or (),
            validation_fraction=fields["validation_fraction"],
            validation_max=fields["validation_max"],
            validation_seed=fields["validation_seed"],
            rename_if_taken=upload.rename_if_taken,
        )
        body = CorpusUploadSerializer(corpus, context={"request": request}).data
        renamed_from = asked.strip() if corpus.name != asked.strip() else ""
        return Response(catalog_api.upload_answer(body, renamed_from=renamed_from), status=201)


class CorpusDetail(catalog_api.CatalogDetail):
    model = Corpus
    noun = "corpus"
    serializer_class = CorpusDetailSerializer
