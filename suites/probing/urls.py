from __future__ import annotations

from django.urls import path

from suites.probing import api, views

# Included in suites.urls (pages, namespace "suites") and the API.
urlpatterns = [
    path("probing/", views.probing_list, name="probing_list"),
    # Before the <str:name> pattern, which would otherwise swallow it.
    path("probing/upload/", views.probing_upload, name="probing_upload"),
    path("probing/<str:name>/", views.probing_detail, name="probing_detail"),
]

api_urlpatterns = [
    path("probing-tasks/", api.ProbingTaskListCreate.as_view(), name="api-probing-tasks"),
    path("probing-tasks/<str:name>/", api.ProbingTaskDetail.as_view(), name="api-probing-task"),
]
