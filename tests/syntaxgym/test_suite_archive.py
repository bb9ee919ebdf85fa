"""Deleting a suite never deletes anyone's results: a suite with evaluations is archived
(gone from the lists, its page and results kept), one without is deleted; the
confirmation page says which will happen."""

from __future__ import annotations

import json

import pytest

from evaluations.models import Evaluation, LanguageModel
from suites.models import Suite
from suites.syntaxgym import services
from tests.conftest import BrowserClient, small_suite, suite_evaluation, token_client

pytestmark = pytest.mark.django_db


def _evaluate(suite: Suite, user) -> Evaluation:
    model, _ = LanguageModel.objects.get_or_create(name="m", display_name="M", source="m")
    return suite_evaluation(model, suite, requested_by=user, status="done", accuracy=0.5)


def test_a_suite_without_results_is_deleted(alice_client, alice) -> None:
    services.suite_import(source=small_suite("lonely", tags=["t"]), owner=alice)
    confirm = alice_client.get("/suites/lonely/delete/").content.decode()
    assert "for good" in confirm and "archived" not in confirm
    response = alice_client.post_form("/suites/lonely/delete/")
    assert response.status_code == 302
    assert not Suite.objects.filter(name="lonely").exists()


def test_a_suite_with_others_results_is_archived_not_deleted(alice_client, alice, bob) -> None:
    suite = services.suite_import(source=small_suite("studied", tags=["agr"]), owner=alice).suite
    evaluation = _evaluate(suite, bob)
    confirm = alice_client.get("/suites/studied/delete/").content.decode()
    assert "1 evaluation" in confirm and "1 of them requested by other people" in confirm
    assert "archived" in confirm and "Archive the suite" in confirm

    response = alice_client.post_form("/suites/studied/delete/", follow=True)
    assert "Archived “studied”" in response.content.decode()
    suite.refresh_from_db()
    assert suite.archived_at is not None
    assert Evaluation.objects.filter(pk=evaluation.pk).exists()
    # Gone from the lists ...
    anon = BrowserClient()
    assert "studied" not in anon.get("/").content.decode()
    assert "studied" not in anon.get("/tags/agr/").content.decode()
    assert [s["name"] for s in anon.get("/api/suites/").json()["results"]] == []
    assert anon.get("/api/tags/").json() == [{"name": "agr", "description": "", "suite_count": 0}]
    # ... but its page and the results stay reachable.
    page = anon.get("/suites/studied/")
    assert page.status_code == 200 and "Archived on" in page.content.decode()
    assert anon.get(f"/evaluations/{evaluation.pk}/").status_code == 200
    assert anon.get("/models/m/").status_code == 200
    # Deleting again changes nothing.
    assert services.suite_delete(suite=suite, user=alice) == "archived"


def test_the_api_archives_and_refuses_new_evaluations(alice, bob) -> None:
    suite = services.suite_import(source=small_suite("api-archived"), owner=alice).suite
    _evaluate(suite, alice)
    client = token_client(alice)
    response = client.delete("/api/suites/api-archived/")
    assert response.status_code == 200 and response.json()["archived_at"]
    request = client.post(
        "/api/evaluations/",
        json.dumps({"model": "m", "suites": ["api-archived"]}),
        content_type="application/json",
    )
    assert request.status_code == 400
    assert "api-archived" in request.json()["errors"][0]["message"]
