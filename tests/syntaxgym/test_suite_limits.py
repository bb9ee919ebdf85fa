"""Limits on what a suite may hold: names without invisible or direction-changing
characters, capped lengths of names, tags and descriptions with clear messages, no
condition with only empty regions, and API lists that stay small."""

from __future__ import annotations

import json

import pytest

from suites.syntaxgym import services
from tests.conftest import small_suite

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("char", "label"),
    [
        ("\u202e", "U+202E (right-to-left override)"),
        ("\u2066", "U+2066 (left-to-right isolate)"),
        ("\u200b", "U+200B (zero width space)"),
        ("\u200d", "U+200D (zero width joiner)"),
        ("\ufeff", "U+FEFF (zero width no-break space)"),
        ("\u2028", "U+2028 (line separator)"),
    ],
)
def test_names_refuse_invisible_characters(char: str, label: str, alice) -> None:
    with pytest.raises(services.SuiteInvalid) as refused:
        services.suite_import(source=small_suite(f"harm{char}less"), owner=alice)
    (error,) = refused.value.errors
    assert error.path == "$.meta.name"
    assert label in error.message and "position 5" in error.message


def test_a_name_clash_does_not_tell_the_owner(alice, bob, bob_client) -> None:
    services.suite_import(source=small_suite("taken"), owner=alice)
    response = bob_client.post_form("/upload/", {"text": json.dumps(small_suite("taken"))})
    assert response.status_code == 400
    page = response.content.decode()
    assert "already exists" in page and "alice" not in page


def test_an_all_empty_condition_is_refused_where_it_is(alice_client, anon_client) -> None:
    suite = small_suite("hollow")
    for region in suite["items"][1]["conditions"][0]["regions"]:
        region["content"] = "  "
    response = alice_client.post_form("/upload/", {"text": json.dumps(suite)})
    assert response.status_code == 400
    page = response.content.decode()
    assert "$.items[1].conditions[0].regions" in page
    assert "only empty regions" in page
    # The grid editor checks through the same validation.
    body = anon_client.post(
        "/api/validate/suite/", json.dumps(suite), content_type="application/json"
    ).json()
    assert body["ok"] is False
    assert [e["path"] for e in body["errors"]] == ["$.items[1].conditions[0].regions"]
    # One empty region among others is fine (SyntaxGym suites have them).
    suite["items"][1]["conditions"][0]["regions"][0]["content"] = "The cat"
    assert services.suite_import(source=suite, owner=None).suite.name == "hollow"


def test_long_fields_are_refused_with_the_limit(alice, alice_client) -> None:
    suite = small_suite("long", description="d" * 10_001, tags=["t" * 41, "ok"])
    suite["region_meta"]["2"] = "r" * 201
    with pytest.raises(services.SuiteInvalid) as refused:
        services.suite_import(source=suite, owner=alice)
    by_path = {e.path: e.message for e in refused.value.errors}
    assert "at most 10,000" in by_path["$.meta.description"]
    assert "at most 40 characters" in by_path["$.meta.tags[0]"]
    assert "at most 200" in by_path['$.region_meta["2"]']
    too_many = small_suite("many tags", tags=[f"tag{i}" for i in range(21)])
    with pytest.raises(services.SuiteInvalid, match="keep the 20"):
        services.suite_import(source=too_many, owner=alice)
    # The edit page says the same.
    services.suite_import(source=small_suite("editable"), owner=alice)
    form = {"description": "", "reference": "", "author": "", "comment": "", "tags": "x" * 400}
    response = alice_client.post_form("/suites/editable/edit/", form)
    assert response.status_code == 200 and "at most 40 characters" in response.content.decode()
    form["tags"] = "fine"
    form["description"] = "d" * 10_001
    response = alice_client.post_form("/suites/editable/edit/", form)
    assert "at most 10000 characters" in response.content.decode()


def test_api_lists_leave_out_descriptions(anon_client, alice) -> None:
    for i in range(3):
        services.suite_import(source=small_suite(f"big {i}", description="d" * 10_000), owner=alice)
    listing = anon_client.get("/api/suites/")
    assert listing.status_code == 200
    assert all("description" not in s for s in listing.json()["results"])
    assert len(listing.content) < 5_000
    detail = anon_client.get("/api/suites/big 0/").json()
    assert detail["description"] == "d" * 10_000
