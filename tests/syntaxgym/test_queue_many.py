"""Queueing several models at once (page and API) and re-running what is outdated: the
right runs, in one transaction, never twice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, LanguageModel
from evaluations.syntaxgym import services
from suites.models import Suite
from suites.syntaxgym import services as suite_services
from tests.conftest import BrowserClient, small_suite, token_client

pytestmark = pytest.mark.django_db


def _model(name: str, **fields: Any) -> LanguageModel:
    # A hub id: registration checks its shape only, and nothing here runs it.
    model = model_registry.model_register(source=f"org/{name}", name=name)
    if fields:
        LanguageModel.objects.filter(pk=model.pk).update(**fields)
        model.refresh_from_db()
    return model


def _suite(name: str, owner: Any, tags: list[str] | None = None) -> Suite:
    return suite_services.suite_import(source=small_suite(name, tags=tags or []), owner=owner).suite


def _pairs() -> set[tuple[str, str]]:
    return set(Evaluation.objects.values_list("model__name", "suite__name"))


def test_the_form_queues_several_models_on_suites_and_a_tag(alice, alice_client) -> None:
    for name in ("lm-a", "lm-b", "lm-c"):
        _model(name)
    _suite("s1", alice, ["agree"])
    _suite("s2", alice, ["agree"])
    _suite("what? #1 100%", alice)
    _suite("other", alice)
    # lm-a on s1 was asked for before: it is listed, not run again.
    services.evaluation_request(
        model=LanguageModel.objects.get(name="lm-a"), suites=[Suite.objects.get(name="s1")]
    )
    form = {"models": ["lm-a", "lm-b"], "suites": ["what? #1 100%"], "tag": "agree"}
    response = alice_client.post_form("/evaluations/new/", form)
    assert response.status_code == 302
    assert _pairs() == {(m, s) for m in ("lm-a", "lm-b") for s in ("s1", "s2", "what? #1 100%")}
    answer = alice_client.get(response["Location"]).content.decode()
    assert "<strong>5</strong> queued by this request" in answer
    assert "<strong>1</strong> already requested" in answer
    assert answer.count("queued now") == 5 and answer.count("already there") == 1
    # Asking again queues nothing and says so.
    again = alice_client.post_form("/evaluations/new/", form)
    assert Evaluation.objects.count() == 6
    answer = alice_client.get(again["Location"]).content.decode()
    assert "<strong>0</strong> queued by this request" in answer
    assert answer.count("already there") == 6


def test_the_form_keeps_the_single_model_field_and_explains_errors(alice, alice_client) -> None:
    _model("lm-a")
    _suite("s1", alice)
    page = alice_client.get("/evaluations/new/?model=lm-a&suite=s1").content.decode()
    assert 'value="lm-a" id="id_models_0" checked' in page
    assert '<option value="s1" selected data-tags="">' in page
    assert "data-suite-picker" in page and "js/suite-picker.js" in page
    assert (
        alice_client.post_form("/evaluations/new/", {"model": "lm-a", "suites": ["s1"]}).status_code
        == 302
    )
    refused = alice_client.post_form("/evaluations/new/", {"suites": ["s1"]})
    assert refused.status_code == 400 and "This field is required" in refused.content.decode()
    refused = alice_client.post_form(
        "/evaluations/new/", {"models": ["lm-a", "nope"], "suites": ["s1"]}
    )
    assert (
        "Select a valid choice. nope is not one of the available choices."
        in refused.content.decode()
    )
    assert Evaluation.objects.count() == 1


def _api(client, path: str, body: dict) -> Any:
    return client.send_json("POST", path, json.dumps(body))


def test_the_api_queues_several_models_and_marks_what_was_there(alice, alice_client) -> None:
    _model("lm-a")
    _model("lm-b")
    _model("lm-hidden", is_hidden=True)
    _suite("s1", alice, ["agree"])
    _suite("s2", alice)
    first = _api(alice_client, "/api/evaluations/", {"model": "lm-a", "suites": ["s2"]})
    assert first.status_code == 201 and first.json()[0]["queued_now"] is True
    body = {"models": ["lm-a", "lm-b"], "suites": ["s2"], "tag": "agree"}
    response = _api(alice_client, "/api/evaluations/", body)
    assert response.status_code == 201
    got = {(e["model"], e["suite"]): e["queued_now"] for e in response.json()}
    assert got == {
        ("lm-a", "s2"): False,
        ("lm-a", "s1"): True,
        ("lm-b", "s2"): True,
        ("lm-b", "s1"): True,
    }
    again = _api(alice_client, "/api/evaluations/", body)
    assert again.status_code == 200 and not any(e["queued_now"] for e in again.json())
    # Every name is checked before anything is written.
    bad = _api(
        alice_client,
        "/api/evaluations/",
        {"models": ["lm-a", "nope", "lm-hidden"], "suites": ["s1"]},
    )
    assert bad.status_code == 400
    messages = [e["message"] for e in bad.json()["errors"]]
    assert "no model named 'nope'" in messages and "no model named 'lm-hidden'" in messages
    assert _api(alice_client, "/api/evaluations/", {"suites": ["s1"]}).status_code == 400
    assert Evaluation.objects.count() == 4


def _outdated_site(alice: Any) -> dict[str, Any]:
    """lm-a and lm-b done on the old content of s1 and s2; then s1 and s2 change. lm-c
    has a failed run on s1's new content (not outdated: it was asked for); the hidden
    model and the archived suite take no runs; s3 did not change."""
    models = {n: _model(n) for n in ("lm-a", "lm-b", "lm-c", "lm-hidden")}
    suites = {n: _suite(n, alice) for n in ("s1", "s2", "s3", "gone")}
    services.evaluations_request(models=models.values(), suites=suites.values())
    Evaluation.objects.update(status="done", accuracy=0.5)
    for name in ("s1", "s2", "gone"):
        changed = small_suite(name)
        changed["items"][0]["conditions"][0]["regions"][0]["content"] = "The horse"
        suite_services.suite_replace(suite=suites[name], user=alice, source=changed)
    LanguageModel.objects.filter(name="lm-hidden").update(is_hidden=True)
    suite_services.suite_delete(suite=suites["gone"], user=alice)  # archived: it has results
    s1 = Suite.objects.get(name="s1")
    services.evaluation_request(model=models["lm-c"], suites=[s1])
    Evaluation.objects.filter(model__name="lm-c", content_hash=s1.content_hash).update(
        status="failed"
    )
    return {"s1": s1, "s2": Suite.objects.get(name="s2")}


def _current_pairs() -> set[tuple[str, str]]:
    return {
        (e.model.name, e.suite.name)
        for e in Evaluation.objects.select_related("model", "suite")
        if not e.outdated
    }


def test_rerun_outdated_of_a_suite_queues_exactly_the_outdated_models(alice, bob_client) -> None:
    suites = _outdated_site(alice)
    before = _current_pairs()
    page = bob_client.get("/suites/s1/").content.decode()
    assert "Re-run 2 outdated" in page
    response = bob_client.post_form("/evaluations/rerun-outdated/", {"suite": "s1"})
    assert response.status_code == 302
    assert _current_pairs() - before == {("lm-a", "s1"), ("lm-b", "s1")}
    new = Evaluation.objects.filter(suite=suites["s1"], content_hash=suites["s1"].content_hash)
    assert all(
        e.requested_by is not None and e.requested_by.username == "bob"
        for e in new.exclude(model__name="lm-c")
    )
    assert "Re-run" not in bob_client.get("/suites/s1/").content.decode()
    # Nothing is queued twice: asking again finds nothing outdated.
    count = Evaluation.objects.count()
    again = bob_client.post_form("/evaluations/rerun-outdated/", {"suite": "s1"})
    assert again["Location"] == "/suites/s1/" and Evaluation.objects.count() == count


def test_rerun_outdated_of_a_model_queues_its_outdated_suites(alice, bob_client) -> None:
    _outdated_site(alice)
    before = _current_pairs()
    assert "Re-run 2 outdated" in bob_client.get("/models/lm-a/").content.decode()
    response = bob_client.post_form("/evaluations/rerun-outdated/", {"model": "lm-a"})
    assert _current_pairs() - before == {("lm-a", "s1"), ("lm-a", "s2")}
    answer = bob_client.get(response["Location"]).content.decode()
    assert "<strong>2</strong> queued by this request" in answer


def test_rerun_outdated_through_the_api(alice, bob) -> None:
    _outdated_site(alice)
    anonymous = BrowserClient()
    assert (
        anonymous.post(
            "/api/evaluations/rerun-outdated/", {"suite": "s2"}, content_type="application/json"
        ).status_code
        == 401
    )
    client = token_client(bob)
    response = client.post(
        "/api/evaluations/rerun-outdated/", {"suite": "s2"}, content_type="application/json"
    )
    assert response.status_code == 201
    assert sorted(e["model"] for e in response.json()) == ["lm-a", "lm-b", "lm-c"]
    assert all(e["queued_now"] and not e["outdated"] for e in response.json())
    again = client.post(
        "/api/evaluations/rerun-outdated/", {"suite": "s2"}, content_type="application/json"
    )
    assert again.status_code == 200 and again.json() == []
    everything = client.post(
        "/api/evaluations/rerun-outdated/", {"model": "lm-b"}, content_type="application/json"
    )
    assert [(e["model"], e["suite"]) for e in everything.json()] == [("lm-b", "s1")]
    for body in ({}, {"suite": "nope"}, {"model": "nope"}):
        assert (
            client.post(
                "/api/evaluations/rerun-outdated/", body, content_type="application/json"
            ).status_code
            == 400
        )


def test_rerun_outdated_needs_a_signed_in_user(alice, anon_client) -> None:
    _outdated_site(alice)
    assert "Re-run" not in anon_client.get("/suites/s1/").content.decode()
    response = anon_client.post_form("/evaluations/rerun-outdated/", {"suite": "s1"})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert not any(
        e.model.name in {"lm-a", "lm-b"}
        for e in Evaluation.objects.filter(suite__name="s1", status="queued")
    )
