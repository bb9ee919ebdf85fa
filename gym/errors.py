"""One shape for every API error, made in one place.

Every error the API answers with, whatever raised it (a service, a serializer, DRF's own
checks, a throttle), has the body

    {"errors": [{"code": "...", "message": "...", "path": "$.field"?, "location": {}?}, ...]}

`code` is a stable machine-readable word, `message` a sentence for people, `path` (when
the error is about one part of the request) the JSON path of that part, and `location`
(suite errors) the same place as numbers. Services raise an
`ApplicationError` (or Django's `PermissionDenied`, which becomes a 403) and views let it
through: `api_exception_handler` turns it into this body.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

# The errors raised across the code are defined where no web framework is imported
# (`manage.py score` raises them without DRF) and named here too, as they always were.
from gym.application_errors import ApplicationError as ApplicationError
from gym.application_errors import FieldErrors as FieldErrors
from gym.application_errors import UploadTooLarge as UploadTooLarge
from gym.application_errors import too_large_message as too_large_message


def api_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The site's 404 (handler404): for an /api/ address that no route matches (a
    path parameter of the wrong type, say), the API's error body instead of a page."""
    if request.path.startswith("/api/"):
        body = error_body({"code": "not_found", "message": "There is nothing at this address."})
        return JsonResponse(body, status=404)
    return page_not_found(request, exception)


def error_body(*entries: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {"errors": list(entries)}


def invalid_entries(problems: Iterable[Any]) -> list[dict[str, Any]]:
    """Problems with what was sent (each with `as_dict()`: where and what) as the error
    body's entries, code "invalid"."""
    return [{"code": "invalid", **problem.as_dict()} for problem in problems]


def _flatten(detail: Any, path: str, fallback_code: str) -> list[dict[str, Any]]:
    """DRF's nested error details ({field: [msg]}, lists, ErrorDetail) as flat entries,
    each with the JSON path of the field it is about."""
    if isinstance(detail, dict):
        entries: list[dict[str, Any]] = []
        for key, value in detail.items():
            if key in ("non_field_errors", "detail"):
                entries += _flatten(value, path, fallback_code)
            else:
                entries += _flatten(value, f"{path}.{key}", fallback_code)
        return entries
    if isinstance(detail, list):
        entries = []
        for index, value in enumerate(detail):
            # A list of messages about one field keeps the field's path; a list of
            # nested objects (e.g. list items) gets indices.
            sub = path if not isinstance(value, dict | list) else f"{path}[{index}]"
            entries += _flatten(value, sub, fallback_code)
        return entries
    code = getattr(detail, "code", None) or fallback_code
    entry: dict[str, Any] = {"code": str(code), "message": str(detail)}
    if path != "$":
        entry["path"] = path
    return [entry]


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response(error_body(*exc.error_list()), status=exc.status_code)
    if isinstance(exc, DjangoPermissionDenied) and not exc.args:
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc))
    elif isinstance(exc, Http404):
        message = str(exc.args[0]) if exc.args and isinstance(exc.args[0], str) else ""
        exc = exceptions.NotFound(message or "There is nothing at this address.")
    # DRF's handler sets the status and headers (Retry-After, WWW-Authenticate).
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    fallback = getattr(exc, "default_code", "error")
    response.data = error_body(*_flatten(getattr(exc, "detail", str(exc)), "$", fallback))
    # Throttled sets `wait` in __init__; the stubs leave the attribute out.
    wait = exc.wait if isinstance(exc, exceptions.Throttled) else None  # type: ignore[attr-defined]
    if wait is not None:
        response.data["errors"][0]["retry_after_seconds"] = int(wait + 0.999)
    return response


# -- the schema -----------------------------------------------------------------------


class ErrorEntrySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="A stable word: invalid, not_found, throttled, ...")
    message = serializers.CharField(help_text="What is wrong and how to fix it")
    path = serializers.CharField(
        required=False, help_text="JSON path of the part of the request the error is about"
    )
    location = serializers.DictField(
        required=False,
        help_text="For suite errors, the same place as numbers: section, item, condition, "
        "region, region_number, prediction, key (line and column for CSV)",
    )


class ErrorSerializer(serializers.Serializer):
    # A declared field: the serializer's metaclass takes it out of the class, so it does
    # not hide Serializer.errors as the stubs think.
    errors = ErrorEntrySerializer(many=True)  # type: ignore[assignment]


_ERROR_CODES = {
    "400": "The request is invalid; nothing was changed.",
    "401": "Authentication is needed (session or `Authorization: Token <key>`), or the "
    "token sent belongs to nobody (refused on every operation, those that need no user too).",
    "403": "Not allowed for this user.",
    "404": "Nothing at this address.",
    "409": "The request conflicts with the current state (a run already finished, "
    "results already there); nothing was changed.",
    "413": "The body is larger than the upload limit.",
    "429": "Too many requests; `Retry-After` says when to try again.",
    "503": "The database is unreachable, or (an operation that queues work) the task queue "
    "is; nothing was lost, ask again in a moment (`Retry-After`).",
}
_WRITES = {"POST", "PUT", "PATCH", "DELETE"}
