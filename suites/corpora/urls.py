from __future__ import annotations

from django.urls import path

from suites.catalog_urls import catalog_page_urls
from suites.corpora import api, views

# Included in suites.urls (pages, namespace "suites") and the API.
urlpatterns = catalog_page_urls(
    "corpora/",
    (views.corpus_list_page, "corpora"),
    (views.corpus_upload, "corpus_upload"),
    (views.corpus_detail, "corpus"),
)

api_urlpatterns = [
    path("corpora/", api.CorpusListCreate.as_view(), name="api-corpora"),
    path("corpora/<str:name>/", api.CorpusDetail.as_view(), name="api-corpus"),
]
