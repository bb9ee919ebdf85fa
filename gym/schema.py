"""The OpenAPI schema's operations: the one error body (gym.errors) on every operation.

Apart from gym.errors so that a process that never serves the schema (a worker, the
`score` command) does not import drf_spectacular.
"""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter
from rest_framework.pagination import BasePagination

from gym.errors import _ERROR_CODES, _WRITES, SIGNED_IN_PARAMETERS, ErrorSerializer


class ErrorAwareAutoSchema(AutoSchema):
    """Documents the one error body on every operation, for the codes it can answer, and
    pages only what DRF pages: a GET list (a list view's POST answers a plain list)."""

    def _get_paginator(self) -> BasePagination | None:
        return super()._get_paginator() if self.method == "GET" else None

    def _get_response_bodies(
        self, direction: Literal["request", "response"] = "response"
    ) -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        codes = ["400", "404", "429"]
        if self.method in _WRITES:
            codes += ["401", "403", "413"]
        elif any(
            isinstance(p, OpenApiParameter) and p.name in SIGNED_IN_PARAMETERS
            for p in self.get_override_parameters()
        ):
            codes += ["401"]
        codes += [c for c in ("503",) if c in responses]
        for code in codes:
            responses[code] = self._get_response_for_code(
                ErrorSerializer, code, direction=direction
            )
            responses[code]["description"] = _ERROR_CODES[code]
        return responses
