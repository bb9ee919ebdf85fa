"""The leaderboard's and the model pages' routes: included in `evaluations.urls` (pages,
namespace "evaluations") and the API."""

from __future__ import annotations

from django.urls import path

from evaluations.boards import views

urlpatterns = [
    path("leaderboard/", views.leaderboard_page, name="leaderboard"),
    path("leaderboard.csv", views.leaderboard_csv_view, name="leaderboard_csv"),
]

# After models/register/ and the other models/<name>/... pages in `evaluations.urls`,
# which the slug pattern would otherwise swallow.
model_urlpatterns = [
    path("models/<slug:name>/", views.model_page, name="model"),
]

api_urlpatterns = [
    path("leaderboard/", views.LeaderboardAPI.as_view(), name="api-leaderboard"),
]
