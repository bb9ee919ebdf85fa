"""REST API of the language models: list, register, upload, read one."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from rest_framework import generics, serializers, status
from rest_framework.permissions import IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response

from evaluations.language_models import registry as model_registry
from evaluations.language_models import uploads
from evaluations.models import LanguageModel
from gym.accounts import signed_in
from gym.errors import UploadTooLarge
from suites.catalog_api import UploadFields, upload_schema, upload_stream

# The fields of a model that only the site sets (read-only in every answer), in order.
SET_BY_THE_SITE = [
    "is_baseline",
    "is_hidden",
    "status",
    "reason",
    "content_hash",
    "registered_by",
    "created_at",
]


class LanguageModelSerializer(serializers.ModelSerializer):
    registered_by = serializers.CharField(
        source="registered_by.username", default=None, allow_null=True, read_only=True
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
            *SET_BY_THE_SITE,
        ]
        read_only_fields = ["kind", "parameter_count", *SET_BY_THE_SITE]
        # As on the page: the short name is made from the source, the display name too.
        extra_kwargs = {
            "name": {"required": False, "allow_blank": True},
            "display_name": {"required": False, "allow_blank": True},
        }


class ModelUploadFields(UploadFields):
    """An uploaded model's fields: in the multipart form beside `file`, or in the query
    string beside a raw body."""

    # A model is named by its short name, which is unique: a taken one is refused.
    on_conflict = None  # type: ignore[assignment]
    tags = None  # type: ignore[assignment]
    name = serializers.SlugField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="Short id for URLs (default: made from display_name, else the file's name)",
    )
    display_name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    description = serializers.CharField(required=False, allow_blank=True)
    reference_url = serializers.URLField(required=False, allow_blank=True, max_length=500)
    hidden = serializers.BooleanField(
        default=False,
        help_text="Hide it: only you and staff see it, and it stays off the leaderboards",
    )
    filename = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=255,
        help_text="The file's name, for a raw body (a multipart `file` has its own): the "
        "default name is made from it",
    )


_REGISTER_TYPES = ("application/json", "application/x-www-form-urlencoded")


def _is_upload(request: Request) -> bool:
    """A model file: a multipart form with `file`, or a body that is neither JSON nor a
    form (a form's body too when the query names its `filename`: curl --data-binary
    sends any file as a form)."""
    media = request.content_type.split(";")[0].strip().lower()
    if media == "multipart/form-data":
        return "file" in request.FILES
    if media == "application/x-www-form-urlencoded":
        return "filename" in request.query_params
    return media not in (*_REGISTER_TYPES, "")


def _declared_length(request: Request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


class ModelListCreate(generics.ListAPIView):
    serializer_class = LanguageModelSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]

    def get_queryset(self) -> QuerySet[LanguageModel]:
        return model_registry.visible_models(self.request.user).select_related("registered_by")

    @upload_schema(
        fields=ModelUploadFields,
        raw={"application/json": LanguageModelSerializer},
        responses={201: LanguageModelSerializer, 202: LanguageModelSerializer},
        description="Register a model by its `source` (JSON: a hub id, or a folder or "
        "n-gram file under the model folders; 201), or upload one (202): a folder saved "
        "with save_pretrained packed as .tar, .tar.gz or .zip (weights as safetensors), "
        "or an ARPA n-gram file, plain or gzipped. An upload is checked at once (400 or "
        "413 naming the problem, and the archive member, and nothing kept), then by a "
        "worker, which loads it and scores one sentence: its `status` is `checking` until "
        "then, `ready` or `refused` (with the `reason`) after. Uploads have their own "
        "limits, GYM_MAX_MODEL_UPLOAD_BYTES and GYM_MAX_MODEL_*.",
    )
    def post(self, request: Request) -> Response:
        if _is_upload(request):
            return self._upload(request)
        # The route takes a model's size of body; a registration is held to the usual one.
        declared = _declared_length(request)
        if declared > settings.GYM_MAX_UPLOAD_BYTES:
            raise UploadTooLarge(declared, settings.GYM_MAX_UPLOAD_BYTES)
        data = LanguageModelSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = {
            k: v
            for k, v in data.validated_data.items()
            if k in {"name", "display_name", "source", "revision", "description", "reference_url"}
        }
        model = model_registry.model_register(user=signed_in(request.user), **fields)
        return Response(LanguageModelSerializer(model).data, status=status.HTTP_201_CREATED)

    def _upload(self, request: Request) -> Response:
        upload = upload_stream(
            request,
            ModelUploadFields,
            limit=settings.GYM_MAX_MODEL_UPLOAD_BYTES,
            setting="GYM_MAX_MODEL_UPLOAD_BYTES",
        )
        fields = upload.fields
        model = uploads.model_upload(
            stream=upload.stream,
            filename=upload.filename,
            user=signed_in(request.user),
            name=fields.get("name", ""),
            display_name=fields.get("display_name", ""),
            description=fields.get("description", ""),
            reference_url=fields.get("reference_url", ""),
            hidden=fields["hidden"],
        )
        return Response(LanguageModelSerializer(model).data, status=status.HTTP_202_ACCEPTED)


class ModelDetail(generics.RetrieveAPIView):
    serializer_class = LanguageModelSerializer
    lookup_field = "name"

    def get_queryset(self) -> QuerySet[LanguageModel]:
        return model_registry.visible_models(self.request.user)
