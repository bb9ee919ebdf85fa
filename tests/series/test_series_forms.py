"""The series forms (register, evaluate) through a CSRF-enforcing client: signed in only,
the API's messages at their fields, nothing written on a refusal, the series owned by
whoever registered it, and the runs asked for member by member as the API asks."""

from __future__ import annotations

import json
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from evaluations.models import Evaluation, ModelSeries
from evaluations.training import series as series_services
from suites.syntaxgym import services as suite_services
from tests.conftest import small_suite, token_client
from tests.series.conftest import TRAINER_STEPS, copy_model

pytestmark = pytest.mark.django_db


def api_message(alice: Any, body: dict[str, Any]) -> tuple[str, str]:
    """(path, message) of the API's first error for `body`."""
    response = token_client(alice).post(
        "/api/model-series/", json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    error = response.json()["errors"][0]
    return error["path"], error["message"]


def field_errors(response: Any, field: str) -> str:
    """The text of `field`'s error list on the page."""
    form = response.context["form"]
    return " ".join(form.errors.get(field, []))


def test_registering_needs_a_sign_in_and_the_csrf_token(anon_client, alice_client) -> None:
    page = anon_client.get("/series/register/")
    assert page.status_code == 302 and page["Location"].startswith("/accounts/login/")
    refused = alice_client.post("/series/register/", {"name": "x", "folder": "x"})
    assert refused.status_code == 403  # no CSRF token
    assert not ModelSeries.objects.exists()
    shown = alice_client.get("/series/register/")
    assert shown.status_code == 200 and b'name="folder"' in shown.content


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "s", "folder": "no-such-folder"}, "folder"),
        ({"name": "s"}, "folder"),
        ({"name": "s", "source": "HUB", "revisions": "step1000 ..x"}, "revisions"),
        ({"name": "s", "source": "HUB", "pattern": "step", "steps": "1"}, "pattern"),
        ({"name": "s", "source": "HUB", "pattern": "step{N}"}, "steps"),
        ({"name": "register", "source": "HUB", "revisions": "step1000"}, "name"),
        ({"name": "s", "source": "HUB", "revisions": "step1000 step2000", "steps": "1"}, "steps"),
        ({"name": "s", "source": "HUB", "revisions": "step1000 step2000", "steps": "5 5"}, "steps"),
        ({"name": "s", "source": "owner/model", "revisions": "main-a"}, "revisions"),
    ],
)
def test_the_register_form_shows_the_apis_messages_and_keeps_nothing(
    alice, alice_client, hub_standin: Path, body: dict[str, str], field: str
) -> None:
    body = {k: v.replace("HUB", str(hub_standin)) for k, v in body.items()}
    as_api: dict[str, Any] = {
        k: (v.split() if k in ("revisions", "steps") else v) for k, v in body.items()
    }
    if "steps" in as_api:
        as_api["steps"] = [int(s) for s in as_api["steps"]]
    path, message = api_message(alice, as_api)
    assert path.split(".")[1] == field
    response = alice_client.post_form("/series/register/", {"threshold": "0.8", **body})
    assert response.status_code == 400
    assert message in field_errors(response, field)
    assert message in unescape(response.content.decode())
    assert not ModelSeries.objects.exists()


def test_steps_that_are_not_numbers_are_refused_at_their_field(alice_client) -> None:
    response = alice_client.post_form(
        "/series/register/",
        {"name": "s", "source": "x", "pattern": "step{N}", "steps": "1000, ten", "threshold": 1},
    )
    assert response.status_code == 400
    assert "'ten' is not a step" in field_errors(response, "steps")


def test_a_trainer_folder_and_revisions_registered_from_the_form(
    alice, alice_client, trainer_folder: Path, hub_standin: Path
) -> None:
    response = alice_client.post_form(
        "/series/register/",
        {"name": "trainer", "folder": str(trainer_folder), "threshold": "0.7"},
    )
    assert response.status_code == 302 and response["Location"] == "/series/trainer/"
    made = ModelSeries.objects.get(name="trainer")
    assert made.registered_by == alice and made.threshold == 0.7
    assert [m.step for m in made.members.order_by("position")] == list(TRAINER_STEPS)

    response = alice_client.post_form(
        "/series/register/",
        {
            "name": "babylm",
            "source": str(hub_standin),
            "revisions": "chck_10M, chck_1M\nchck_100M",
            "threshold": "0.8",
        },
    )
    assert response.status_code == 302
    babylm = ModelSeries.objects.get(name="babylm")
    assert babylm.unit == "words"
    assert [m.tokens for m in babylm.members.order_by("position")] == [10**6, 10**7, 10**8]
    listing = alice_client.get("/series/")
    assert b"/series/register/" in listing.content


def test_steps_beside_revisions_from_the_form_are_the_members_steps(
    alice_client, tiny_gpt2: Path, hub_standin: Path
) -> None:
    """Revisions whose names say no step take the steps given, one per revision listed;
    with tokens_per_step the tokens count from them."""
    for revision in ("main-a", "main-b"):
        copy_model(tiny_gpt2, hub_standin / revision)
    response = alice_client.post_form(
        "/series/register/",
        {
            "name": "named",
            "source": str(hub_standin),
            "revisions": "main-b, main-a",
            "steps": "2000, 1000",
            "tokens_per_step": "8",
            "threshold": "0.8",
        },
    )
    assert response.status_code == 302, field_errors(response, "steps")
    made = ModelSeries.objects.get(name="named")
    members = [
        (m.model.source.rsplit("/", 1)[-1], m.step, m.tokens)
        for m in made.members.select_related("model").order_by("position")
    ]
    assert members == [("main-a", 1000, 8000), ("main-b", 2000, 16000)]
    assert made.unit == "tokens"


def test_the_evaluate_form_asks_for_every_members_runs(
    alice, alice_client, anon_client, trainer_folder: Path, _private_broker
) -> None:
    series_services.series_register(name="trainer", folder=str(trainer_folder), user=alice)
    suite = suite_services.suite_import(source=small_suite("agree"), owner=alice).suite
    page = alice_client.get("/series/trainer/")
    assert b'id="series-evaluate"' in page.content
    assert b'id="series-evaluate"' not in anon_client.get("/series/trainer/").content

    empty = alice_client.post_form("/series/trainer/evaluate/", {})
    assert empty.status_code == 400
    assert "give suites, tags, pair_sets or probing_tasks" in unescape(empty.content.decode())
    unknown = alice_client.post_form("/series/trainer/evaluate/", {"suites": ["ghost"]})
    assert unknown.status_code == 400 and "ghost" in field_errors(unknown, "suites")
    assert not Evaluation.objects.exists()
    assert anon_client.post("/series/trainer/evaluate/", {"suites": [suite.name]}).status_code in (
        302,
        403,
    )

    done = alice_client.post_form("/series/trainer/evaluate/", {"suites": [suite.name]})
    assert done.status_code == 302 and done["Location"] == "/series/trainer/"
    members = ModelSeries.objects.get(name="trainer").members.order_by("position")
    asked = Evaluation.objects.filter(suite=suite).order_by("pk")
    assert [e.model_id for e in asked] == [m.model_id for m in members]  # member by member
    assert ModelSeries.objects.get(name="trainer").suites.get() == suite
