from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

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
        limit = settings.GYM_MAX_UPLOAD_BYTES
        if length > limit + _SLACK_BYTES:
            message = (
                f"The upload is {length:,} bytes; the limit is {limit:,} bytes "
                f"({limit / 1024 / 1024:.0f} MB). Split the suite, or ask the site's "
                "administrators to raise GYM_MAX_UPLOAD_BYTES."
            )
            if request.path.startswith("/api/"):
                return JsonResponse({"errors": [{"path": "$", "message": message}]}, status=413)
            html = render_to_string("413.html", {"message": message}, request=request)
            return HttpResponse(html, status=413)
        return self.get_response(request)
