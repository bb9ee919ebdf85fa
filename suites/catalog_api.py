"""What the APIs of the kinds of data (suites, minimal-pair sets, probing tasks, corpora)
share: the owner, tags and url fields of their serializers, the list parameters,
the error answers of the kinds that answer them themselves, and the one upload convention
(its reading, its fields, its schema)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO, Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db.models import Model, QuerySet
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import generics, serializers, status
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.permissions import IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gym.errors import UploadTooLarge, error_body, invalid_entries
from suites.catalog import ListQuery
from suites.formats.report import SuiteError
from suites.models import GymData, Tag


class GymDataSerializer(serializers.ModelSerializer):
    """Owner (a username, null for the site's examples), tags (names) and url (the
    row's API address, absolute when there is a request: `api_url_name`), alike for
    every kind; each kind's serializer names its model and fields."""

    api_url_name = ""

    owner = serializers.CharField(
        source="owner.username", default=None, allow_null=True, read_only=True
    )
    tags: serializers.SlugRelatedField[Tag] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name"
    )
    url = serializers.SerializerMethodField()

    def get_url(self, obj: GymData) -> str:
        request = self.context.get("request")
        # reverse() percent-encodes the name (spaces, ?, #, %), so the URL works as given.
        path = reverse(self.api_url_name, args=[obj.name])
        return request.build_absolute_uri(path) if request else path


class UploadAnswer(serializers.Serializer):
    """The fields that the answer to an upload adds to the row's: the import's notes, and
    the name asked for when the row was saved under another one (on_conflict=rename).
    Each kind's upload serializer lists `FIELDS` after its row's."""

    FIELDS = ["warnings", "renamed_from"]

    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)
    renamed_from = serializers.CharField(allow_null=True, read_only=True)


def upload_answer(
    body: Mapping[str, Any], *, warnings: Sequence[str] = (), renamed_from: str = ""
) -> dict[str, Any]:
    """The answer to an upload (`UploadAnswer`): the row's fields, the import's notes, and
    the name asked for when the row was saved under another one (null otherwise)."""
    return {**body, "warnings": list(warnings), "renamed_from": renamed_from or None}


def list_parameters(*, noun: str, sorts: Iterable[str]) -> list[OpenApiParameter]:
    """The list endpoints' query parameters (suites.catalog.ListQuery.from_api reads them)."""
    return [
        OpenApiParameter("search", str, description="Text in the name or description"),
        OpenApiParameter("q", str, description="The same as search (the pages' name)"),
        OpenApiParameter("tag", str, description=f"Only {noun} with this tag"),
        OpenApiParameter("ordering", str, enum=list(sorts), description="Sort order"),
    ]


def list_schema(
    *, noun: str, sorts: Iterable[str], more: Sequence[OpenApiParameter] = ()
) -> Callable[[Any], Any]:
    """The schema of a `CatalogListCreate`'s list: the list parameters, then `more`."""
    parameters = [*list_parameters(noun=noun, sorts=sorts), *more]
    return extend_schema_view(get=extend_schema(parameters=parameters))


def errors_answer(errors: list[SuiteError], code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    """`errors` in the API's one error shape: every entry has a code."""
    return Response(error_body(*invalid_entries(errors)), status=code)


def not_found(noun: str, name: str) -> Response:
    """The 404 of a row's detail when no `noun` has that name."""
    return errors_answer(
        [SuiteError("name", f"no {noun} named '{name}'")], status.HTTP_404_NOT_FOUND
    )


class CatalogDetail(APIView):
    # A row's detail by name (anyone): `serializer_class`'s fields, or `not_found`'s 404
    # naming the `noun`. (A comment, not a docstring: the schema would describe every
    # kind's endpoint with it.)

    permission_classes = [IsAuthenticatedOrReadOnly]
    model: type[Model]
    noun: str
    serializer_class: type[serializers.Serializer]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Each kind's schema: its serializer, or the 404 of `not_found`.
        schema = extend_schema(responses={200: cls.serializer_class, 404: OpenApiTypes.OBJECT})
        extend_schema_view(get=schema)(cls)

    def get(self, request: Request, name: str) -> Response:
        row = self.model._default_manager.select_related("owner").filter(name=name).first()
        if row is None:
            return not_found(self.noun, name)
        return Response(self.serializer_class(row, context={"request": request}).data)


# -- uploads ------------------------------------------------------------------------
#
# Every kind's upload (POST, and PUT where a kind replaces) takes the same two forms:
#
#   multipart/form-data   the file as the field `file`, the other fields beside it
#   any other body        the file itself, the fields in the query string
#
# with the same error body, the same 413 and the same `on_conflict`.


class RawBodyParser(BaseParser):
    """The body untouched (a suite, TSV, JSONL or probing file), for the format layer to
    read: malformed input then gets the format's located errors."""

    media_type = "*/*"

    # request.data is whatever the parser returns, here bytes; the stubs allow only mappings.
    def parse(  # type: ignore[override]
        self,
        stream: IO[Any] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        # One byte past the limit is enough to refuse it: a body is never read whole.
        limit = settings.GYM_MAX_UPLOAD_BYTES
        data = stream.read(limit + 1) if stream is not None else b""
        if len(data) > limit:
            raise UploadTooLarge(len(data), limit)
        return data


# Multipart first: DRF takes the first parser whose media type matches.
UPLOAD_PARSERS = [MultiPartParser, RawBodyParser]


def file_body(media_type: str) -> dict[str, Any]:
    """The request body's schema of an upload whose other fields are query parameters
    (a predictions file's): the multipart field `file`, or the file itself as the body."""
    return {
        "multipart/form-data": {
            "type": "object",
            "properties": {"file": {"type": "string", "format": "binary"}},
            "required": ["file"],
        },
        media_type: OpenApiTypes.STR,
        "application/octet-stream": OpenApiTypes.BINARY,
    }


class CatalogListCreate(generics.ListAPIView):
    """A kind's list and upload: its rows as `listed` finds them for the query string's
    search, tag and sort, paged (anyone; the schema's parameters by `list_schema`), or
    the kind's `post` of a file (signed in, in the upload convention below)."""

    permission_classes = [IsAuthenticatedOrReadOnly]
    parser_classes = UPLOAD_PARSERS

    def get_queryset(self) -> QuerySet[Any]:
        return self.listed(ListQuery.from_api(self.request.query_params))

    def listed(self, query: ListQuery) -> QuerySet[Any]:
        raise NotImplementedError


ON_CONFLICT_HELP = (
    "When a row of the same name exists: fail (400, the default) or save this one under "
    "the next free name, '<name> (2)', '<name> (3)', … (`renamed_from` in the answer then "
    "keeps the name asked for)"
)


NO_FILE = (
    "send the file as the multipart field 'file' (or send the file itself as the body, "
    "with the fields in the query string)"
)


class UploadFields(serializers.Serializer):
    """The fields every kind's upload takes: in the multipart form beside `file`, or in
    the query string beside a raw body."""

    on_conflict = serializers.ChoiceField(
        choices=["error", "rename"], default="error", help_text=ON_CONFLICT_HELP
    )
    tags = serializers.CharField(required=False, allow_blank=True, help_text="Comma-separated tags")


class NamedUploadFields(UploadFields):
    """The fields of a kind whose files do not carry their own name (minimal-pair sets,
    probing tasks)."""

    name = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="The name (default: the file name without its extension)",
    )
    description = serializers.CharField(required=False, allow_blank=True)
    filename = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The file's name, for a raw body (a multipart `file` has its own): its "
        "extension picks the format, its stem is the default name",
    )


@dataclass(frozen=True)
class _Received:
    """What every upload brings beside the file: its name ('' for a raw body without
    `filename`) and the kind's fields, validated."""

    filename: str
    fields: dict[str, Any]

    @property
    def rename_if_taken(self) -> bool:
        return self.fields["on_conflict"] == "rename"

    @property
    def tags(self) -> list[str] | None:
        """The tags given, or None when the field is absent."""
        tags = self.fields.get("tags")
        return None if tags is None else tags.split(",")

    def name_or_stem(self) -> str:
        """`name`, else the file name without its extension."""
        return self.fields.get("name") or PurePosixPath(self.filename).stem


@dataclass(frozen=True)
class Upload(_Received):
    """An upload read whole: the file's bytes."""

    data: bytes


@dataclass(frozen=True)
class UploadStream(_Received):
    """An upload whose file is read as it comes (corpora, up to gigabytes): a multipart
    file (kept on disk by Django beyond a few megabytes) or the raw body itself."""

    stream: IO[bytes]


class _RequestBody(io.RawIOBase):
    """A request's body as a raw stream (readinto over its read), so that a buffered
    reader can look at its first bytes without taking them."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._body.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _multipart_file(
    request: Request, given: dict[str, Any], limit: int, setting: str
) -> UploadedFile | None:
    """A multipart body's `file`, held to `limit`, with its other fields added to `given`;
    None for any other body."""
    if not request.content_type.startswith("multipart/form-data"):
        return None
    # Before the form is parsed: a chunked form without a length reads as an empty one.
    _chunked_check(request)
    upload = request.FILES.get("file")
    given.update({k: request.data.get(k) for k in request.data if k not in request.FILES})
    if upload is None:
        raise serializers.ValidationError({"file": [NO_FILE]})
    if upload.size > limit:
        raise UploadTooLarge(upload.size, limit, setting)
    return upload


NO_LENGTH = (
    "the body came in chunks, without a Content-Length, and cannot be read here; send it "
    "with its length, as curl -F file=@FILE and curl --data-binary @FILE do"
)


def _declared_length(request: Request) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def _chunked_check(request: Request) -> None:
    """Refuse a body (raw or multipart) that came chunked without a Content-Length (400:
    the server's WSGI layer hands on an empty body, and the file would seem empty or
    missing)."""
    chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
    if chunked and not _declared_length(request):
        raise serializers.ValidationError({"file": [NO_LENGTH]})


def _length_check(request: Request, limit: int, setting: str) -> None:
    """Refuse a raw body whose Content-Length is over `limit` (413), or that came chunked
    without one (400, `_chunked_check`)."""
    _chunked_check(request)
    declared = _declared_length(request)
    if declared > limit:
        raise UploadTooLarge(declared, limit, setting)


def _checked(fields: type[UploadFields], given: dict[str, Any]) -> dict[str, Any]:
    checked = fields(data=given)
    checked.is_valid(raise_exception=True)
    return dict(checked.validated_data)


def upload_received(request: Request) -> tuple[bytes, str, dict[str, Any]]:
    """The file of an upload in either form (its bytes and its name, '' for a raw body)
    and the fields given beside it, not yet checked: for uploads whose fields are read
    by the view itself (a predictions file's). Raises a ValidationError (400) for a
    multipart body without `file`, UploadTooLarge (413) for a file above
    GYM_MAX_UPLOAD_BYTES."""
    limit = settings.GYM_MAX_UPLOAD_BYTES
    given: dict[str, Any] = {key: request.query_params.get(key) for key in request.query_params}
    upload = _multipart_file(request, given, limit, "GYM_MAX_UPLOAD_BYTES")
    if upload is not None:
        return upload.read(), upload.name or "", given
    _length_check(request, limit, "GYM_MAX_UPLOAD_BYTES")
    data = request.data if isinstance(request.data, bytes) else b""  # RawBodyParser's limit
    return data, "", given


def upload_read(request: Request, fields: type[UploadFields]) -> Upload:
    """The file and fields of an upload in either form. Raises a ValidationError (400)
    for a multipart body without `file` or an invalid field, UploadTooLarge (413) for a
    file above GYM_MAX_UPLOAD_BYTES."""
    data, filename, given = upload_received(request)
    values = _checked(fields, given)
    return Upload(data=data, filename=values.get("filename") or filename, fields=values)


def upload_stream(
    request: Request, fields: type[UploadFields], *, limit: int, setting: str
) -> UploadStream:
    """As `upload_read`, for a file too large to hold in memory: a raw body is not read
    here but handed on as a stream, refused at once when its declared length is over
    `limit` (the reader then holds the rest of the body to it); `setting` names the
    limit in the 413."""
    given: dict[str, Any] = {key: request.query_params.get(key) for key in request.query_params}
    upload = _multipart_file(request, given, limit, setting)
    stream: IO[bytes]
    if upload is not None:
        stream, filename = upload, upload.name or ""
    else:
        _length_check(request, limit, setting)
        body = request.stream
        stream = io.BufferedReader(_RequestBody(body)) if body is not None else io.BytesIO()
        filename = ""
    values = _checked(fields, given)
    return UploadStream(stream=stream, filename=values.get("filename") or filename, fields=values)


def upload_schema(
    *,
    fields: type[UploadFields],
    raw: dict[str, Any],
    responses: dict[int, Any],
    description: str,
) -> Callable[[Any], Any]:
    """The schema of an upload in its two forms: a multipart form of `fields` and `file`,
    or a raw body (`raw`: its media types, plus application/octet-stream) with `fields`
    in the query. The error answers (400, 401, 403, 413) come from the shared schema."""
    form = _upload_form(fields)
    return extend_schema(
        request={
            "multipart/form-data": form,
            **raw,
            "application/octet-stream": OpenApiTypes.BINARY,
        },
        parameters=[fields],
        responses=responses,
        description=description
        + "\n\nThe file goes either as the multipart field `file` with the other fields "
        "beside it, or as the raw body with the fields in the query string. A file "
        "larger than the upload limit gets a 413; errors have the API's error shape.",
    )


@extend_schema_field(OpenApiTypes.BINARY)
class _FileField(serializers.FileField):
    """A file field that the schema calls binary (the file's bytes, not a URL)."""


_FORMS: dict[type[UploadFields], type[serializers.Serializer]] = {}


def _upload_form(fields: type[UploadFields]) -> type[serializers.Serializer]:
    """`fields` plus `file`, as a multipart form (one class per kind: one schema name)."""
    if fields not in _FORMS:
        name = fields.__name__.removesuffix("Fields") + "Form"
        file = _FileField(help_text="The file")
        _FORMS[fields] = type(name, (fields,), {"file": file, "__module__": fields.__module__})
    return _FORMS[fields]
