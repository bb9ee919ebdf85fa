from __future__ import annotations

from django.urls import path, register_converter

from evaluations.runs.urls import run_api_urls, run_page_urls
from evaluations.syntaxgym import api, result_views, views


class SignedIntConverter:
    """Whole numbers with an optional minus sign: suites may number items below 0."""

    regex = "-?[0-9]+"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(int(value))


register_converter(SignedIntConverter, "signed")

# Included in evaluations.urls (pages, namespace "evaluations") and the API.
urlpatterns = [
    *run_page_urls(
        "evaluations/",
        "",
        list_view=views.evaluation_list,
        request_view=views.evaluation_request,
        detail_view=views.evaluation_detail,
        retry_view=views.evaluation_retry,
        cancel_view=views.evaluation_cancel,
    ),
    path("evaluations/rerun-outdated/", views.evaluation_rerun_outdated, name="rerun_outdated"),
    path("suites/<str:name>/compare/", result_views.compare_page, name="compare"),
    path("evaluations/<int:pk>/results/", result_views.result_page_view, name="result"),
    path(
        "evaluations/<int:pk>/items/<signed:item_number>/",
        result_views.item_page_view,
        name="item",
    ),
    path("results.<str:fmt>", result_views.export_view, name="export"),
    path("evaluations/<int:pk>/results.json", result_views.results_json_view, name="results_json"),
    path("evaluations/<int:pk>/results.csv", result_views.results_csv_view, name="results_csv"),
]

api_urlpatterns = [
    *run_api_urls(
        "evaluations/",
        one="evaluation",
        many="evaluations",
        list_create=api.EvaluationListCreate,
        detail=api.EvaluationDetail,
        retry=api.EvaluationRetry,
        cancel=api.EvaluationCancel,
    ),
    path(
        "evaluations/rerun-outdated/",
        api.EvaluationRerunOutdated.as_view(),
        name="api-evaluations-rerun-outdated",
    ),
    path(
        "suites/<str:name>/compare/",
        result_views.SuiteComparisonAPI.as_view(),
        name="api-suite-compare",
    ),
    path("results/export/", result_views.ResultsExportAPI.as_view(), name="api-results-export"),
    path(
        "evaluations/<int:pk>/results/",
        result_views.EvaluationResultsAPI.as_view(),
        name="api-evaluation-results",
    ),
    path(
        "evaluations/<int:pk>/items/<signed:item_number>/",
        result_views.EvaluationItemAPI.as_view(),
        name="api-evaluation-item",
    ),
]
