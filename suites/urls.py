from __future__ import annotations

from django.urls import path
from django.views.generic import RedirectView

from suites.corpora import api as corpus_api
from suites.corpora import views as corpus_views
from suites.minimal_pairs import api as pair_api
from suites.minimal_pairs import views as pair_views
from suites.probing import api as probing_api
from suites.probing import views as probing_views
from suites.syntaxgym import api, authoring, views

app_name = "suites"

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
    path("minimal-pairs/", pair_views.pair_set_list, name="pair_sets"),
    path("minimal-pairs/upload/", pair_views.pair_set_upload, name="pair_set_upload"),
    path("minimal-pairs/<str:name>/", pair_views.pair_set_detail, name="pair_set"),
    path("minimal-pairs/<str:name>/replace/", pair_views.pair_set_replace, name="pair_set_replace"),
    path(
        "minimal-pairs/<str:name>/download.tsv",
        pair_views.pair_set_download,
        name="pair_set_download",
    ),
    path("probing/", probing_views.probing_list, name="probing_list"),
    path("probing/upload/", probing_views.probing_upload, name="probing_upload"),
    path("probing/<str:name>/", probing_views.probing_detail, name="probing_detail"),
    path("corpora/", corpus_views.corpus_list_page, name="corpora"),
    path("corpora/upload/", corpus_views.corpus_upload, name="corpus_upload"),
    path("corpora/<str:name>/", corpus_views.corpus_detail, name="corpus"),
]

api_urlpatterns = [
    path("suites/", api.SuiteListCreate.as_view(), name="api-suites"),
    path("suites/<str:name>/", api.SuiteDetail.as_view(), name="api-suite"),
    path("suites/<str:name>/export/", api.SuiteExport.as_view(), name="api-suite-export"),
    path("tags/", api.TagList.as_view(), name="api-tags"),
    path("minimal-pairs/", pair_api.PairSetListCreate.as_view(), name="api-pair-sets"),
    path("minimal-pairs/<str:name>/", pair_api.PairSetDetail.as_view(), name="api-pair-set"),
    path(
        "minimal-pairs/<str:name>/export/",
        pair_api.PairSetExport.as_view(),
        name="api-pair-set-export",
    ),
    path("probing-tasks/", probing_api.ProbingTaskListCreate.as_view(), name="api-probing-tasks"),
    path(
        "probing-tasks/<str:name>/",
        probing_api.ProbingTaskDetail.as_view(),
        name="api-probing-task",
    ),
    path("corpora/", corpus_api.CorpusListCreate.as_view(), name="api-corpora"),
    path("corpora/<str:name>/", corpus_api.CorpusDetail.as_view(), name="api-corpus"),
    path("validate/suite/", authoring.ValidateSuite.as_view(), name="api-validate-suite"),
    path("validate/formula/", authoring.ValidateFormula.as_view(), name="api-validate-formula"),
]
