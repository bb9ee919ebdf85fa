from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve

from gym.artifacts import StoreUnavailable
from gym.errors import error_body, too_large_message

logger = logging.getLogger(__name__)

# Form fields and multipart boundaries around an uploaded file.
_SLACK_BYTES = 64 * 1024

# Routes (URL names) whose bodies are held to a limit of their own, by the setting that
# holds it; every other body is held to GYM_MAX_UPLOAD_BYTES. By name, never by a piece of
# the address: a suite named "corpora" is a suite.
BODY_LIMITS = {
    "api-corpora": "GYM_MAX_CORPUS_BYTES",
    "suites:corpus_upload": "GYM_MAX_CORPUS_BYTES",
    # Model uploads hold a server thread as long as a corpus's do: they share the slots.
    "api-models": "GYM_MAX_MODEL_UPLOAD_BYTES",
    "evaluations:register": "GYM_MAX_MODEL_UPLOAD_BYTES",
}
_BODY_METHODS = ("POST", "PUT", "PATCH")


def route_name(request: HttpRequest) -> str:
    """The URL name of the route the request's address resolves to ('' for none)."""
    try:
        return resolve(request.path_info).view_name
    except Resolver404:
        return ""


def body_limit(request: HttpRequest) -> tuple[int, str]:
    """The most bytes a request's body may hold, and the setting that says so. A page's
    upload of a larger kind is held to the common limit until its sender is signed in:
    the CSRF check reads a form's body before any view can send a stranger away."""
    setting = BODY_LIMITS.get(route_name(request), "GYM_MAX_UPLOAD_BYTES")
    if setting != "GYM_MAX_UPLOAD_BYTES" and not request.path.startswith("/api/"):
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            setting = "GYM_MAX_UPLOAD_BYTES"
    return int(getattr(settings, setting)), setting


def _refusal(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    """An error answer in the API's shape on /api/, else the site's page for `status`."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body({"code": code, "message": message}), status=status)
    html = render_to_string(f"{status}.html", {"message": message}, request=request)
    return HttpResponse(html, status=status)


class _Slots:
    """How many large uploads this process receives at once (GYM_LARGE_UPLOADS_PER_PROCESS):
    each holds a server thread while its body streams in, for minutes at gigabytes, and the
    threads not held keep serving pages."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.busy = 0

    def take(self) -> bool:
        with self._lock:
            if self.busy >= settings.GYM_LARGE_UPLOADS_PER_PROCESS:
                return False
            self.busy += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.busy -= 1


LARGE_UPLOADS = _Slots()


def uploads_busy_message(what: str) -> str:
    return (
        f"This server is receiving {settings.GYM_LARGE_UPLOADS_PER_PROCESS} large uploads "
        f"already ({what}; GYM_LARGE_UPLOADS_PER_PROCESS), and holds the rest of its threads "
        f"for pages. Send the file again in {settings.GYM_UPLOAD_RETRY_AFTER} seconds."
    )


class UploadLimitMiddleware:
    """Refuse a request body above its route's limit (BODY_LIMITS, else
    GYM_MAX_UPLOAD_BYTES) with a clear 413 before Django reads it (Django's own limit would
    answer with a bare 400), and hold the uploads of larger kinds to a few at a time per
    process (503 with Retry-After beyond them). After the authentication middleware, so
    that it knows who is sending."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit, setting = body_limit(request)
        if length > limit + _SLACK_BYTES:
            message = too_large_message(length, limit, setting)
            return _refusal(request, 413, "too_large", message)
        if setting == "GYM_MAX_UPLOAD_BYTES" or request.method not in _BODY_METHODS:
            return self.get_response(request)
        if not LARGE_UPLOADS.take():
            response = _refusal(request, 503, "busy", uploads_busy_message(setting))
            response["Retry-After"] = str(settings.GYM_UPLOAD_RETRY_AFTER)
            return response
        try:
            return self.get_response(request)
        finally:
            LARGE_UPLOADS.give_back()


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
    asking again is the remedy. Its transaction was rolled back with the connection.
    An artifact store out of reach (gym.artifacts.StoreUnavailable) answers the same way."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, StoreUnavailable):
            # The artifact store (gym.artifacts) is down: an upload that needed it kept
            # nothing, and is sent again once the store is back.
            code, message = "store_unavailable", f"{exception} Nothing was kept; send it again."
        elif isinstance(exception, OperationalError | InterfaceError):
            code, message = "database_unavailable", DATABASE_UNAVAILABLE
        else:
            return None
        logger.warning("%s for %s: %s", code, request.path, exception)
        if request.path.startswith("/api/"):
            body = error_body({"code": code, "message": message})
            response: HttpResponse = JsonResponse(body, status=503)
        else:
            # Rendered without a request context: reading the user needs the database.
            html = render_to_string("503.html", {"message": message})
            response = HttpResponse(html, status=503)
        response["Retry-After"] = "5"
        return response
