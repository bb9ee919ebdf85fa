from __future__ import annotations

from django.urls import path

from evaluations.training import api, views

# Included in evaluations.urls (pages, namespace "evaluations") and the API.
urlpatterns = [
    path("training/", views.training_runs, name="training_runs"),
    path("training/new/", views.training_request, name="training_request"),
    path("training/<int:pk>/", views.training_run, name="training_run"),
    path("training/<int:pk>/retry/", views.training_retry, name="training_retry"),
    path("training/<int:pk>/cancel/", views.training_cancel, name="training_cancel"),
    path("training/<int:pk>/curves.csv", views.training_curves_csv, name="training_curves_csv"),
    path("training/<int:pk>/curves.json", views.training_curves_json, name="training_curves_json"),
]

api_urlpatterns = [
    path("training-runs/", api.TrainingRunListCreate.as_view(), name="api-training-runs"),
    path("training-runs/<int:pk>/", api.TrainingRunDetail.as_view(), name="api-training-run"),
    path(
        "training-runs/<int:pk>/cancel/",
        api.TrainingRunCancel.as_view(),
        name="api-training-run-cancel",
    ),
    path(
        "training-runs/<int:pk>/retry/",
        api.TrainingRunRetry.as_view(),
        name="api-training-run-retry",
    ),
]
