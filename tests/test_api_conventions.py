"""API details that every client meets: URLs in responses usable as given for any suite
name, the pages' `q` accepted by the API's searches, and 401 with a Token challenge (not
403) for a client that sent no credentials."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from rest_framework.authtoken.models import Token

from suites import services
from tests.conftest import BrowserClient, small_suite

pytestmark = pytest.mark.django_db

ODD_NAME = "what? #1 100%"


def test_suite_urls_in_responses_are_encoded(anon_client, alice) -> None:  # type: ignore[no-untyped-def]
    services.suite_import(source=small_suite(ODD_NAME), owner=alice)
    listed = anon_client.get("/api/suites/").json()["results"][0]
    url = listed["url"]
    assert url.endswith("/api/suites/what%3F%20%231%20100%25/")
    # Followed as given, the URL reaches the suite (nothing lands in a query or fragment).
    parts = urlsplit(url)
    assert parts.query == "" and parts.fragment == ""
    detail = anon_client.get(parts.path)
    assert detail.status_code == 200 and detail.json()["name"] == ODD_NAME
    assert detail.json()["url"] == url


def test_api_search_accepts_q_as_the_pages_do(anon_client, alice) -> None:  # type: ignore[no-untyped-def]
    services.suite_import(source=small_suite("one", description="needle"), owner=alice)
    services.suite_import(source=small_suite("two"), owner=alice)

    def names(query: str) -> list[str]:
        return [s["name"] for s in anon_client.get(f"/api/suites/?{query}").json()["results"]]

    assert names("q=needle") == names("search=needle") == ["one"]
    assert names("q=") == ["one", "two"]
    assert "needle" in anon_client.get("/?q=needle").content.decode()
    for path in ("/api/minimal-pairs/?q=zzz", "/api/probing-tasks/?q=zzz"):
        assert anon_client.get(path).json()["results"] == []


def test_unauthenticated_token_clients_get_401(alice) -> None:  # type: ignore[no-untyped-def]
    client = BrowserClient()
    response = client.post("/api/suites/", "{}", content_type="application/json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    bad = BrowserClient(HTTP_AUTHORIZATION="Token not-a-key")
    assert bad.get("/api/evaluations/").status_code in (200, 401)
    assert bad.post("/api/suites/", "{}", content_type="application/json").status_code == 401
    # With a valid token the same request gets past authentication (a 400 for the body).
    token, _ = Token.objects.get_or_create(user=alice)
    good = BrowserClient(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert good.post("/api/suites/", "{}", content_type="application/json").status_code == 400
