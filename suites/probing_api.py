"""REST API for probing tasks: thin views over the service and reads the pages use."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from suites.catalog import ListQuery
from suites.catalog_api import GymDataSerializer, list_parameters
from suites.formats.probing import TASK_TYPES, guess_task_type
from suites.formats.report import SuiteError
from suites.models import ProbingTask
from suites.probing import (
    TASK_SORTS,
    ProbingTaskInvalid,
    probing_task_import,
    probing_task_list,
    probing_task_overview,
)
from suites.services import tag_slugs


class ProbingTaskSerializer(GymDataSerializer):
    class Meta:
        model = ProbingTask
        fields = [
            "name",
            "url",
            "task_type",
            "description",
            "tags",
            "owner",
            "instance_count",
            "labels",
            "extra_columns",
            "content_hash",
            "created_at",
        ]

    def get_url(self, task: ProbingTask) -> str:
        # The task's page (kept from before there was a detail endpoint).
        return task.get_absolute_url()


class ProbingTaskDetailSerializer(ProbingTaskSerializer):
    overview = serializers.SerializerMethodField()

    class Meta(ProbingTaskSerializer.Meta):
        fields = [*ProbingTaskSerializer.Meta.fields, "counts", "length_counts", "overview"]

    def get_overview(self, task: ProbingTask) -> dict:
        return probing_task_overview(task)


def _errors(errors: list[SuiteError], code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    # The API's one error shape: every entry has a code.
    return Response({"errors": [{"code": "invalid", **e.as_dict()} for e in errors]}, status=code)


class ProbingTaskListCreate(generics.ListAPIView):
    """List probing tasks (search, tag, type, ordering, pagination) or upload one."""

    serializer_class = ProbingTaskSerializer
    permission_classes = [IsAuthenticatedOrReadOnly]
    parser_classes = [MultiPartParser, FormParser]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        query = ListQuery.from_api(self.request.query_params)
        task_type = self.request.query_params.get("type", "").strip()
        return probing_task_list(q=query.q, tag=query.tag, task_type=task_type, sort=query.sort)

    @extend_schema(
        parameters=[
            *list_parameters(noun="tasks", sorts=TASK_SORTS),
            OpenApiParameter("type", str, enum=list(TASK_TYPES), description="Only this type"),
        ]
    )
    def get(self, request: Request, *args, **kwargs) -> Response:  # type: ignore[no-untyped-def]
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "name": {"type": "string"},
                    "task_type": {"type": "string", "enum": list(TASK_TYPES)},
                    "description": {"type": "string"},
                    "tags": {"type": "string", "description": "comma-separated"},
                },
                "required": ["file"],
            }
        },
        responses={201: ProbingTaskDetailSerializer, 400: OpenApiTypes.OBJECT},
        description="Upload a SentEval-style probing file (partition TAB label TAB sentence "
        'per line). 400 gives {"errors": [{"path": "line 7, field 2", "message": ...}]}; '
        "nothing is saved unless the whole file is valid.",
    )
    def post(self, request: Request) -> Response:
        upload = request.FILES.get("file")
        if upload is None:
            return _errors([SuiteError("file", "send the probing file as the 'file' field")])
        if upload.size > settings.GYM_MAX_UPLOAD_BYTES:
            return _errors(
                [
                    SuiteError(
                        "file",
                        f"the file is {upload.size:,} bytes; the limit is "
                        f"{settings.GYM_MAX_UPLOAD_BYTES:,} bytes",
                    )
                ],
                status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        data = request.data
        name = str(data.get("name", "")).strip() or upload.name.rsplit(".", 1)[0]
        task_type = str(data.get("task_type", "")).strip() or guess_task_type(upload.name)
        try:
            task = probing_task_import(
                source=upload,
                name=name,
                owner=request.user,
                task_type=task_type,
                description=str(data.get("description", "")),
                tags=tag_slugs(str(data.get("tags", "")).split(",")),
            )
        except ProbingTaskInvalid as invalid:
            return _errors(invalid.errors)
        return Response(ProbingTaskDetailSerializer(task).data, status=status.HTTP_201_CREATED)


class ProbingTaskDetail(APIView):
    permission_classes = [IsAuthenticatedOrReadOnly]

    @extend_schema(responses={200: ProbingTaskDetailSerializer, 404: OpenApiTypes.OBJECT})
    def get(self, request: Request, name: str) -> Response:
        task = ProbingTask.objects.select_related("owner").filter(name=name).first()
        if task is None:
            return _errors(
                [SuiteError("name", f"no probing task named '{name}'")], status.HTTP_404_NOT_FOUND
            )
        return Response(ProbingTaskDetailSerializer(task).data)
