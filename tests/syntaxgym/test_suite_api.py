"""The REST API for suites: list/search/filter, detail, export, upload with located
errors, 413, delete permissions, token and session auth, the OpenAPI schema and docs."""

from __future__ import annotations

import json

import pytest

from suites.models import Suite
from suites.syntaxgym import services
from tests.conftest import BrowserClient, shared_files, small_suite, token_client

pytestmark = pytest.mark.django_db


def test_list_search_tag_and_pagination(anon_client, alice) -> None:
    services.suite_import(
        source=small_suite("one", tags=["npi"], description="needle"), owner=alice
    )
    services.suite_import(source=small_suite("two"), owner=alice)
    body = anon_client.get("/api/suites/").json()
    assert body["count"] == 2 and [s["name"] for s in body["results"]] == ["one", "two"]
    assert body["results"][0]["tags"] == ["npi"] and body["results"][0]["owner"] == "alice"
    assert [s["name"] for s in anon_client.get("/api/suites/?search=needle").json()["results"]] == [
        "one"
    ]
    assert [s["name"] for s in anon_client.get("/api/suites/?tag=npi").json()["results"]] == ["one"]
    assert [
        s["name"] for s in anon_client.get("/api/suites/?ordering=-name").json()["results"]
    ] == ["two", "one"]
    assert anon_client.get("/api/tags/").json() == [
        {"name": "npi", "description": "", "suite_count": 1}
    ]


def test_detail_and_export(anon_client, alice) -> None:
    services.suite_import(source=small_suite("det"), owner=alice)
    body = anon_client.get("/api/suites/det/").json()
    assert body["regions"] == [
        {"number": 1, "name": "Subject"},
        {"number": 2, "name": "Verb"},
        {"number": 3, "name": "End"},
    ]
    assert body["conditions"] == ["match", "mismatch"]
    assert body["predictions"][0]["formula"] == "(2;%mismatch%) > (2;%match%)"
    exported = anon_client.get("/api/suites/det/export/").json()
    assert exported["items"][1]["conditions"][1]["regions"][1] == {
        "region_number": 2,
        "content": "are",
    }
    csv_text = anon_client.get("/api/suites/det/export/?as=csv").content.decode()
    assert csv_text.startswith("item_number,condition_name,region_number,region_name,content")
    assert anon_client.get("/api/suites/missing/").status_code == 404


def test_post_needs_auth(anon_client) -> None:
    response = anon_client.post(
        "/api/suites/", json.dumps(small_suite()), content_type="application/json"
    )
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
    assert Suite.objects.count() == 0


def test_post_with_token_creates(alice) -> None:
    client = token_client(alice)
    response = client.post(
        "/api/suites/", json.dumps(small_suite("api one")), content_type="application/json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "api one" and body["owner"] == "alice" and body["warnings"] == []
    assert Suite.objects.get(name="api one").owner == alice


def test_post_2019_format_converts(alice) -> None:
    files = [
        p
        for p in shared_files("syntaxgym-misc")
        if p.name == "syntaxgym-core__data__test__test_in.json"
    ]
    if not files:
        pytest.skip("shared data not found")
    client = token_client(alice)
    response = client.post("/api/suites/", files[0].read_bytes(), content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["predictions"][0]["formula"] == "(3;%that%) > (3;%what%)"


def test_post_errors_are_located_and_nothing_is_saved(alice) -> None:
    client = token_client(alice)
    bad = small_suite("bad api")
    bad["region_meta"]["4"] = "Ghost"
    bad["predictions"].append({"type": "formula", "formula": "(9;%match%) > (2;%nope%)"})
    response = client.post("/api/suites/", json.dumps(bad), content_type="application/json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors and all(set(e) == {"code", "path", "message", "location"} for e in errors)
    paths = {e["path"] for e in errors}
    assert any(p.startswith("$.predictions[1]") for p in paths)
    assert any(e["location"].get("prediction") == 1 for e in errors)
    assert not Suite.objects.filter(name="bad api").exists()
    response = client.post("/api/suites/", b"{broken", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "$"


def test_name_collision_via_api(alice, bob) -> None:
    services.suite_import(source=small_suite("taken"), owner=alice)
    response = token_client(bob).post(
        "/api/suites/", json.dumps(small_suite("taken")), content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "$.meta.name"


def test_too_large_is_413(alice, settings) -> None:
    settings.GYM_MAX_UPLOAD_BYTES = 10
    response = token_client(alice).post(
        "/api/suites/", "x" * 100_000, content_type="application/json"
    )
    assert response.status_code == 413
    assert "limit" in response.json()["errors"][0]["message"]


def test_delete_owner_only(alice, bob, dana) -> None:
    services.suite_import(source=small_suite("del"), owner=alice)
    assert BrowserClient().delete("/api/suites/del/").status_code == 401
    assert token_client(bob).delete("/api/suites/del/").status_code == 403
    assert Suite.objects.filter(name="del").exists()
    assert token_client(alice).delete("/api/suites/del/").status_code == 204
    assert not Suite.objects.filter(name="del").exists()
    services.suite_import(source=small_suite("del2"), owner=alice)
    assert token_client(dana).delete("/api/suites/del2/").status_code == 204


def test_put_replaces_for_owner(alice, bob) -> None:
    services.suite_import(source=small_suite("put"), owner=alice)
    new = small_suite("put")
    new["items"].pop()
    assert (
        token_client(bob)
        .put("/api/suites/put/", json.dumps(new), content_type="application/json")
        .status_code
        == 403
    )
    response = token_client(alice).put(
        "/api/suites/put/", json.dumps(new), content_type="application/json"
    )
    assert response.status_code == 200 and response.json()["item_count"] == 1


def test_session_auth_enforces_csrf(alice_client) -> None:
    body = json.dumps(small_suite("session"))
    assert (
        alice_client.post("/api/suites/", body, content_type="application/json").status_code == 403
    )
    response = alice_client.send_json("POST", "/api/suites/", body)
    assert response.status_code == 201


def test_token_endpoint(alice) -> None:
    response = BrowserClient().post(
        "/api/token/", {"username": "alice", "password": "alice-pass-1234"}
    )
    assert response.status_code == 200 and response.json()["token"]


def test_schema_and_docs(anon_client) -> None:
    schema = anon_client.get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert "/api/suites/" in paths and "/api/suites/{name}/export/" in paths
    docs = anon_client.get("/api/docs/").content.decode()
    assert "/static/vendor/swagger-ui/" in docs
    assert "cdn" not in docs.lower()
