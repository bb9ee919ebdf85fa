"""The routes every kind of run has, written once: its pages (list, request, detail,
retry, cancel) and its API (list and create, detail, retry, cancel). A kind's
`urls.py` adds them to its own routes."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpResponseBase
from django.urls import URLPattern, path
from rest_framework.views import APIView

PageView = Callable[..., HttpResponseBase]


def run_page_urls(
    prefix: str,
    name_prefix: str,
    *,
    list_view: PageView,
    request_view: PageView,
    detail_view: PageView,
    retry_view: PageView,
    cancel_view: PageView,
    list_name: str = "list",
    detail_name: str = "detail",
) -> list[URLPattern]:
    """`prefix` (ending in "/"), `prefix`new/, `prefix`<pk>/, `prefix`<pk>/retry/ and
    `prefix`<pk>/cancel/, named `name_prefix` + list_name, request, detail_name, retry
    and cancel."""
    return [
        path(prefix, list_view, name=f"{name_prefix}{list_name}"),
        path(f"{prefix}new/", request_view, name=f"{name_prefix}request"),
        path(f"{prefix}<int:pk>/", detail_view, name=f"{name_prefix}{detail_name}"),
        path(f"{prefix}<int:pk>/retry/", retry_view, name=f"{name_prefix}retry"),
        path(f"{prefix}<int:pk>/cancel/", cancel_view, name=f"{name_prefix}cancel"),
    ]


def run_api_urls(
    prefix: str,
    *,
    one: str,
    many: str,
    list_create: type[APIView],
    detail: type[APIView],
    retry: type[APIView],
    cancel: type[APIView],
) -> list[URLPattern]:
    """`prefix` (ending in "/"), `prefix`<pk>/, `prefix`<pk>/retry/ and
    `prefix`<pk>/cancel/, named api-`many`, api-`one`, api-`one`-retry and
    api-`one`-cancel."""
    return [
        path(prefix, list_create.as_view(), name=f"api-{many}"),
        path(f"{prefix}<int:pk>/", detail.as_view(), name=f"api-{one}"),
        path(f"{prefix}<int:pk>/retry/", retry.as_view(), name=f"api-{one}-retry"),
        path(f"{prefix}<int:pk>/cancel/", cancel.as_view(), name=f"api-{one}-cancel"),
    ]
