"""The API against its own OpenAPI schema (the one /api/schema/ serves): schemathesis
sends generated requests to every operation, in-process over WSGI, anonymous and signed
in with a token, and each answer must be no 5xx, a documented status code, a documented
content type and a body that matches its schema.

Bounded and deterministic: a fixed number of examples per operation, derandomized. Every
request runs inside the test's database transaction (pytest-django), which is rolled back
afterwards: writes (uploads, registrations, run requests) reach nothing outside it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connection
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import token_client

EXAMPLES_PER_OPERATION = 12
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

pytestmark = pytest.mark.django_db

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())


@pytest.fixture(autouse=True)
def _inside_the_test_transaction(settings):  # type: ignore[no-untyped-def]
    """Django closes the database connection after each request it serves over WSGI;
    here that would end the test's transaction (and let later writes escape it), so the
    closing is held off as Django's own test client does."""
    # Throttles have their own tests; here hundreds of requests are the point.
    settings.GYM_THROTTLE_RATES = {"anon": None, "user": None, "anon_validate": None}
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(params=["anonymous", "token"])
def auth(request, django_user_model) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    if request.param == "anonymous":
        yield {}
        return
    alice = django_user_model.objects.create_user("alice", password="alice-pass-1234")
    yield {"Authorization": token_client(alice).defaults["HTTP_AUTHORIZATION"]}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_matches_the_schema(case, auth) -> None:  # type: ignore[no-untyped-def]
    response = case.call(headers=auth)
    # The request ran in the test's transaction, on the test database.
    assert connection.in_atomic_block
    case.validate_response(response, checks=CHECKS)


# -- what it found, each as a plain test ---------------------------------------------


def test_an_api_address_no_route_matches_answers_the_api_404(anon_client) -> None:  # type: ignore[no-untyped-def]
    # An id that is not a number matches no route: the API's error body, not a page.
    for path in ("/api/evaluations/abc/", "/api/models/%C2%96/", "/api/no-such-thing/"):
        response = anon_client.get(path)
        assert response.status_code == 404 and response["Content-Type"] == "application/json"
        assert response.json() == {
            "errors": [{"code": "not_found", "message": "There is nothing at this address."}]
        }
    page = anon_client.get("/no-such-page/at/all/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def test_mine_without_a_user_is_a_documented_401(anon_client) -> None:  # type: ignore[no-untyped-def]
    raw = json.loads(anon_client.get("/api/schema/?format=json").content)
    for path in (
        "/api/runs/",
        "/api/evaluations/",
        "/api/pairs/evaluations/",
        "/api/probing-runs/",
    ):
        response = anon_client.get(path, {"mine": "true"})
        assert response.status_code == 401, path
        assert "401" in raw["paths"][path]["get"]["responses"], path
    # Lists without `mine` need no user and document no 401.
    assert "401" not in raw["paths"]["/api/suites/"]["get"]["responses"]


def test_the_parquet_export_is_documented(anon_client) -> None:  # type: ignore[no-untyped-def]
    raw = json.loads(anon_client.get("/api/schema/?format=json").content)
    documented = raw["paths"]["/api/results/export/"]["get"]["responses"]["200"]["content"]
    response = anon_client.get("/api/results/export/", {"as": "parquet"})
    assert response.status_code == 200
    assert response["Content-Type"] in documented and "text/csv" in documented
