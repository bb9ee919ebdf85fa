"""API details that every client meets: URLs in responses usable as given for any suite
name, the pages' `q` accepted by the API's searches, and 401 with a Token challenge (not
403) for a client that sent no credentials, and 401 for an invalid token on every API
route and method."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from suites.syntaxgym import services
from tests.conftest import BrowserClient, small_suite, token_client, url_patterns

pytestmark = pytest.mark.django_db

ODD_NAME = "what? #1 100%"


def test_suite_urls_in_responses_are_encoded(anon_client, alice) -> None:
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


def test_api_search_accepts_q_as_the_pages_do(anon_client, alice) -> None:
    services.suite_import(source=small_suite("one", description="needle"), owner=alice)
    services.suite_import(source=small_suite("two"), owner=alice)

    def names(query: str) -> list[str]:
        return [s["name"] for s in anon_client.get(f"/api/suites/?{query}").json()["results"]]

    assert names("q=needle") == names("search=needle") == ["one"]
    assert names("q=") == ["one", "two"]
    assert "needle" in anon_client.get("/?q=needle").content.decode()
    for path in ("/api/minimal-pairs/?q=zzz", "/api/probing-tasks/?q=zzz"):
        assert anon_client.get(path).json()["results"] == []


def test_unauthenticated_token_clients_get_401(alice) -> None:
    client = BrowserClient()
    response = client.post("/api/suites/", "{}", content_type="application/json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    bad = BrowserClient(HTTP_AUTHORIZATION="Token not-a-key")
    assert bad.get("/api/evaluations/").status_code == 401
    assert bad.post("/api/suites/", "{}", content_type="application/json").status_code == 401
    # With a valid token the same request gets past authentication (a 400 for the body).
    good = token_client(alice)
    assert good.post("/api/suites/", "{}", content_type="application/json").status_code == 400


def _api_routes() -> list[tuple[str, str]]:
    """(path, method) for every /api/ route and every method its view has, path
    parameters filled with a value their converter takes (no row needs to exist: the
    token is checked before anything is looked up)."""

    routes = []
    for route, pattern in url_patterns():
        if not route.startswith("api/"):
            continue
        # as_view() sets view_class on the function it returns; the stubs type a plain callable.
        view = getattr(pattern.callback, "cls", None) or pattern.callback.view_class  # type: ignore[attr-defined]
        path = "/" + route
        for name, converter in pattern.pattern.converters.items():
            value = next(v for v in ("1", "x") if re.fullmatch(converter.regex, v))
            path = re.sub(rf"<(\w+:)?{name}>", value, path)
        routes += [(path, m) for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m)]
    return routes


API_ROUTES = _api_routes()


def test_the_route_list_covers_the_api() -> None:
    # Spot checks that the walk reaches every kind's routes, path parameters filled;
    # routes added later join the list by themselves.
    for route in [
        ("/api/suites/", "post"),
        ("/api/minimal-pairs/1/", "put"),
        ("/api/suites/1/", "delete"),
        ("/api/probing-runs/1/layers.csv", "get"),
        ("/api/evaluations/1/items/1/", "get"),
        ("/api/token/", "post"),
        ("/api/schema/", "get"),
    ]:
        assert route in API_ROUTES
    assert len(set(API_ROUTES)) == len(API_ROUTES) >= 50


@pytest.mark.parametrize(("path", "method"), API_ROUTES, ids=[f"{m} {p}" for p, m in API_ROUTES])
def test_an_invalid_token_is_refused_everywhere(path: str, method: str) -> None:
    bad = BrowserClient(HTTP_AUTHORIZATION="Token not-a-key")
    response = bad.generic(method.upper(), path, "{}", content_type="application/json")
    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"] == "Token"
    if path in ("/api/schema/", "/api/docs/"):
        # These answer in their own formats (YAML, HTML), their errors too.
        return
    assert response.json() == {
        "errors": [{"code": "authentication_failed", "message": "Invalid token."}]
    }
