from __future__ import annotations

from django.urls import path

from evaluations.boards import urls as boards
from evaluations.language_models import api as model_api
from evaluations.language_models import views as model_views
from evaluations.minimal_pairs import urls as minimal_pairs
from evaluations.probing import urls as probing
from evaluations.runs import api as run_api
from evaluations.runs import views as run_views
from evaluations.syntaxgym import urls as syntaxgym
from evaluations.training import urls as training

app_name = "evaluations"

# Each kind of run lists its own routes, pages and API, in its package.
urlpatterns = [
    path("models/", model_views.model_list, name="models"),
    path("models/register/", model_views.model_register, name="register"),
    path("models/<slug:name>/visibility/", model_views.model_visibility, name="visibility"),
    # After models/register/, which the slug pattern would otherwise swallow.
    *boards.model_urlpatterns,
    path("runs/", run_views.run_list, name="runs"),
    *boards.urlpatterns,
    *syntaxgym.urlpatterns,
    *minimal_pairs.urlpatterns,
    *probing.urlpatterns,
    *training.urlpatterns,
]

api_urlpatterns = [
    path("models/", model_api.ModelListCreate.as_view(), name="api-models"),
    path("models/<slug:name>/", model_api.ModelDetail.as_view(), name="api-model"),
    path("runs/", run_api.RunList.as_view(), name="api-runs"),
    *boards.api_urlpatterns,
    *syntaxgym.api_urlpatterns,
    *minimal_pairs.api_urlpatterns,
    *probing.api_urlpatterns,
    *training.api_urlpatterns,
]
