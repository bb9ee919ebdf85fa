"""REST API for probing tasks: thin views over the service and reads the pages use."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from gym.accounts import signed_in
from suites import catalog_api
from suites.catalog import ListQuery
from suites.formats.probing import TASK_TYPES, guess_task_type
from suites.models import GymData, ProbingTask
from suites.probing.services import (
    TASK_SORTS,
    probing_task_import,
    probing_task_list,
    probing_task_overview,
)


class ProbingTaskSerializer(catalog_api.GymDataSerializer):
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

    def get_url(self, task: GymData) -> str:
        # The task's page (kept from before there was a detail endpoint).
        return task.get_absolute_url()


class ProbingTaskDetailSerializer(ProbingTaskSerializer):
    overview = serializers.SerializerMethodField()

    class Meta(ProbingTaskSerializer.Meta):
        fields = [*ProbingTaskSerializer.Meta.fields, "counts", "length_counts", "overview"]

    def get_overview(self, task: ProbingTask) -> dict:
        return probing_task_overview(task)


class ProbingTaskUploadSerializer(catalog_api.UploadAnswer, ProbingTaskDetailSerializer):
    """The answer to an upload: the task, and the name asked for when it was saved
    under another one (on_conflict=rename)."""

    class Meta(ProbingTaskDetailSerializer.Meta):
        fields = [*ProbingTaskDetailSerializer.Meta.fields, *catalog_api.UploadAnswer.FIELDS]


class ProbingTaskUploadFields(catalog_api.NamedUploadFields):
    task_type = serializers.ChoiceField(
        choices=list(TASK_TYPES),
        required=False,
        allow_blank=True,
        help_text="default: the SentEval task the file name stands for, else custom",
    )


@catalog_api.list_schema(
    noun="tasks",
    sorts=TASK_SORTS,
    more=[OpenApiParameter("type", str, enum=list(TASK_TYPES), description="Only this type")],
)
class ProbingTaskListCreate(catalog_api.CatalogListCreate):
    """List probing tasks (search, tag, type, ordering, pagination) or upload one."""

    serializer_class = ProbingTaskSerializer

    def listed(self, query: ListQuery) -> QuerySet[ProbingTask]:
        task_type = self.request.query_params.get("type", "").strip()
        return probing_task_list(q=query.q, tag=query.tag, task_type=task_type, sort=query.sort)

    @catalog_api.upload_schema(
        fields=ProbingTaskUploadFields,
        raw={"text/plain": OpenApiTypes.STR},
        responses={201: ProbingTaskUploadSerializer},
        description="Upload a SentEval-style probing file (partition TAB label TAB sentence "
        "per line). 400 lists every problem (`path` such as 'line 7, field 2'); nothing is "
        "saved unless the whole file is valid.",
    )
    def post(self, request: Request) -> Response:
        upload = catalog_api.upload_read(request, ProbingTaskUploadFields)
        name = upload.name_or_stem().strip()
        task_type = upload.fields.get("task_type") or (
            guess_task_type(upload.filename) if upload.filename else None
        )
        task = probing_task_import(
            source=upload.data,
            name=name,
            owner=signed_in(request.user),
            task_type=task_type,
            description=upload.fields.get("description", ""),
            tags=upload.tags or (),
            rename_if_taken=upload.rename_if_taken,
        )
        body = ProbingTaskDetailSerializer(task).data
        renamed_from = name if task.name != name else ""
        return Response(catalog_api.upload_answer(body, renamed_from=renamed_from), status=201)


class ProbingTaskDetail(catalog_api.CatalogDetail):
    model = ProbingTask
    noun = "probing task"
    serializer_class = ProbingTaskDetailSerializer
