"""The OpenAPI schema's operations: the one error body (gym.errors) on every operation.

Apart from gym.errors so that a process that never serves the schema (a worker, the
`score` command) does not import drf_spectacular.
"""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.openapi import AutoSchema
from rest_framework.pagination import BasePagination

from gym.errors import _ERROR_CODES, _WRITES, ErrorSerializer


class ErrorAwareAutoSchema(AutoSchema):
    """Documents the one error body on every operation, for the codes it can answer, and
    pages only what DRF pages: a GET list (a list view's POST answers a plain list).

    404 only where a request can get one: an address with a path parameter (nothing of
    that name or id), a paged list (a page past the last), or an operation that says so
    in its own `responses`; an address without parameters always exists."""

    def _get_paginator(self) -> BasePagination | None:
        return super()._get_paginator() if self.method == "GET" else None

    def _pages(self) -> bool:
        return self._is_list_view() and self._get_paginator() is not None

    def _get_response_bodies(
        self, direction: Literal["request", "response"] = "response"
    ) -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        codes = ["400", "429"]
        if "{" in self.path or self._pages() or "404" in responses:
            codes += ["404"]
        # 401 everywhere: a write needs a user, and any request that sends a token that
        # belongs to nobody is refused, a read that needs no user included.
        codes += ["401"]
        if self.method in _WRITES:
            codes += ["403", "413"]
        # Only some operations can conflict: those that say so.
        codes += [c for c in ("409",) if c in responses]
        # 503 everywhere: any request can find the database down (gym.middleware's
        # DatabaseUnavailableMiddleware), and those that queue work the task queue too.
        codes += ["503"]
        for code in codes:
            responses[code] = self._get_response_for_code(
                ErrorSerializer, code, direction=direction
            )
            responses[code]["description"] = _ERROR_CODES[code]
        return responses
