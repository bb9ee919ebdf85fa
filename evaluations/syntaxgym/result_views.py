"""Pages, downloads and API views that read stored suite results: comparisons, the
result page of one evaluation, its items and exports (the leaderboard and the model pages
are in `evaluations.boards`). Thin: each parses the request, calls a
selector and renders."""

from __future__ import annotations

import json
from typing import Any

from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
)
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, render
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.boards import leaderboard as boards
from evaluations.compared_models import parse_model_names
from evaluations.comparison_api import (
    compared_data,
    compared_fields,
    left_out_data,
    left_out_schema,
    models_parameter,
    paired_test_schema,
)
from evaluations.models import Evaluation, LanguageModel
from evaluations.statistics import paired_test_data
from evaluations.syntaxgym import comparisons, exports, items, missing, selectors
from gym.downloads import attachment, streamed_attachment
from suites.catalog import gym_data_or_404
from suites.models import Suite, Tag


def compare_page(request: HttpRequest, name: str) -> HttpResponse:
    """Models side by side on one suite: `?models=a,b[,c]` (a form's repeated `models`
    is folded into that one parameter first, so that page links keep every model)."""
    suite = gym_data_or_404(Suite, name, noun="suite")
    asked = request.GET.getlist("models")
    names = parse_model_names(asked)
    if len(asked) > 1:
        query = request.GET.copy()
        query.setlist("models", [",".join(names)])
        query.pop("page", None)
        return HttpResponseRedirect(f"{request.path}?{query.urlencode(safe=',')}")
    comparison = comparisons.compare(suite, names, page=request.GET.get("page"))
    choices = comparisons.current_results(suite, include_hidden=bool(request.user.is_staff))
    return render(
        request,
        "evaluations/syntaxgym/compare.html",
        {"comparison": comparison, "suite": suite, "choices": choices, "asked": names},
    )


def _done_evaluation(pk: int, *, snapshot: bool = True) -> Evaluation:
    """Only done evaluations have results: anything else is not found here. With
    `snapshot` the suite as evaluated is read in the same query; without, it is left
    unread (megabytes for a large suite) until something asks for it."""
    evaluations = Evaluation.objects.select_related("model", "suite")
    if snapshot:
        evaluations = evaluations.select_related("snapshot_row")
    evaluation = get_object_or_404(evaluations, pk=pk)
    if evaluation.status != Evaluation.Status.DONE:
        raise Http404("This evaluation has no results yet.")
    return evaluation


def result_page_view(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = _done_evaluation(pk)
    page = selectors.result_page(evaluation)
    show = request.GET.get("items", "")
    shown = page.items
    if show == "passed":
        shown = [i for i in shown if i.passed]
    elif show == "failed":
        shown = [i for i in shown if i.passed is False]
    else:
        show = ""
    return render(
        request,
        "evaluations/syntaxgym/result.html",
        {
            "evaluation": evaluation,
            "page": page,
            "items": shown,
            "show": show,
            "compare_with": _compare_with(request, evaluation, outdated=page.outdated),
        },
    )


def _item(pk: int, item_number: int) -> items.ItemPage:
    """One item of a done evaluation; a number it has no item for is not found."""
    evaluation = _done_evaluation(pk, snapshot=False)
    row = items.item_result(evaluation, item_number)
    if row is None:
        raise Http404(f"This evaluation has no item {item_number}.")
    return items.item_page(evaluation, row)


def item_page_view(request: HttpRequest, pk: int, item_number: int) -> HttpResponse:
    page = _item(pk, item_number)
    return render(
        request, "evaluations/syntaxgym/item.html", {"evaluation": page.evaluation, "page": page}
    )


def _compare_with(
    request: HttpRequest, evaluation: Evaluation, *, outdated: bool
) -> list[tuple[LanguageModel, int]]:
    """The other models a current result can be compared with on its suite."""
    if outdated:
        return []
    return [
        (model, pk)
        for model, pk in comparisons.current_results(
            evaluation.suite, include_hidden=bool(request.user.is_staff)
        )
        if model.pk != evaluation.model_id
    ]


def _results_filename(evaluation: Evaluation, extension: str) -> str:
    return f"{slugify(evaluation.suite.name) or 'suite'}__{evaluation.model.name}.{extension}"


def results_json_view(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = _done_evaluation(pk)
    text = json.dumps(exports.results_document(evaluation), indent=2, ensure_ascii=False)
    return attachment(
        text + "\n",
        "application/json; charset=utf-8",
        _results_filename(evaluation, "RESULTS.json"),
    )


def results_csv_view(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = _done_evaluation(pk)
    return attachment(
        exports.results_csv(evaluation),
        "text/csv; charset=utf-8",
        _results_filename(evaluation, "results.csv"),
    )


EXPORT_FORMATS = ("csv", "parquet")


def _export(request: HttpRequest | Request, fmt: str) -> HttpResponseBase:
    """The long-format export of the selection the query string names: `model`, `suite`
    and `tag` ("untagged" too) narrow it, together if several are given; none is the
    whole leaderboard. Unknown names are a 404 that says which one."""
    model_name = request.GET.get("model", "").strip()
    suite_name = request.GET.get("suite", "").strip()
    tag = request.GET.get("tag", "").strip()
    if any("\x00" in p for p in (model_name, suite_name, tag)):
        # PostgreSQL refuses NUL in a query; no name holds one, so nothing matches.
        raise Http404("Names contain no NUL character.")
    model = suite = None
    if model_name:
        model = LanguageModel.objects.filter(name=model_name).first()
        if model is None:
            raise Http404(f"No model named {model_name!r}.")
    if suite_name:
        suite = Suite.objects.filter(name=suite_name).first()
        if suite is None:
            raise Http404(f"No suite named {suite_name!r}.")
    if tag and tag != boards.UNTAGGED and not Tag.objects.filter(name=tag).exists():
        raise Http404(f"No tag named {tag!r}.")
    selection = selectors.export_selection(
        model=model, suite=suite, tag=tag, include_hidden=bool(request.user.is_staff)
    )
    parts = [p for p in (model_name, suite_name, tag) if p]
    stem = "results-" + "-".join(slugify(p) or "x" for p in parts) if parts else "results-all"
    if fmt == "parquet":
        return attachment(
            exports.long_parquet(selection), "application/vnd.apache.parquet", f"{stem}.{fmt}"
        )
    return streamed_attachment(
        exports.long_csv(selection), "text/csv; charset=utf-8", f"{stem}.{fmt}"
    )


def export_view(request: HttpRequest, fmt: str) -> HttpResponseBase:
    if fmt not in EXPORT_FORMATS:
        raise Http404("Exports are .csv or .parquet.")
    return _export(request, fmt)


class ResultsExportAPI(APIView):
    """Long-format results of a selection (one row per item, condition, region and metric,
    kind "region"; one per item and prediction with its outcome, kind "prediction") as CSV
    or Parquet. Current content only, as on the leaderboard."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            OpenApiParameter("model", str, description="One model's short name"),
            OpenApiParameter("suite", str, description="One suite's name"),
            OpenApiParameter("tag", str, description="The suites of one tag ('untagged' too)"),
            OpenApiParameter("as", str, enum=list(EXPORT_FORMATS), description="Default csv"),
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.BINARY,
            (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
            404: None,  # an unknown model, suite or tag
        },
    )
    def get(self, request: Request) -> HttpResponseBase:
        fmt = request.GET.get("as", "csv").strip() or "csv"
        if fmt not in EXPORT_FORMATS:
            raise ValidationError(
                {"as": [f"'as' must be one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}."]}
            )
        return _export(request, fmt)


# The leaderboard API's response shape (boards.leaderboard_data), for the OpenAPI schema.
PAIRED_TEST_SCHEMA = paired_test_schema(
    "PairedTest",
    counted=("items", "Items both models can be judged on"),
    only_first="Items A passes and B fails",
    only_second="Items B passes and A fails",
    about="Exactly two models compared on a suite with predictions: McNemar's exact "
    "two-sided test over the items (null otherwise)",
)

COMPARISON_SCHEMA = inline_serializer(
    "SuiteComparison",
    {
        "suite": serializers.CharField(),
        "models": inline_serializer(
            "ComparedModel", compared_fields(over="the evaluable items"), many=True
        ),
        "left_out": left_out_schema("ComparisonLeftOut"),
        "counts": inline_serializer(
            "ComparisonCount",
            {"label": serializers.CharField(), "items": serializers.IntegerField()},
            many=True,
        ),
        "disagreements": serializers.IntegerField(
            help_text="Items on which some prediction's outcome differs"
        ),
        "paired_test": PAIRED_TEST_SCHEMA,
    },
)


def comparison_data(comparison: comparisons.Comparison) -> dict[str, object]:
    return {
        "suite": comparison.suite.name,
        "models": [compared_data(m) for m in comparison.models],
        "left_out": left_out_data(comparison.left_out),
        "counts": [{"label": label, "items": count} for label, count in comparison.counts],
        "disagreements": comparison.disagreements,
        "paired_test": paired_test_data(comparison.paired),
    }


class SuiteComparisonAPI(APIView):
    """Models side by side on one suite (current results only, as on the comparison
    page): the items by which models pass them and, for exactly two models, McNemar's
    exact test of their difference over the items. Read only; no item values."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            models_parameter(
                "Model names, comma-separated (2 to 6 are compared); without "
                "it, every model with a current result on the suite",
            )
        ],
        responses={200: COMPARISON_SCHEMA, 400: None, 404: None},
    )
    def get(self, request: Request, name: str) -> Response:
        names = parse_model_names(request.GET.getlist("models"))
        if any("\x00" in n for n in names):
            # PostgreSQL refuses NUL in a query; no name holds one.
            raise ValidationError({"models": ["names contain no NUL character"]})
        if "\x00" in name:
            raise Http404("Names contain no NUL character.")
        suite = gym_data_or_404(Suite, name, noun="suite")
        if not names:
            # Every model with a current result, by name (the first six are compared).
            staff = bool(request.user.is_staff)
            names = [m.name for m, _pk in comparisons.current_results(suite, include_hidden=staff)]
        return Response(comparison_data(comparisons.compare(suite, names, with_items=False)))


def _floats(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(child=serializers.FloatField(allow_null=True), **kwargs)


# The item API's response shape, for the OpenAPI schema.
ITEM_SCHEMA = inline_serializer(
    "EvaluationItem",
    {
        "evaluation": serializers.IntegerField(),
        "item_number": serializers.IntegerField(),
        "units": serializers.CharField(),
        "metric": serializers.CharField(),
        "passed": serializers.BooleanField(allow_null=True),
        "tokens_stored": serializers.BooleanField(),
        "predictions": inline_serializer(
            "EvaluationItemPrediction",
            {
                "formula": serializers.CharField(),
                "outcome": serializers.BooleanField(allow_null=True),
                "comparisons": inline_serializer(
                    "EvaluationItemComparison",
                    {
                        "left": serializers.CharField(),
                        "op": serializers.CharField(),
                        "right": serializers.CharField(),
                        "left_value": serializers.FloatField(allow_null=True),
                        "right_value": serializers.FloatField(allow_null=True),
                    },
                    many=True,
                ),
            },
            many=True,
        ),
        "conditions": inline_serializer(
            "EvaluationItemCondition",
            {
                "condition_name": serializers.CharField(),
                "sentence": serializers.CharField(),
                "regions": inline_serializer(
                    "EvaluationItemRegion",
                    {
                        "region_number": serializers.IntegerField(),
                        "region_name": serializers.CharField(),
                        "content": serializers.CharField(),
                        "start": serializers.IntegerField(),
                        "end": serializers.IntegerField(),
                        "metric_value": serializers.DictField(
                            child=serializers.FloatField(allow_null=True)
                        ),
                        "missing": inline_serializer(
                            "EvaluationItemMissing",
                            {
                                "reason": serializers.ChoiceField(choices=missing.KINDS),
                                "text": serializers.CharField(),
                            },
                            allow_null=True,
                            help_text="Why the suite's metric is missing here (null where "
                            "it is not): uncovered (no token covers the region), straddled "
                            "(a token from an earlier region took it), no_surprisal, or "
                            "unknown (scored before tokens were kept)",
                        ),
                    },
                    many=True,
                ),
                "tokens": inline_serializer(
                    "EvaluationItemTokens",
                    {
                        "text": serializers.ListField(child=serializers.CharField()),
                        "start": serializers.ListField(child=serializers.IntegerField()),
                        "end": serializers.ListField(child=serializers.IntegerField()),
                        "surp": _floats(),
                        "region": serializers.ListField(
                            child=serializers.IntegerField(allow_null=True)
                        ),
                    },
                    allow_null=True,
                ),
            },
            many=True,
        ),
        "previous": serializers.IntegerField(allow_null=True),
        "next": serializers.IntegerField(allow_null=True),
    },
)


class EvaluationItemAPI(APIView):
    """One item of a done evaluation: per condition the sentence, each region's span and
    values (bits), and the token arrays (text as the tokenizer spells it, character
    offsets, surprisal in bits, region number; null for evaluations stored before
    tokens were kept); per prediction its outcome (true, false, or null: not evaluable)
    and each comparison's two sides with their values (null where missing)."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "item_number",
                int,
                OpenApiParameter.PATH,
                description="The item's number in the suite (may be below 0)",
            )
        ],
        responses={200: ITEM_SCHEMA, 404: None},
    )
    def get(self, request: Request, pk: int, item_number: int) -> Response:
        return Response(items.item_data(_item(pk, item_number)))


# The results API's response shape (exports.results_document), for the OpenAPI schema.
RESULTS_SCHEMA = inline_serializer(
    "ResultsDocument",
    {
        "meta": serializers.DictField(help_text="The suite's meta, with `model`"),
        "region_meta": serializers.DictField(child=serializers.CharField()),
        "predictions": serializers.ListField(child=serializers.DictField()),
        "items": serializers.ListField(
            child=serializers.DictField(),
            help_text="As in the suite; each region has `metric_value`: the six metrics in "
            "bits (null where missing)",
        ),
        "results": inline_serializer(
            "ResultsSummary",
            {
                "units": serializers.CharField(),
                "metric": serializers.CharField(),
                "accuracy": serializers.FloatField(allow_null=True),
                "items_passed": serializers.IntegerField(
                    help_text="Items on which every prediction holds"
                ),
                "items_evaluated": serializers.IntegerField(
                    help_text="Items every prediction could be judged on: the accuracy is "
                    "items_passed / items_evaluated"
                ),
                "accuracy_interval": serializers.ListField(
                    child=serializers.FloatField(),
                    min_length=2,
                    max_length=2,
                    allow_null=True,
                    help_text="The accuracy's 95% Wilson score interval [low, high]; null "
                    "without an evaluable item",
                ),
                "ties": serializers.IntegerField(),
                "accuracy_random_ties": serializers.FloatField(allow_null=True),
                "predictions": inline_serializer(
                    "ResultsPrediction",
                    {
                        "formula": serializers.CharField(),
                        "accuracy": serializers.FloatField(allow_null=True),
                        "passed": serializers.IntegerField(),
                        "evaluated": serializers.IntegerField(),
                        "ties": serializers.IntegerField(),
                    },
                    many=True,
                ),
                "items": inline_serializer(
                    "ResultsItem",
                    {
                        "item_number": serializers.IntegerField(),
                        "outcomes": serializers.ListField(
                            child=serializers.BooleanField(allow_null=True)
                        ),
                        "passed": serializers.BooleanField(allow_null=True),
                    },
                    many=True,
                ),
                "diagnostics": serializers.DictField(),
                "model_info": serializers.DictField(),
            },
        ),
    },
)


class EvaluationResultsAPI(APIView):
    """One done evaluation in the SyntaxGym results format (values in bits)."""

    permission_classes = [AllowAny]

    @extend_schema(responses={200: RESULTS_SCHEMA, 404: None})
    def get(self, request: Request, pk: int) -> Response:
        return Response(exports.results_document(_done_evaluation(pk)))
