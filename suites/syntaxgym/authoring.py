"""The grid editor: pages to author and edit a suite in the browser, "copy to my suites",
and the two validation endpoints the editor calls while the user types.

The editor saves through the suites API (`POST /api/suites/`, `PUT /api/suites/<name>/`),
that is through `services.suite_import` / `services.suite_replace`: one code path checks
and writes suites whether they come from a file, the API or the grid. The validation
endpoints below run the same format layer and the same name check, without writing.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gym.accounts import signed_in
from gym.errors import error_body
from gym.rest import AnonThrottle, AnonValidateThrottle, UserThrottle
from suites import catalog_services, formats
from suites.catalog import gym_data_or_404
from suites.formats import SuiteError, predictions
from suites.formats.limits import json_census
from suites.formats.schema import METRICS, REGION_METRICS
from suites.models import Suite
from suites.syntaxgym import selectors, services
from suites.syntaxgym.api import RawJSONParser


def _suite_or_404(name: str) -> Suite:
    return gym_data_or_404(Suite, name, noun="suite")


def _blank_suite() -> dict[str, Any]:
    """What a new suite starts as: no regions, conditions or items yet (the page says
    how to add them), so that nothing has to be deleted before real work starts."""
    return {
        "meta": {"name": "", "metric": "sum"},
        "region_meta": {},
        "predictions": [],
        "items": [],
    }


def _editor_config(request: HttpRequest, *, mode: str, suite: Suite | None) -> dict[str, Any]:
    """URLs and flags the editor's script needs; rendered with json_script, never inlined."""
    return {
        "mode": mode,
        "name": suite.name if suite else "",
        "validateSuiteUrl": reverse("api-validate-suite"),
        "validateFormulaUrl": reverse("api-validate-formula"),
        "createUrl": reverse("api-suites"),
        # The editor swaps the placeholder for the (possibly renamed) suite's name.
        "suiteApiUrl": reverse("api-suite", args=["__name__"]),
        "exportUrl": reverse("api-suite-export", args=["__name__"]),
        "gridUrl": reverse("suites:grid", args=["__name__"]),
        "detailUrl": reverse("suites:detail", args=["__name__"]),
        "metrics": list(METRICS),
    }


@login_required
@require_GET
def editor_new(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "suites/syntaxgym/editor.html",
        {
            "mode": "new",
            "suite": None,
            "suite_data": _blank_suite(),
            "config": _editor_config(request, mode="new", suite=None),
        },
    )


@login_required
@require_GET
def editor_edit(request: HttpRequest, name: str) -> HttpResponse:
    """The owner (or staff) edits here; anyone else logged in sees the suite read-only,
    with a button to copy it."""
    suite = _suite_or_404(name)
    mode = "edit" if catalog_services.can_change(request.user, suite) else "view"
    return render(
        request,
        "suites/syntaxgym/editor.html",
        {
            "mode": mode,
            "suite": suite,
            # Embedded rather than fetched: the same dict /api/suites/<name>/export/ serves,
            # without a second request before the grid can draw.
            "suite_data": selectors.suite_canonical(suite),
            "config": _editor_config(request, mode=mode, suite=suite),
        },
    )


@login_required
@require_POST
def suite_copy(request: HttpRequest, name: str) -> HttpResponse:
    """Copy any suite into the user's own suites and open the copy in the grid."""
    original = _suite_or_404(name)
    try:
        report = services.suite_copy(suite=original, owner=signed_in(request.user))
    except services.SuiteInvalid as invalid:
        for error in invalid.errors[:5]:
            messages.error(request, f"Could not copy: {error.path}: {error.message}")
        return redirect(original)
    except services.NoFreeName as exhausted:
        messages.error(request, str(exhausted))
        return redirect(original)
    messages.success(
        request,
        f"Copied “{original.name}” to your suites as “{report.suite.name}”. "
        "You can edit the copy here.",
    )
    return redirect("suites:grid", name=report.suite.name)


# -- validation endpoints ---------------------------------------------------------------


def _bad_request(message: str) -> Response:
    return Response(error_body({"code": "invalid", "message": message}), status=400)


def _raw_body(request: Request) -> bytes:
    """The body as RawJSONParser hands it over; DRF gives an empty dict for no body."""
    data = request.data
    return data if isinstance(data, bytes) else b""


def _json_body(request: Request) -> object:
    """The request's body as JSON, or None when it is not JSON or holds more JSON values
    than an upload may (the caller says what to send)."""
    try:
        body = _raw_body(request) or b"null"
        text = body.decode(json.detect_encoding(body), "surrogatepass")
        json_census(text, catalog_services.upload_limits())
        return json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _name_errors(
    result: formats.FormatResult, raw: object, replace: Suite | None
) -> list[SuiteError]:
    """The importer's name check (free name, no slashes, …), also when the rest of the
    suite still has errors, so that the editor can show a clash as soon as it is typed."""
    if any(e.location == services.NAME_LOCATION for e in result.errors):
        return []
    if result.suite is not None:
        name = result.suite["meta"]["name"]
    elif isinstance(raw, dict) and isinstance(raw.get("meta"), dict):
        name = raw["meta"].get("name")
    else:
        return []
    if not isinstance(name, str):
        return []
    # The check suite_import applies, so that the editor shows the message a save would give.
    return services.suite_name_check(name=name, replace=replace)


class ValidateSuite(APIView):
    """Check a suite as the importer would, without saving it."""

    permission_classes = [AllowAny]
    throttle_classes = [AnonValidateThrottle, AnonThrottle, UserThrottle]
    parser_classes = [RawJSONParser]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "as",
                str,
                enum=["json", "csv"],
                description="json (default): the body is a suite in any SyntaxGym JSON format. "
                'csv: the body is {"csv": "<CSV text>", "meta": {...}, "predictions": [...]}.',
            ),
            OpenApiParameter(
                "replace",
                str,
                description="Name of the suite being edited: a suite may keep its own name.",
            ),
            OpenApiParameter("to", str, enum=["csv"], description="Also render the suite as CSV"),
        ],
        request={"application/json": OpenApiTypes.OBJECT},
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT},
        description='Returns {"ok", "errors": [{"path", "message", "location"}], "warnings", '
        '"source_format", "suite": <canonical suite or null>, "csv"?}. Nothing is saved.',
    )
    def post(self, request: Request) -> Response:
        params = request.query_params
        replace = None
        if params.get("replace"):
            replace = Suite.objects.filter(name=params["replace"]).first()
        raw: object = None
        if params.get("as", "json") == "csv":
            sent = _json_body(request)
            if not isinstance(sent, dict) or not isinstance(sent.get("csv"), str):
                return _bad_request('send {"csv": "<the CSV text>", "meta": {"name": ...}}')
            meta = sent.get("meta")
            meta = meta if isinstance(meta, dict) else {}
            preds = sent.get("predictions") if isinstance(sent.get("predictions"), list) else None
            result = formats.parse_suite_csv(
                sent["csv"], meta=meta, predictions=preds, limits=catalog_services.upload_limits()
            )
        else:
            result = formats.parse_suite_text(_raw_body(request), catalog_services.upload_limits())
            # The name of a suite with errors, from the body read again (which, as the
            # reader did, refuses a body with more values than an upload may hold).
            raw = _json_body(request) if result.suite is None else None
        errors = [*result.errors, *_name_errors(result, raw, replace)]
        body: dict[str, Any] = {
            "ok": not errors,
            "errors": [e.as_dict() for e in errors],
            "warnings": list(result.warnings),
            "source_format": result.source_format,
            "suite": result.suite,
        }
        if params.get("to") == "csv" and result.suite is not None:
            body["csv"] = formats.to_csv_text(result.suite)
        return Response(body)


class ValidateFormula(APIView):
    """Parse one prediction formula with the importer's parser and check its references
    against the regions and conditions the editor has right now."""

    permission_classes = [AllowAny]
    parser_classes = [RawJSONParser]

    @extend_schema(
        request={"application/json": OpenApiTypes.OBJECT},
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT},
        description='Body {"formula": str, "regions": [int], "conditions": [str]}. Returns '
        '{"ok", "canonical": str|null, "errors": [{"col": int|null, "message": str}]}; '
        "col is 1-based, counted in characters.",
    )
    def post(self, request: Request) -> Response:
        body = _json_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("formula"), str):
            return _bad_request('send {"formula": "...", "regions": [1, 2], "conditions": [...]}')
        regions = body.get("regions", [])
        conditions = body.get("conditions", [])
        if not isinstance(regions, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in regions
        ):
            return _bad_request('"regions" must be a list of region numbers')
        if not isinstance(conditions, list) or not all(isinstance(c, str) for c in conditions):
            return _bad_request('"conditions" must be a list of condition names')

        formula = body["formula"]
        try:
            node = predictions.parse(formula)
        except predictions.PredictionError as exc:
            return Response(
                {
                    "ok": False,
                    "canonical": None,
                    "errors": [{"col": exc.col, "message": exc.message}],
                }
            )
        errors = _reference_errors(
            node, region_numbers=set(regions), condition_names=set(conditions)
        )
        return Response(
            {"ok": not errors, "canonical": predictions.canonical(formula), "errors": errors}
        )


def _reference_errors(
    node: predictions.Node, *, region_numbers: set[int], condition_names: set[str]
) -> list[dict[str, Any]]:
    """The importer's messages for unknown regions and conditions, each with the column
    (1-based) of the first reference it is about, so that the editor can point at it."""
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for ref in predictions.references(node):
        # One reference at a time, through the importer's own check, for its wording.
        for message in predictions.check_references(
            ref, region_numbers=region_numbers, condition_names=condition_names
        ):
            if message in seen:
                continue
            seen.add(message)
            col = ref.region_col if message.startswith("region") else ref.condition_col
            errors.append({"col": col, "message": message})
    return errors


# The suite the examples on the prediction language page refer to (the page shows it):
# subject-verb agreement, with and without an attractor noun between subject and verb.
DOC_REGIONS = {1: "Subject", 2: "Attractor", 3: "Verb", 4: "End"}
DOC_CONDITIONS = ("match", "mismatch", "match_attractor", "mismatch_attractor")
# Mistakes people make, shown with what the importer answers to them right now.
DOC_MISTAKES = (
    "(3;%mismatch%) >= (3;%match%)",
    "(3;%mismatch%) == (3;%match%)",
    "(3;%mismatch%) > (3;%match%) > (3;%match_attractor%)",
    "(3;%mismatch%) - (3;%match%)",
    "((3;%mismatch%) > (3;%match%)) and ((4;%mismatch%) > (4;%match%))",
    "(3;mismatch) > (3;%match%)",
    "(3;%mismatch%) > (3,%match%)",
    "(3;%mismatch%) > (3;%mach%)",
    "(5;%mismatch%) > (5;%match%)",
    "(0;%mismatch%) > (0;%match%)",
    "(3;%mismatch%) \u2212 (3;%match%) > 0",
    "((3;%mismatch%) > (3;%match%)",
)


def formula_problem(formula: str) -> tuple[int | None, str] | None:
    """The column and message the importer gives for `formula` in the documentation's
    suite, or None when it accepts it."""
    try:
        node = predictions.parse(formula)
    except predictions.PredictionError as exc:
        return exc.col, exc.message
    errors = _reference_errors(
        node, region_numbers=set(DOC_REGIONS), condition_names=set(DOC_CONDITIONS)
    )
    return (errors[0]["col"], errors[0]["message"]) if errors else None


@require_GET
def prediction_docs(request: HttpRequest) -> HttpResponse:
    """The prediction language, with examples; the common mistakes carry the parser's
    own messages, computed here, so that the page says what the importer says."""
    mistakes = [
        {"formula": formula, "col": problem[0], "message": problem[1]}
        for formula in DOC_MISTAKES
        if (problem := formula_problem(formula))
    ]
    context = {
        "regions": sorted(DOC_REGIONS.items()),
        "conditions": DOC_CONDITIONS,
        "mistakes": mistakes,
        "metrics": REGION_METRICS,
        "abs_tol": predictions.APPROX_ABS_TOL,
        "rel_tol": predictions.APPROX_REL_TOL,
        "max_length": predictions.MAX_LENGTH,
        "max_nesting": predictions.MAX_NESTING,
        "relation_formula": predictions.relation_to_formula("greaterthan", 3, "mismatch", "match"),
    }
    return render(request, "suites/syntaxgym/prediction_docs.html", context)
