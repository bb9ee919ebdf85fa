"""The browsers' reports of what the Content Security Policy blocked (the policy's
report-uri, CONTENT_SECURITY_POLICY in gym/settings.py).

Each violation is logged at WARNING with the directive, what was blocked and the page, so
that a page the policy breaks, or a script someone slipped into one, shows in the site's
log. Browsers send reports without a session or a CSRF token, so anyone may send one:
the body is bounded (GYM_CSP_REPORT_MAX_BYTES), nothing is stored, and every value is
logged cut short and quoted."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from gym.errors import error_body

logger = logging.getLogger(__name__)

# The longest value of a field that is logged, and the most violations one report logs.
FIELD_CHARS = 300
MOST_VIOLATIONS = 20
# The names of each field logged: report-uri's, the Reporting API's (the first given wins).
FIELDS = {
    "directive": ("effective-directive", "effectiveDirective", "violated-directive"),
    "blocked": ("blocked-uri", "blockedURL"),
    "page": ("document-uri", "documentURL"),
    "source": ("source-file", "sourceFile"),
    "line": ("line-number", "lineNumber"),
}
SHAPES = (
    'a report-uri report, {"csp-report": {...}}, or a Reporting API list, '
    '[{"type": "csp-violation", "body": {...}}, ...]'
)


def violations(data: Any) -> list[dict[str, Any]] | None:
    """The violations a report holds, in either shape browsers send; None for neither."""
    if isinstance(data, dict) and isinstance(data.get("csp-report"), dict):
        return [data["csp-report"]]
    if isinstance(data, list) and all(isinstance(entry, dict) for entry in data):
        bodies = [e.get("body") for e in data if e.get("type") == "csp-violation"]
        if all(isinstance(body, dict) for body in bodies):
            return bodies
    return None


def _field(violation: dict[str, Any], names: tuple[str, ...]) -> str:
    value = next((violation[n] for n in names if violation.get(n) not in (None, "")), "")
    return str(value)[:FIELD_CHARS]


def _refusal(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse(error_body({"code": code, "message": message}), status=status)


@csrf_exempt
@require_POST
def csp_report(request: HttpRequest) -> HttpResponse:
    """Log each violation of a browser's report; 204, or a 4xx that says what was wrong."""
    limit = settings.GYM_CSP_REPORT_MAX_BYTES
    raw = request.read(limit + 1)
    if len(raw) > limit:
        message = (
            f"A violation report is at most {limit:,} bytes (GYM_CSP_REPORT_MAX_BYTES); "
            "this one is longer."
        )
        return _refusal(413, "too_large", message)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as error:
        return _refusal(400, "invalid", f"The report is not JSON ({error}); send {SHAPES}.")
    found = violations(data)
    if found is None:
        return _refusal(400, "invalid", f"The report has neither shape browsers send: {SHAPES}.")
    for violation in found[:MOST_VIOLATIONS]:
        values = {key: _field(violation, names) for key, names in FIELDS.items()}
        logger.warning(
            "Content Security Policy violation: %(directive)r blocked %(blocked)r "
            "on %(page)r (%(source)r line %(line)r)",
            values,
        )
    return HttpResponse(status=204)
