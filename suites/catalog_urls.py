"""The pages every kind of test data has, routed once: its list, its upload and a row's
page by name, in the order that keeps the upload page reachable. A kind's `urls.py` adds
them to its own routes."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpResponseBase
from django.urls import URLPattern, path

# A page view and its route's name.
Route = tuple[Callable[..., HttpResponseBase], str]


def catalog_page_urls(
    prefix: str, list_page: Route, upload: Route, detail: Route
) -> list[URLPattern]:
    """`prefix` (ending in "/"), `prefix`upload/ and `prefix`<name>/. upload/ comes before
    <name>/, which would otherwise swallow it (every kind reserves the name "upload")."""
    return [
        path(prefix, list_page[0], name=list_page[1]),
        path(f"{prefix}upload/", upload[0], name=upload[1]),
        path(f"{prefix}<str:name>/", detail[0], name=detail[1]),
    ]
