"""What the APIs of the three kinds of test data (suites, minimal-pair sets, probing
tasks) share: the owner, tags and url fields of their serializers and the list
parameters."""

from __future__ import annotations

from collections.abc import Iterable

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from suites.models import GymData


class GymDataSerializer(serializers.ModelSerializer):
    """Owner (a username, null for the site's examples), tags (names) and url (the
    row's API address, absolute when there is a request: `api_url_name`), alike for
    every kind; each kind's serializer names its model and fields."""

    api_url_name = ""

    owner = serializers.CharField(source="owner.username", default=None, read_only=True)
    tags = serializers.SlugRelatedField(many=True, read_only=True, slug_field="name")
    url = serializers.SerializerMethodField()

    def get_url(self, obj: GymData) -> str:
        request = self.context.get("request")
        # reverse() percent-encodes the name (spaces, ?, #, %), so the URL works as given.
        path = reverse(self.api_url_name, args=[obj.name])
        return request.build_absolute_uri(path) if request else path


def list_parameters(*, noun: str, sorts: Iterable[str]) -> list[OpenApiParameter]:
    """The list endpoints' query parameters (suites.catalog.ListQuery.from_api reads them)."""
    return [
        OpenApiParameter("search", str, description="Text in the name or description"),
        OpenApiParameter("q", str, description="The same as search (the pages' name)"),
        OpenApiParameter("tag", str, description=f"Only {noun} with this tag"),
        OpenApiParameter("ordering", str, enum=list(sorts), description="Sort order"),
    ]
