from __future__ import annotations

from django.urls import path

from suites.catalog_urls import catalog_page_urls
from suites.minimal_pairs import api, views

# Included in suites.urls (pages, namespace "suites") and the API.
urlpatterns = [
    *catalog_page_urls(
        "minimal-pairs/",
        (views.pair_set_list, "pair_sets"),
        (views.pair_set_upload, "pair_set_upload"),
        (views.pair_set_detail, "pair_set"),
    ),
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
