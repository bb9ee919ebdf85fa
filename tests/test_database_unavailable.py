"""A request whose database connection is lost on the way answers 503 with Retry-After
(the one error shape in the API, a plain page otherwise), not 500: the soak test's
PostgreSQL restart (benchmarks/soak.py) found requests in flight answering 500."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from django.db import InterfaceError, OperationalError

from tests.conftest import BrowserClient, token_client

pytestmark = pytest.mark.django_db

LOST = OperationalError("terminating connection due to administrator command")


def test_api_answers_503_in_the_one_error_shape(alice) -> None:
    with mock.patch("suites.syntaxgym.api.services.suite_import", side_effect=LOST):
        response = token_client(alice).post(
            "/api/suites/", json.dumps({"meta": {"name": "x"}}), content_type="application/json"
        )
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    (error,) = response.json()["errors"]
    assert error["code"] == "database_unavailable"
    assert "ask again" in error["message"]


def test_page_answers_503() -> None:
    closed = InterfaceError("connection already closed")
    with mock.patch("suites.syntaxgym.views.selectors.suite_list", side_effect=closed):
        response = BrowserClient().get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "ask again in a moment" in response.content.decode()


def test_other_errors_stay_500() -> None:
    client = BrowserClient(raise_request_exception=False)
    with mock.patch("suites.syntaxgym.views.selectors.suite_list", side_effect=KeyError("x")):
        assert client.get("/").status_code == 500
