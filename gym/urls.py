from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from evaluations.urls import api_urlpatterns as evaluation_api
from gym import accounts, docs
from suites.syntaxgym import views as suite_views
from suites.urls import api_urlpatterns as suite_api

api = [
    *suite_api,
    *evaluation_api,
    path("token/", accounts.ObtainTokenView.as_view(), name="api-token"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]

admin.site.login_form = accounts.LimitedAdminAuthenticationForm
handler404 = "gym.errors.api_not_found"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/signup/", suite_views.signup, name="signup"),
    path("accounts/login/", accounts.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include(api)),
    path("", include("evaluations.urls")),
    path("", include("suites.urls")),
    # After suites.urls, whose docs/predictions/ is a page of the docs too.
    path("docs/", include((docs.urlpatterns, docs.app_name))),
]
