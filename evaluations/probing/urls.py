from __future__ import annotations

from django.urls import path

from evaluations.probing import api, views
from evaluations.runs import views as run_views
from evaluations.runs.urls import run_api_urls, run_page_urls

# Included in evaluations.urls (pages, namespace "evaluations") and the API.
urlpatterns = [
    *run_page_urls(
        "probing-runs/",
        "probing_",
        list_view=run_views.run_list_of("probing"),
        request_view=views.probing_request,
        detail_view=views.probing_run,
        retry_view=views.probing_retry,
        cancel_view=views.probing_cancel,
        detail_name="run",
    ),
    path("probing-runs/<int:pk>/results.json", views.probing_run_json, name="probing_json"),
    path("probing-runs/<int:pk>/layers.csv", views.probing_run_csv, name="probing_csv"),
    path("probing/<str:name>/annotate/", views.probing_annotate, name="probing_annotate"),
    path(
        "leaderboard/probing.csv",
        views.probing_leaderboard_csv,
        name="probing_leaderboard_csv",
    ),
]

api_urlpatterns = [
    *run_api_urls(
        "probing-runs/",
        one="probing-run",
        many="probing-runs",
        list_create=api.ProbingRunListCreate,
        detail=api.ProbingRunDetail,
        retry=api.ProbingRunRetry,
        cancel=api.ProbingRunCancel,
    ),
    path(
        "probing-runs/<int:pk>/layers.csv",
        api.ProbingRunCSV.as_view(),
        name="api-probing-run-csv",
    ),
    path(
        "leaderboard/probing/",
        api.ProbingLeaderboardAPI.as_view(),
        name="api-probing-leaderboard",
    ),
]
