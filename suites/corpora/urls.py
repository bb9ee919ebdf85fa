from __future__ import annotations

from django.urls import path

from suites.corpora import api, views

# Included in suites.urls (pages, namespace "suites") and the API.
urlpatterns = [
    path("corpora/", views.corpus_list_page, name="corpora"),
    # Before the <str:name> pattern, which would otherwise swallow it.
    path("corpora/upload/", views.corpus_upload, name="corpus_upload"),
    path("corpora/<str:name>/", views.corpus_detail, name="corpus"),
]

api_urlpatterns = [
    path("corpora/", api.CorpusListCreate.as_view(), name="api-corpora"),
    path("corpora/<str:name>/", api.CorpusDetail.as_view(), name="api-corpus"),
]
