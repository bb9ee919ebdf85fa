"""File downloads: one place that says how a response becomes a file to save."""

from __future__ import annotations

from collections.abc import Iterable

from django.http import HttpResponse, StreamingHttpResponse


def attachment(body: str | bytes, content_type: str, filename: str) -> HttpResponse:
    """`body` as a file the browser saves under `filename`."""
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def streamed_attachment(
    chunks: Iterable[str], content_type: str, filename: str
) -> StreamingHttpResponse:
    """As `attachment`, sent as `chunks` come (a large export never held whole)."""
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
