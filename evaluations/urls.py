from __future__ import annotations

from django.urls import path, register_converter

from evaluations.language_models import api as model_api
from evaluations.language_models import views as model_views
from evaluations.minimal_pairs import api as pair_api
from evaluations.minimal_pairs import result_views as pair_result_views
from evaluations.minimal_pairs import views as pair_run_views
from evaluations.probing import api as probing_api
from evaluations.probing import views as probing_views
from evaluations.runs import api as run_api
from evaluations.runs import views as run_views
from evaluations.syntaxgym import api, result_views, views
from evaluations.training import urls as training_urls


class SignedIntConverter:
    """Whole numbers with an optional minus sign: suites may number items below 0."""

    regex = "-?[0-9]+"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(int(value))


register_converter(SignedIntConverter, "signed")

app_name = "evaluations"

urlpatterns = [
    path("models/", model_views.model_list, name="models"),
    path("models/register/", model_views.model_register, name="register"),
    path("models/<slug:name>/visibility/", model_views.model_visibility, name="visibility"),
    path("runs/", run_views.run_list, name="runs"),
    path("evaluations/", views.evaluation_list, name="list"),
    path("evaluations/new/", views.evaluation_request, name="request"),
    path("evaluations/rerun-outdated/", views.evaluation_rerun_outdated, name="rerun_outdated"),
    path("evaluations/<int:pk>/", views.evaluation_detail, name="detail"),
    path("evaluations/<int:pk>/retry/", views.evaluation_retry, name="retry"),
    path("evaluations/<int:pk>/cancel/", views.evaluation_cancel, name="cancel"),
    # After models/register/, which the slug pattern would otherwise swallow.
    path("models/<slug:name>/", result_views.model_page, name="model"),
    path("leaderboard/", result_views.leaderboard_page, name="leaderboard"),
    path("suites/<str:name>/compare/", result_views.compare_page, name="compare"),
    path("leaderboard.csv", result_views.leaderboard_csv_view, name="leaderboard_csv"),
    path("evaluations/<int:pk>/results/", result_views.result_page_view, name="result"),
    path(
        "evaluations/<int:pk>/items/<signed:item_number>/",
        result_views.item_page_view,
        name="item",
    ),
    path("results.<str:fmt>", result_views.export_view, name="export"),
    path("evaluations/<int:pk>/results.json", result_views.results_json_view, name="results_json"),
    path("evaluations/<int:pk>/results.csv", result_views.results_csv_view, name="results_csv"),
    path("pairs/evaluations/", run_views.run_list_of("pairs"), name="pair_list"),
    path("pairs/evaluations/new/", pair_run_views.pair_request, name="pair_request"),
    path("pairs/evaluations/<int:pk>/retry/", pair_run_views.pair_retry, name="pair_retry"),
    path("pairs/evaluations/<int:pk>/cancel/", pair_run_views.pair_cancel, name="pair_cancel"),
    path(
        "minimal-pairs/<str:name>/import-predictions/",
        pair_run_views.pair_import,
        name="pair_import",
    ),
    path("probing-runs/", run_views.run_list_of("probing"), name="probing_list"),
    path("probing-runs/new/", probing_views.probing_request, name="probing_request"),
    path("probing-runs/<int:pk>/", probing_views.probing_run, name="probing_run"),
    path("probing-runs/<int:pk>/retry/", probing_views.probing_retry, name="probing_retry"),
    path("probing-runs/<int:pk>/cancel/", probing_views.probing_cancel, name="probing_cancel"),
    path("probing-runs/<int:pk>/results.json", probing_views.probing_run_json, name="probing_json"),
    path("probing-runs/<int:pk>/layers.csv", probing_views.probing_run_csv, name="probing_csv"),
    path("probing/<str:name>/annotate/", probing_views.probing_annotate, name="probing_annotate"),
    path(
        "leaderboard/probing.csv",
        probing_views.probing_leaderboard_csv,
        name="probing_leaderboard_csv",
    ),
    path("pairs/evaluations/<int:pk>/", pair_result_views.pair_result_view, name="pair_result"),
    path(
        "minimal-pairs/<str:name>/compare/",
        pair_result_views.pair_compare_page,
        name="pair_compare",
    ),
    path(
        "leaderboard/minimal-pairs.csv",
        pair_result_views.pair_leaderboard_csv_view,
        name="pair_leaderboard_csv",
    ),
    *training_urls.urlpatterns,
]

api_urlpatterns = [
    path("models/", model_api.ModelListCreate.as_view(), name="api-models"),
    path("models/<slug:name>/", model_api.ModelDetail.as_view(), name="api-model"),
    path("runs/", run_api.RunList.as_view(), name="api-runs"),
    path("evaluations/", api.EvaluationListCreate.as_view(), name="api-evaluations"),
    path(
        "evaluations/rerun-outdated/",
        api.EvaluationRerunOutdated.as_view(),
        name="api-evaluations-rerun-outdated",
    ),
    path("evaluations/<int:pk>/", api.EvaluationDetail.as_view(), name="api-evaluation"),
    path("evaluations/<int:pk>/retry/", api.EvaluationRetry.as_view(), name="api-evaluation-retry"),
    path(
        "evaluations/<int:pk>/cancel/", api.EvaluationCancel.as_view(), name="api-evaluation-cancel"
    ),
    path("leaderboard/", result_views.LeaderboardAPI.as_view(), name="api-leaderboard"),
    path(
        "suites/<str:name>/compare/",
        result_views.SuiteComparisonAPI.as_view(),
        name="api-suite-compare",
    ),
    path(
        "leaderboard/minimal-pairs/",
        pair_result_views.PairLeaderboardAPI.as_view(),
        name="api-pair-leaderboard",
    ),
    path(
        "leaderboard/minimal-pairs/compare/",
        pair_result_views.PairComparisonAcrossSetsAPI.as_view(),
        name="api-pair-compare-across-sets",
    ),
    path("results/export/", result_views.ResultsExportAPI.as_view(), name="api-results-export"),
    path(
        "minimal-pairs/<str:name>/compare/",
        pair_result_views.PairSetComparisonAPI.as_view(),
        name="api-pair-set-compare",
    ),
    path(
        "minimal-pairs/<str:name>/analyze/",
        pair_api.PairSetAnalyze.as_view(),
        name="api-pair-set-analyze",
    ),
    path(
        "evaluations/<int:pk>/results/",
        result_views.EvaluationResultsAPI.as_view(),
        name="api-evaluation-results",
    ),
    path(
        "pairs/evaluations/",
        pair_api.PairEvaluationListCreate.as_view(),
        name="api-pair-evaluations",
    ),
    path(
        "pairs/evaluations/<int:pk>/",
        pair_api.PairEvaluationDetail.as_view(),
        name="api-pair-evaluation",
    ),
    path(
        "pairs/evaluations/<int:pk>/retry/",
        pair_api.PairEvaluationRetry.as_view(),
        name="api-pair-evaluation-retry",
    ),
    path(
        "pairs/evaluations/<int:pk>/cancel/",
        pair_api.PairEvaluationCancel.as_view(),
        name="api-pair-evaluation-cancel",
    ),
    path(
        "pairs/evaluations/<int:pk>/<str:table>/",
        pair_api.PairEvaluationTable.as_view(),
        name="api-pair-evaluation-table",
    ),
    path(
        "minimal-pairs/<str:name>/predictions/",
        pair_api.PairPredictionsImport.as_view(),
        name="api-pair-set-predictions",
    ),
    path("probing-runs/", probing_api.ProbingRunListCreate.as_view(), name="api-probing-runs"),
    path("probing-runs/<int:pk>/", probing_api.ProbingRunDetail.as_view(), name="api-probing-run"),
    path(
        "probing-runs/<int:pk>/layers.csv",
        probing_api.ProbingRunCSV.as_view(),
        name="api-probing-run-csv",
    ),
    path(
        "probing-runs/<int:pk>/retry/",
        probing_api.ProbingRunRetry.as_view(),
        name="api-probing-run-retry",
    ),
    path(
        "probing-runs/<int:pk>/cancel/",
        probing_api.ProbingRunCancel.as_view(),
        name="api-probing-run-cancel",
    ),
    path(
        "leaderboard/probing/",
        probing_api.ProbingLeaderboardAPI.as_view(),
        name="api-probing-leaderboard",
    ),
    path(
        "evaluations/<int:pk>/items/<signed:item_number>/",
        result_views.EvaluationItemAPI.as_view(),
        name="api-evaluation-item",
    ),
    *training_urls.api_urlpatterns,
]
