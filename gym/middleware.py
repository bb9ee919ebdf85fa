from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from gym.errors import error_body, too_large_message

logger = logging.getLogger(__name__)

# Form fields and multipart boundaries around an uploaded file.
_SLACK_BYTES = 64 * 1024


class UploadLimitMiddleware:
    """Refuse request bodies above GYM_MAX_UPLOAD_BYTES with a clear 413 before Django
    reads them (Django's own limit would answer with a bare 400)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit, setting = settings.GYM_MAX_UPLOAD_BYTES, "GYM_MAX_UPLOAD_BYTES"
        if "/corpora/" in request.path:  # corpora have their own limit
            limit, setting = settings.GYM_MAX_CORPUS_BYTES, "GYM_MAX_CORPUS_BYTES"
        if length > limit + _SLACK_BYTES:
            message = too_large_message(length, limit, setting)
            if request.path.startswith("/api/"):
                return JsonResponse(
                    error_body({"code": "too_large", "message": message}), status=413
                )
            html = render_to_string("413.html", {"message": message}, request=request)
            return HttpResponse(html, status=413)
        return self.get_response(request)


class HostileInputMiddleware:
    """Answer a NUL character in the address or a query parameter with a 400 that names
    it. No page needs one; PostgreSQL refuses it in a query (a 500) and SQLite's LIKE
    treated it as the end of the pattern, so a search for it matched everything."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = ""
        if "\x00" in request.path:
            where = "the address"
        else:
            for key, values in request.GET.lists():
                if "\x00" in key or any("\x00" in v for v in values):
                    where = f"the query parameter {key.replace(chr(0), '')!r}"
                    break
        if not where:
            return self.get_response(request)
        message = f"{where[0].upper()}{where[1:]} contains a NUL character (%00); remove it."
        if request.path.startswith("/api/"):
            return JsonResponse(error_body({"code": "invalid", "message": message}), status=400)
        html = render_to_string("400.html", {"message": message}, request=request)
        return HttpResponse(html, status=400)


DATABASE_UNAVAILABLE = (
    "The database did not answer (it is restarting, or the connection was lost); "
    "ask again in a moment."
)


class DatabaseUnavailableMiddleware:
    """A request whose database connection is lost on the way (the server restarting, a
    connection ended by an administrator, SQLite's lock held too long) answers 503 with
    Retry-After, as a request answers while the task queue is down, instead of a 500:
    asking again is the remedy. Its transaction was rolled back with the connection."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        logger.warning("database unavailable for %s: %s", request.path, exception)
        if request.path.startswith("/api/"):
            body = error_body({"code": "database_unavailable", "message": DATABASE_UNAVAILABLE})
            response: HttpResponse = JsonResponse(body, status=503)
        else:
            # Rendered without a request context: reading the user needs the database.
            html = render_to_string("503.html", {"message": DATABASE_UNAVAILABLE})
            response = HttpResponse(html, status=503)
        response["Retry-After"] = "5"
        return response
