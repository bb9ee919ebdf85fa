"""Model registry and the evaluation request pages and API."""

from __future__ import annotations

import json

import pytest

from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, LanguageModel
from suites.syntaxgym import services as suite_services
from tests.conftest import signed_in_client, small_suite

pytestmark = pytest.mark.django_db


def test_register_needs_login(anon_client) -> None:
    response = anon_client.get("/models/register/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_register_detects_kind_and_refuses_duplicates(alice_client, tiny_gpt2) -> None:
    response = alice_client.post_form(
        "/models/register/", {"source": str(tiny_gpt2), "display_name": "Tiny", "name": "tiny"}
    )
    assert response.status_code == 302
    model = LanguageModel.objects.get(name="tiny")
    assert (
        model.kind == "causal"
        and model.registered_by is not None
        and model.registered_by.username == "alice"
    )
    response = alice_client.post_form(
        "/models/register/", {"source": str(tiny_gpt2), "name": "tiny"}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "already registered" in page


def test_register_unknown_hub_id_offline_is_kept_as_unknown(alice_client, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    response = alice_client.post_form("/models/register/", {"source": "someone/not-here-model"})
    assert response.status_code == 302
    assert LanguageModel.objects.get(source="someone/not-here-model").kind == "unknown"


def test_models_api_and_hidden_models(anon_client, alice, dana_client, tiny_gpt2) -> None:
    model_registry.model_register(source=str(tiny_gpt2), name="tiny", user=alice)
    model_registry.model_register(source="x/hidden", name="hidden")
    LanguageModel.objects.filter(name="hidden").update(is_hidden=True)
    names = [m["name"] for m in anon_client.get("/api/models/").json()["results"]]
    assert names == ["tiny"]
    assert anon_client.get("/models/").content.decode().count("hidden") == 0
    staff_names = [m["name"] for m in dana_client.get("/api/models/").json()["results"]]
    assert sorted(staff_names) == ["hidden", "tiny"]
    assert anon_client.get("/api/models/tiny/").json()["kind"] == "causal"


def test_a_hidden_model_is_hidden_alike_in_the_api_and_the_pages(
    alice, bob, dana, anon_client
) -> None:
    # Seen by staff and by whoever registered it, in both; a 404 for everyone else, in
    # both (the page answered 200 while the API answered 404).
    model_registry.model_register(source="x/secret", name="secret", user=alice)
    model_registry.model_set_hidden(model=LanguageModel.objects.get(), hidden=True)
    seen = {"anon": anon_client, "bob": signed_in_client(bob), "alice": signed_in_client(alice)}
    seen["dana"] = signed_in_client(dana)
    answers = {
        who: (
            client.get("/api/models/secret/").status_code,
            client.get("/models/secret/").status_code,
            [m["name"] for m in client.get("/api/models/").json()["results"]],
            "/models/secret/" in client.get("/models/").content.decode(),
        )
        for who, client in seen.items()
    }
    assert answers == {
        "anon": (404, 404, [], False),
        "bob": (404, 404, [], False),
        "alice": (200, 200, ["secret"], True),
        "dana": (200, 200, ["secret"], True),
    }


def test_request_page_by_tag_and_evaluation_pages(
    alice, alice_client, anon_client, tiny_gpt2
) -> None:
    for name in ("a1", "a2"):
        suite_services.suite_import(source=small_suite(name, tags=["agree"]), owner=alice)
    suite_services.suite_import(source=small_suite("other"), owner=alice)
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    assert anon_client.get("/evaluations/new/").status_code == 302
    response = alice_client.post_form("/evaluations/new/", {"model": "tiny", "tag": "agree"})
    assert response.status_code == 302 and response["Location"].startswith("/evaluations/?ids=")
    assert sorted(Evaluation.objects.values_list("suite__name", flat=True)) == ["a1", "a2"]
    listing = anon_client.get(response["Location"]).content.decode()
    assert "a1" in listing and "a2" in listing and "Queued" in listing
    evaluation = Evaluation.objects.first()
    assert evaluation is not None
    detail = anon_client.get(f"/evaluations/{evaluation.pk}/").content.decode()
    assert "0 / 4" in detail and "progress.js" in detail
    api = anon_client.get(f"/api/evaluations/{evaluation.pk}/").json()
    assert api["status"] == "queued" and api["progress_total"] == 4 and api["outdated"] is False
    response = alice_client.post_form("/evaluations/new/", {"model": "tiny"})
    assert response.status_code == 400 and "Choose at least one suite" in response.content.decode()


def test_api_request_validation(alice_client, alice, tiny_gpt2) -> None:
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    response = alice_client.post(
        "/api/evaluations/",
        json.dumps({"model": "tiny", "suites": ["nope"]}),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=alice_client.csrf_token(),
    )
    assert response.status_code == 400 and "no suite named 'nope'" in response.content.decode()


def test_staff_hide_and_show_a_model(alice_client, dana_client, anon_client, tiny_gpt2) -> None:
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    assert alice_client.post_form("/models/tiny/visibility/", {"hidden": "1"}).status_code == 403
    assert "Hide from leaderboards" not in alice_client.get("/models/tiny/").content.decode()
    assert "Hide from leaderboards" in dana_client.get("/models/tiny/").content.decode()
    assert dana_client.post_form("/models/tiny/visibility/", {"hidden": "1"}).status_code == 302
    assert LanguageModel.objects.get(name="tiny").is_hidden
    assert anon_client.get("/api/models/").json()["results"] == []
    dana_client.post_form("/models/tiny/visibility/", {"hidden": "0"})
    assert not LanguageModel.objects.get(name="tiny").is_hidden
