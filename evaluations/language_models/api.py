"""REST API of the language models: list, register, read one."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.permissions import IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response

from evaluations.language_models import registry as model_registry
from evaluations.models import LanguageModel
from gym.accounts import signed_in


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
        # As on the page: the short name is made from the source, the display name too.
        extra_kwargs = {
            "name": {"required": False, "allow_blank": True},
            "display_name": {"required": False, "allow_blank": True},
        }


class ModelListCreate(generics.ListAPIView):
    serializer_class = LanguageModelSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]

    def get_queryset(self) -> QuerySet[LanguageModel]:
        return model_registry.visible_models(self.request.user).select_related("registered_by")

    @extend_schema(request=LanguageModelSerializer, responses={201: LanguageModelSerializer})
    def post(self, request: Request) -> Response:
        data = LanguageModelSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = {
            k: v
            for k, v in data.validated_data.items()
            if k in {"name", "display_name", "source", "revision", "description", "reference_url"}
        }
        model = model_registry.model_register(user=signed_in(request.user), **fields)
        return Response(LanguageModelSerializer(model).data, status=status.HTTP_201_CREATED)


class ModelDetail(generics.RetrieveAPIView):
    serializer_class = LanguageModelSerializer
    lookup_field = "name"

    def get_queryset(self) -> QuerySet[LanguageModel]:
        return model_registry.visible_models(self.request.user)
