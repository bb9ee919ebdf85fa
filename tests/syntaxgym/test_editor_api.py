"""The grid editor's server side: the two validation endpoints (the importer's checks and
messages, without saving), the editor pages, "copy to my suites", and who may save."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.staticfiles import finders

from suites import catalog_services, formats
from suites.models import Suite
from suites.syntaxgym import selectors, services
from tests.conftest import BrowserClient, small_suite

pytestmark = pytest.mark.django_db


def validate(client: BrowserClient, body: Any, query: str = "") -> dict[str, Any]:
    raw = body if isinstance(body, str | bytes) else json.dumps(body)
    response = client.send_json("POST", f"/api/validate/suite/{query}", raw)
    assert response.status_code == 200, response.content
    return response.json()


def check_formula(client: BrowserClient, formula: str, **extra: Any) -> dict[str, Any]:
    body = {"formula": formula, "regions": [1, 2, 3], "conditions": ["match", "mismatch"], **extra}
    response = client.send_json("POST", "/api/validate/formula/", json.dumps(body))
    assert response.status_code == 200, response.content
    return response.json()


# -- /api/validate/suite/ ---------------------------------------------------------------


def test_valid_suite_comes_back_canonical(alice_client) -> None:
    data = small_suite("grid one", tags=["Agreement"])
    data["items"][0]["conditions"][0]["regions"][0]["content"] = " The dog "
    body = validate(alice_client, data)
    assert body["ok"] is True and body["errors"] == []
    assert body["source_format"] == formats.CURRENT
    # Stray spaces are stripped and noted, exactly as on import.
    assert body["suite"]["items"][0]["conditions"][0]["regions"][0]["content"] == "The dog"
    assert any("leading/trailing spaces" in w for w in body["warnings"])
    assert body["suite"]["meta"]["tags"] == ["agreement"]
    assert formats.parse_suite_data(data).suite == body["suite"]
    assert not Suite.objects.exists()


def test_errors_point_at_items_conditions_and_regions(alice_client) -> None:
    data = small_suite("grid errors")
    data["items"][1]["item_number"] = 1  # a duplicate item number
    data["items"][0]["conditions"][1]["condition_name"] = " "  # an empty condition
    del data["items"][1]["conditions"][0]["regions"][2]  # a missing region
    body = validate(alice_client, data)
    assert body["ok"] is False and body["suite"] is None
    paths = [e["path"] for e in body["errors"]]
    assert "$.items[0].conditions[1].condition_name" in paths
    # The schema stops at the empty name; once it is fixed, the deeper checks speak.
    data["items"][0]["conditions"][1]["condition_name"] = "mismatch"
    body = validate(alice_client, data)
    by_path = {e["path"]: e["message"] for e in body["errors"]}
    assert "used twice" in by_path["$.items[1].item_number"]
    assert "has no region 3" in by_path["$.items[1].conditions[0].regions"]
    # The same errors, word for word, as a save through the importer gives.
    with pytest.raises(services.SuiteInvalid) as refused:
        services.suite_import(source=data, owner=None)
    assert [e.as_dict() for e in refused.value.errors] == body["errors"]


def test_malformed_json_is_located(alice_client) -> None:
    body = validate(alice_client, b'{"meta": ')
    assert body["ok"] is False and body["suite"] is None
    assert body["errors"][0]["path"] == "$"


def test_name_clash_uses_the_importers_message(alice_client, bob) -> None:
    services.suite_import(source=small_suite("taken"), owner=bob)
    body = validate(alice_client, small_suite("taken"))
    assert body["ok"] is False
    [error] = body["errors"]
    assert error["path"] == "$.meta.name" and "already exists" in error["message"]
    assert "bob" not in error["message"]  # who owns a suite is not told to others
    # The suite being edited may keep its own name.
    assert validate(alice_client, small_suite("taken"), "?replace=taken")["ok"] is True
    # A clash is reported even while the rest of the suite still has errors.
    broken = small_suite("taken")
    broken["items"] = []
    paths = {e["path"] for e in validate(alice_client, broken)["errors"]}
    assert paths == {"$.items", "$.meta.name"}


def test_csv_import_and_csv_export(alice_client) -> None:
    canonical = formats.parse_suite_data(small_suite("as csv")).suite
    assert canonical is not None
    csv_text = formats.to_csv_text(canonical)
    body = validate(alice_client, {"csv": csv_text, "meta": {"name": "as csv"}}, "?as=csv")
    assert body["ok"] is True
    assert body["suite"]["items"] == canonical["items"]
    assert body["suite"]["region_meta"] == canonical["region_meta"]
    body = validate(alice_client, small_suite("as csv"), "?to=csv")
    assert body["csv"] == csv_text
    bad = alice_client.send_json(
        "POST", "/api/validate/suite/?as=csv", json.dumps({"text": "no csv key"})
    )
    assert bad.status_code == 400


def test_validation_needs_csrf_from_a_session(alice_client) -> None:
    response = alice_client.post(
        "/api/validate/suite/", json.dumps(small_suite()), content_type="application/json"
    )
    assert response.status_code == 403


# -- /api/validate/formula/ -------------------------------------------------------------


def test_formula_ok_gives_the_canonical_text(anon_client) -> None:
    body = check_formula(anon_client, "[ (2;%mismatch%) ]>(2;%match%)")
    assert body == {"ok": True, "canonical": "(2;%mismatch%) > (2;%match%)", "errors": []}


def test_formula_syntax_error_has_a_column(anon_client) -> None:
    body = check_formula(anon_client, "(2;%mismatch%) > (2;%match%")
    assert body["ok"] is False and body["canonical"] is None
    [error] = body["errors"]
    assert isinstance(error["col"], int) and error["col"] >= 1
    assert error["message"]


def test_formula_unknown_condition_and_region_point_at_the_reference(anon_client) -> None:
    formula = "(2;%mismatch%) > (7;%mtch%)"
    body = check_formula(anon_client, formula)
    assert body["ok"] is False
    by_col = {e["col"]: e["message"] for e in body["errors"]}
    region_col = formula.index("7;") + 1
    condition_col = formula.index("mtch") + 1
    assert by_col[region_col].startswith("region 7 does not exist")
    assert "did you mean 'match'" in by_col[condition_col]
    # The importer says the same about the same formula.
    data = small_suite("formula check")
    data["predictions"] = [{"type": "formula", "formula": formula}]
    with pytest.raises(services.SuiteInvalid) as refused:
        services.suite_import(source=data, owner=None)
    messages = " ".join(e.message for e in refused.value.errors)
    assert all(e["message"] in messages for e in body["errors"])


def test_formula_bad_request(anon_client) -> None:
    for body in (
        {"regions": [1]},
        {"formula": "x", "regions": ["1"]},
        {"formula": "x", "conditions": [1]},
    ):
        response = anon_client.post(
            "/api/validate/formula/", json.dumps(body), content_type="application/json"
        )
        assert response.status_code == 400


# -- pages ------------------------------------------------------------------------------


def test_editor_pages_need_login(anon_client, alice) -> None:
    services.suite_import(source=small_suite("mine"), owner=alice)
    for path in ("/editor/", "/suites/mine/grid/"):
        response = anon_client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_new_suite_page_uses_npm_tabulator(alice_client) -> None:
    page = alice_client.get("/editor/").content.decode()
    assert "/static/vendor/tabulator/js/tabulator.min.js" in page
    assert "/static/vendor/tabulator/css/tabulator.min.css" in page
    # Native ES modules served as static files: no bundle, no build step.
    assert '<script type="module" src="/static/js/editor/main.js"' in page
    assert "cdn" not in page.lower()
    assert 'id="suite-data"' in page and 'id="editor-config"' in page
    assert finders.find("vendor/tabulator/js/tabulator.min.js")
    assert finders.find("css/editor.css")
    modules = ["main", "context", "dom", "model", "undo", "grid", "panels", "predictions"]
    for name in [*modules, "checks", "io"]:
        assert finders.find(f"js/editor/{name}.js"), name


def test_owner_edits_others_see_it_read_only(alice_client, bob_client, alice) -> None:
    suite = services.suite_import(source=small_suite("alice's"), owner=alice).suite
    page = alice_client.get("/suites/alice's/grid/")
    assert page.status_code == 200 and page.context["mode"] == "edit"
    assert page.context["suite_data"] == selectors.suite_canonical(suite)
    assert "Save suite" in page.content.decode()
    page = bob_client.get("/suites/alice's/grid/")
    assert page.context["mode"] == "view"
    html = page.content.decode()
    assert "Save suite" not in html and "Copy to my suites" in html
    assert bob_client.get("/suites/nope/grid/").status_code == 404


def test_suite_page_links_to_the_editor(alice_client, bob_client, anon_client, alice) -> None:
    services.suite_import(source=small_suite("linked"), owner=alice)
    assert "Open in grid editor" in alice_client.get("/suites/linked/").content.decode()
    html = bob_client.get("/suites/linked/").content.decode()
    assert "Copy to my suites" in html and "Open in grid editor" not in html
    html = anon_client.get("/suites/linked/").content.decode()
    assert "Copy to my suites" not in html and "Open in grid editor" not in html
    assert 'href="/editor/"' in alice_client.get("/").content.decode()


# -- copy -------------------------------------------------------------------------------


def test_copy_to_my_suites(bob_client, alice, bob) -> None:
    original = services.suite_import(source=small_suite("shared"), owner=alice).suite
    response = bob_client.post_form("/suites/shared/copy/")
    assert response.status_code == 302 and response["Location"] == "/suites/shared%20(copy)/grid/"
    copy = Suite.objects.get(name="shared (copy)")
    assert copy.owner == bob and copy.content_hash == original.content_hash
    assert selectors.suite_canonical(copy)["items"] == selectors.suite_canonical(original)["items"]
    bob_client.post_form("/suites/shared/copy/")
    assert Suite.objects.filter(name="shared (copy 2)", owner=bob).exists()
    original.refresh_from_db()
    assert original.owner == alice and original.name == "shared"


def test_copy_service_takes_the_next_free_name_and_stops(alice, bob, monkeypatch) -> None:
    original = services.suite_import(source=small_suite("busy"), owner=alice).suite
    services.suite_import(source=small_suite("busy (copy)"), owner=alice)
    assert services.suite_copy(suite=original, owner=bob).suite.name == "busy (copy 2)"
    # Every name it may try is taken: a clear refusal, and no new suite.
    monkeypatch.setattr(services, "MAX_COPY_ATTEMPTS", 2)
    before = Suite.objects.count()
    with pytest.raises(services.NoFreeName, match="rename some copies first"):
        services.suite_copy(suite=original, owner=bob)
    assert Suite.objects.count() == before


def test_copy_needs_post_login_and_csrf(anon_client, bob_client, alice) -> None:
    services.suite_import(source=small_suite("guarded"), owner=alice)
    response = anon_client.post_form("/suites/guarded/copy/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert bob_client.get("/suites/guarded/copy/").status_code == 405
    assert bob_client.post("/suites/guarded/copy/").status_code == 403  # no CSRF token
    assert bob_client.post_form("/suites/missing/copy/").status_code == 404
    assert Suite.objects.count() == 1


def test_copy_names_fit_the_limit() -> None:
    assert services.copy_name("x", 1) == "x (copy)" and services.copy_name("x", 3) == "x (copy 3)"
    long = "n" * catalog_services.NAME_MAX_LENGTH
    assert len(services.copy_name(long, 12)) == catalog_services.NAME_MAX_LENGTH
    assert services.copy_name(long, 12).endswith(" (copy 12)")


# -- saving (the editor posts to the suites API) ----------------------------------------


def test_only_the_owner_saves_through_the_editor_path(alice_client, bob_client, alice) -> None:
    suite = services.suite_import(source=small_suite("saved"), owner=alice).suite
    edited = selectors.suite_canonical(suite)
    edited["items"][0]["conditions"][1]["regions"][1]["content"] = "were"
    body = json.dumps(edited)
    denied = bob_client.send_json("PUT", "/api/suites/saved/", body)
    assert denied.status_code == 403
    assert (
        alice_client.put("/api/suites/saved/", body, content_type="application/json").status_code
        == 403
    )
    old_hash = suite.content_hash
    response = alice_client.send_json("PUT", "/api/suites/saved/", body)
    assert response.status_code == 200, response.content
    suite.refresh_from_db()
    # Same row (evaluations keep pointing at it), new content hash.
    assert suite.content_hash != old_hash and Suite.objects.count() == 1
    assert selectors.suite_canonical(suite) == formats.parse_suite_data(edited).suite


def test_invalid_save_writes_nothing(alice_client, alice) -> None:
    suite = services.suite_import(source=small_suite("kept"), owner=alice).suite
    before = selectors.suite_canonical(suite)
    broken = dict(before, predictions=[{"type": "formula", "formula": "(2;%nope%) > (2;%match%)"}])
    broken["items"] = [*before["items"], before["items"][0]]  # a duplicate item too
    response = alice_client.send_json("PUT", "/api/suites/kept/", json.dumps(broken))
    assert response.status_code == 400
    paths = {e["path"] for e in response.json()["errors"]}
    assert {"$.items[2].item_number", "$.predictions[0].formula"} <= paths
    suite.refresh_from_db()
    assert selectors.suite_canonical(suite) == before
