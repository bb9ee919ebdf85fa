from __future__ import annotations

from django.urls import path

from suites.minimal_pairs import api, views

# Included in suites.urls (pages, namespace "suites") and the API.
urlpatterns = [
    path("minimal-pairs/", views.pair_set_list, name="pair_sets"),
    # Before the <str:name> pattern, which would otherwise swallow it.
    path("minimal-pairs/upload/", views.pair_set_upload, name="pair_set_upload"),
    path("minimal-pairs/<str:name>/", views.pair_set_detail, name="pair_set"),
    path("minimal-pairs/<str:name>/replace/", views.pair_set_replace, name="pair_set_replace"),
    path(
        "minimal-pairs/<str:name>/download.tsv",
        views.pair_set_download,
        name="pair_set_download",
    ),
]

api_urlpatterns = [
    path("minimal-pairs/", api.PairSetListCreate.as_view(), name="api-pair-sets"),
    path("minimal-pairs/<str:name>/", api.PairSetDetail.as_view(), name="api-pair-set"),
    path(
        "minimal-pairs/<str:name>/export/",
        api.PairSetExport.as_view(),
        name="api-pair-set-export",
    ),
]
