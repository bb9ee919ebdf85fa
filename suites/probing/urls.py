from __future__ import annotations

from django.urls import path

from suites.catalog_urls import catalog_page_urls
from suites.probing import api, views

# Included in suites.urls (pages, namespace "suites") and the API.
urlpatterns = catalog_page_urls(
    "probing/",
    (views.probing_list, "probing_list"),
    (views.probing_upload, "probing_upload"),
    (views.probing_detail, "probing_detail"),
)

api_urlpatterns = [
    path("probing-tasks/", api.ProbingTaskListCreate.as_view(), name="api-probing-tasks"),
    path("probing-tasks/<str:name>/", api.ProbingTaskDetail.as_view(), name="api-probing-task"),
]
