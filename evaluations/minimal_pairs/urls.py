from __future__ import annotations

from django.urls import path

from evaluations.minimal_pairs import api, result_views, views
from evaluations.runs import views as run_views
from evaluations.runs.urls import run_api_urls, run_page_urls

# Included in evaluations.urls (pages, namespace "evaluations") and the API.
urlpatterns = [
    *run_page_urls(
        "pairs/evaluations/",
        "pair_",
        list_view=run_views.run_list_of("pairs"),
        request_view=views.pair_request,
        detail_view=result_views.pair_result_view,
        retry_view=views.pair_retry,
        cancel_view=views.pair_cancel,
        detail_name="result",
    ),
    path("minimal-pairs/<str:name>/import-predictions/", views.pair_import, name="pair_import"),
    path("minimal-pairs/<str:name>/compare/", result_views.pair_compare_page, name="pair_compare"),
    path(
        "leaderboard/minimal-pairs.csv",
        result_views.pair_leaderboard_csv_view,
        name="pair_leaderboard_csv",
    ),
]

api_urlpatterns = [
    *run_api_urls(
        "pairs/evaluations/",
        one="pair-evaluation",
        many="pair-evaluations",
        list_create=api.PairEvaluationListCreate,
        detail=api.PairEvaluationDetail,
        retry=api.PairEvaluationRetry,
        cancel=api.PairEvaluationCancel,
    ),
    # After retry/ and cancel/, which the table name would otherwise swallow.
    path(
        "pairs/evaluations/<int:pk>/<str:table>/",
        api.PairEvaluationTable.as_view(),
        name="api-pair-evaluation-table",
    ),
    path(
        "leaderboard/minimal-pairs/",
        result_views.PairLeaderboardAPI.as_view(),
        name="api-pair-leaderboard",
    ),
    path(
        "leaderboard/minimal-pairs/compare/",
        result_views.PairComparisonAcrossSetsAPI.as_view(),
        name="api-pair-compare-across-sets",
    ),
    path(
        "minimal-pairs/<str:name>/compare/",
        result_views.PairSetComparisonAPI.as_view(),
        name="api-pair-set-compare",
    ),
    path(
        "minimal-pairs/<str:name>/analyze/",
        api.PairSetAnalyze.as_view(),
        name="api-pair-set-analyze",
    ),
    path(
        "minimal-pairs/<str:name>/predictions/",
        api.PairPredictionsImport.as_view(),
        name="api-pair-set-predictions",
    ),
]
