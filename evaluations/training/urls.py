from __future__ import annotations

from django.urls import path

from evaluations.runs.urls import run_api_urls, run_page_urls
from evaluations.training import api, views

# Included in evaluations.urls (pages, namespace "evaluations") and the API.
urlpatterns = [
    *run_page_urls(
        "training/",
        "training_",
        list_view=views.training_runs,
        request_view=views.training_request,
        detail_view=views.training_run,
        retry_view=views.training_retry,
        cancel_view=views.training_cancel,
        list_name="runs",
        detail_name="run",
    ),
    path("training/<int:pk>/curves.csv", views.training_curves_csv, name="training_curves_csv"),
    path("training/<int:pk>/loss.jsonl", views.training_loss_log, name="training_loss_log"),
    path("training/<int:pk>/curves.json", views.training_curves_json, name="training_curves_json"),
    path("series/", views.model_series_list, name="model_series_list"),
    path("series/register/", views.model_series_register, name="model_series_register"),
    path("series/<str:name>/", views.model_series, name="model_series"),
    path("series/<str:name>/evaluate/", views.model_series_evaluate, name="model_series_evaluate"),
    path("series/<str:name>/curves.csv", views.model_series_csv, name="model_series_csv"),
]

api_urlpatterns = [
    *run_api_urls(
        "training-runs/",
        one="training-run",
        many="training-runs",
        list_create=api.TrainingRunListCreate,
        detail=api.TrainingRunDetail,
        retry=api.TrainingRunRetry,
        cancel=api.TrainingRunCancel,
    ),
    # The corpus check before a run is asked for: a corpus's, read by training.
    path("corpora/<str:name>/overlap/", api.CorpusCheck.as_view(), name="api-corpus-overlap"),
    path("model-series/", api.ModelSeriesListCreate.as_view(), name="api-model-series-list"),
    path("model-series/<str:name>/", api.ModelSeriesDetail.as_view(), name="api-model-series"),
    path(
        "model-series/<str:name>/evaluate/",
        api.ModelSeriesEvaluate.as_view(),
        name="api-model-series-evaluate",
    ),
    path(
        "model-series/<str:name>/curves/",
        api.ModelSeriesCurves.as_view(),
        name="api-model-series-curves",
    ),
]
