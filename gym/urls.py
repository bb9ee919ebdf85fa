from __future__ import annotations

from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from evaluations.urls import api_urlpatterns as evaluation_api
from gym import accounts, csp_reports, docs
from suites.urls import api_urlpatterns as suite_api

# Swagger UI under the site's Content Security Policy: its start-up script is a file of
# its own (the split view's ?script), its page's styles a stylesheet (templates/api_docs.html),
# and its stylesheet's icons are data: images, allowed on this page only.
api_docs = csp_update({"img-src": ["data:"]})(
    SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api_docs.html")
)

api = [
    *suite_api,
    *evaluation_api,
    path("token/", accounts.ObtainTokenView.as_view(), name="api-token"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", api_docs, name="api-docs"),
]

admin.site.login_form = accounts.LimitedAdminAuthenticationForm
handler404 = "gym.errors.api_not_found"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("csp-report/", csp_reports.csp_report, name="csp-report"),
    path("accounts/signup/", accounts.signup, name="signup"),
    path("accounts/login/", accounts.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include(api)),
    path("", include("evaluations.urls")),
    path("", include("suites.urls")),
    # After suites.urls, whose docs/predictions/ is a page of the docs too.
    path("docs/", include((docs.urlpatterns, docs.app_name))),
]
