from __future__ import annotations

from django.urls import path
from django.views.generic import RedirectView

from suites.syntaxgym import api, authoring, views

# Included in suites.urls (pages, namespace "suites") and the API.
urlpatterns = [
    path("", views.suite_list, name="list"),
    path("upload/", views.suite_upload, name="upload"),
    path("editor/", authoring.editor_new, name="editor"),
    path("docs/predictions/", authoring.prediction_docs, name="prediction_docs"),
    path("tags/", views.tag_list, name="tags"),
    path("tags/<slug:tag>/", views.suite_list, name="tag"),
    # The list lives at the site's root; /suites/ is where people look for it too.
    path("suites/", RedirectView.as_view(pattern_name="suites:list", query_string=True)),
    path("suites/<str:name>/", views.suite_detail, name="detail"),
    path("suites/<str:name>/edit/", views.suite_edit, name="edit"),
    path("suites/<str:name>/replace/", views.suite_replace, name="replace"),
    path("suites/<str:name>/delete/", views.suite_delete, name="delete"),
    path("suites/<str:name>/download.json", views.suite_download_json, name="download_json"),
    path("suites/<str:name>/download.csv", views.suite_download_csv, name="download_csv"),
    path("suites/<str:name>/grid/", authoring.editor_edit, name="grid"),
    path("suites/<str:name>/copy/", authoring.suite_copy, name="copy"),
]

api_urlpatterns = [
    path("suites/", api.SuiteListCreate.as_view(), name="api-suites"),
    path("suites/<str:name>/", api.SuiteDetail.as_view(), name="api-suite"),
    path("suites/<str:name>/export/", api.SuiteExport.as_view(), name="api-suite-export"),
    path("tags/", api.TagList.as_view(), name="api-tags"),
    path("validate/suite/", authoring.ValidateSuite.as_view(), name="api-validate-suite"),
    path("validate/formula/", authoring.ValidateFormula.as_view(), name="api-validate-formula"),
]
