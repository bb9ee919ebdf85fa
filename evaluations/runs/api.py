"""REST API of the run core: the list of runs of every kind, the filters that every
kind's list of runs takes, the answer to a request for runs of any kind, and every
kind's retry and cancel."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, generics, serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.models import Run
from evaluations.runs import lifecycle as runs
from evaluations.runs import selectors as run_selectors

# The fields of a run's state in every kind's answers, in this order.
RUN_STATE_FIELDS = ["status", "enqueued", "attempt", "progress_done", "progress_total", "error"]

# The filters every list of runs takes (`GET /api/runs/` also `kind`).
RUN_FILTER_PARAMETERS = [
    OpenApiParameter("model", str, description="Only this model's runs (its short name)"),
    OpenApiParameter("status", str, enum=list(Run.Status.values)),
    OpenApiParameter(
        "mine",
        bool,
        description="Only the runs the signed-in user asked for (401 when not signed in)",
    ),
]


BAD_FILTER = (
    "a filter has a value it cannot take (an unknown status, model or kind); 401: `mine` "
    "without a signed-in user."
)


def run_filters_of(request: Request, queryset: Any, *, kind: str) -> Any:
    """One kind's runs narrowed by the query string's model, status and mine: 400 for a
    value that names nothing, 401 for `mine` without a signed-in user."""
    user = request.user
    staff = bool(user.is_staff)
    filters = run_selectors.run_filters(request.query_params, include_hidden=staff, kinds=[kind])
    if filters.mine and not user.is_authenticated:
        raise exceptions.NotAuthenticated("Sign in to list your own runs (mine).")
    return run_selectors.runs_filtered(queryset, filters, user=user, include_hidden=staff)


def request_schema(
    request: type[serializers.Serializer], answer: type[serializers.Serializer], description: str
) -> Callable[[Any], Any]:
    """The schema of a kind's request for runs (`requested_answer`): the runs asked for,
    201 when any is new, else 200; 503 when the task queue is unreachable."""
    return extend_schema(
        request=request,
        responses={201: answer(many=True), 200: answer(many=True), 503: None},
        description=description,
    )


class QueuedNow(serializers.Serializer):
    """`queued_now`, for a kind's run serializer in `requested_answer`: whether this
    request created the run (false: it was there already for the same content)."""

    queued_now = serializers.SerializerMethodField()

    def get_queued_now(self, run: Run) -> bool:
        return run.pk in self.context.get("created_ids", ())


def request_body(serializer: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """A run request's body as `serializer` validates it (400 naming each bad field)."""
    body = serializer(data=request.data)
    body.is_valid(raise_exception=True)
    return body.validated_data


def requested_answer(
    answer: type[serializers.Serializer], asked: Sequence[Any], created: Sequence[Any]
) -> Response:
    """Every run asked for, as `answer` shows them (a `QueuedNow` one says which this
    request queued): 201 when any is new, else 200."""
    context = {"created_ids": {run.pk for run in created}}
    body = answer(asked, many=True, context=context).data
    return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


def run_action_apis(
    name: str,
    run_of: Callable[[int], Any],
    answer: type[serializers.Serializer],
    *,
    retry_doc: str | None = None,
    cancel_doc: str | None = None,
) -> tuple[type[APIView], type[APIView]]:
    """One kind's retry and cancel in the API, `name`Retry and `name`Cancel, as
    `evaluations.runs.views.run_action_views` are its pages: a POST by a signed-in user,
    answered with the run as `answer` shows it. `run_of(pk)` is the run, or a 404.
    BrokerUnavailable (503), RunConflict (409) and PermissionDenied (403) become the
    API's error shape in its exception handler. The docs are the schema's descriptions;
    its 403 and 503 are every write's (gym.schema), the 409 these operations' own."""

    class Retry(APIView):
        permission_classes = [IsAuthenticated]

        @extend_schema(request=None, responses={200: answer, 409: None})
        def post(self, request: Request, pk: int) -> Response:
            return Response(answer(runs.run_retry(run=run_of(pk), user=request.user)).data)

    class Cancel(APIView):
        permission_classes = [IsAuthenticated]

        @extend_schema(request=None, responses={200: answer, 409: None})
        def post(self, request: Request, pk: int) -> Response:
            return Response(answer(runs.run_cancel(run=run_of(pk), user=request.user)).data)

    # The class name and docstring are the browsable API's title and text.
    for view, action, doc in ((Retry, "Retry", retry_doc), (Cancel, "Cancel", cancel_doc)):
        view.__name__ = view.__qualname__ = f"{name}{action}"
        view.__doc__ = inspect.cleandoc(doc) if doc else None
    return Retry, Cancel


class RunSerializer(serializers.Serializer):
    """A run of any kind, as the list of every kind shows it."""

    kind = serializers.CharField(source="kind.name", help_text="suite, pairs, probing, ...")
    id = serializers.IntegerField(source="run.pk")
    model = serializers.CharField(source="run.model.name")
    benchmark = serializers.CharField(
        source="benchmark.name", help_text="The suite, minimal-pair set or probing task"
    )
    benchmark_url = serializers.CharField(source="benchmark.get_absolute_url")
    status = serializers.ChoiceField(Run.Status.choices, source="run.status")
    enqueued = serializers.BooleanField(source="run.enqueued")
    outdated = serializers.BooleanField(source="run.outdated")
    progress_done = serializers.IntegerField(source="run.progress_done")
    progress_total = serializers.IntegerField(source="run.progress_total")
    requested_by = serializers.CharField(
        source="run.requested_by.username", default=None, allow_null=True
    )
    created_at = serializers.DateTimeField(source="run.created_at")
    started_at = serializers.DateTimeField(source="run.started_at", allow_null=True)
    finished_at = serializers.DateTimeField(source="run.finished_at", allow_null=True)
    url = serializers.CharField(source="run.get_absolute_url")


class RunList(generics.ListAPIView):
    """Runs of every kind (suite evaluations, minimal pairs, probing, ...), newest first:
    the Runs page's list. Each kind's own list has its kind's details."""

    serializer_class = RunSerializer

    def get_queryset(self) -> QuerySet[Any]:
        user = self.request.user
        staff = bool(user.is_staff)
        filters = run_selectors.run_filters(self.request.query_params, include_hidden=staff)
        if filters.mine and not user.is_authenticated:
            raise exceptions.NotAuthenticated("Sign in to list your own runs (mine).")
        return run_selectors.run_keys(filters, user=user, include_hidden=staff)

    @extend_schema(
        parameters=[
            OpenApiParameter("kind", str, enum=sorted(runs.KINDS) or None),
            *RUN_FILTER_PARAMETERS,
        ],
        description=f"Newest first, paged (`page`, 50 a page). 400: {BAD_FILTER}",
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        keys = self.paginate_queryset(self.get_queryset())
        rows = run_selectors.run_rows(keys or [])
        return self.get_paginated_response(RunSerializer(rows, many=True).data)
