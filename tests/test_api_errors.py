"""The API's one error shape, made by one exception handler and documented in the schema,
and the limits on requests: throttles and failed log-ins (pages and the token endpoint)."""

from __future__ import annotations

import json

import pytest

from suites.syntaxgym import services
from tests.conftest import BrowserClient, small_suite, token_client

pytestmark = pytest.mark.django_db


def _shape(response) -> list[dict]:
    """The one error body: {"errors": [{"code", "message", "path"?}]}, nothing else."""
    body = response.json()
    assert set(body) == {"errors"}, body
    assert body["errors"]
    for entry in body["errors"]:
        assert (
            {"code", "message"}
            <= set(entry)
            <= {"code", "message", "path", "location", "retry_after_seconds"}
        )
        assert entry["message"].strip()
    return body["errors"]


def test_every_kind_of_error_has_one_shape(alice, bob) -> None:
    services.suite_import(source=small_suite("alices"), owner=alice)
    anon = BrowserClient()
    # A serializer's field errors (formerly {field: [msg]}).
    bad_request = token_client(alice).post(
        "/api/evaluations/", json.dumps({"model": "nope"}), content_type="application/json"
    )
    assert bad_request.status_code == 400
    (error,) = _shape(bad_request)
    assert error["path"] == "$.model" and error["code"] == "does_not_exist"
    # A suite's located errors (formerly {"errors": [{path, message}]}).
    invalid = token_client(alice).post(
        "/api/suites/", json.dumps({"meta": {}}), content_type="application/json"
    )
    assert invalid.status_code == 400 and _shape(invalid)[0]["path"].startswith("$")
    # DRF's own (formerly {"detail": ...}): not authenticated, not found, bad JSON.
    unauthenticated = anon.post("/api/suites/", "{}", content_type="application/json")
    assert unauthenticated.status_code == 401
    assert _shape(unauthenticated)[0]["code"] == "not_authenticated"
    missing = anon.get("/api/suites/no-such/")
    assert missing.status_code == 404 and _shape(missing)[0]["code"] == "not_found"
    broken = token_client(alice).post(
        "/api/evaluations/", "{not json", content_type="application/json"
    )
    assert broken.status_code == 400 and _shape(broken)[0]["code"] == "parse_error"
    # Registration errors of the service (formerly a bare {field: msg}).
    register = token_client(alice).post(
        "/api/models/", json.dumps({"source": "  "}), content_type="application/json"
    )
    assert register.status_code == 400
    _shape(register)


def test_a_services_permission_denied_is_a_403_without_catching(alice, bob) -> None:
    services.suite_import(source=small_suite("mine"), owner=alice)
    response = token_client(bob).delete("/api/suites/mine/")
    assert response.status_code == 403
    (error,) = _shape(response)
    assert error["code"] == "permission_denied" and "owner" in error["message"]
    replaced = token_client(bob).put(
        "/api/suites/mine/", json.dumps(small_suite("mine")), content_type="application/json"
    )
    assert replaced.status_code == 403 and "owner" in _shape(replaced)[0]["message"]


def test_the_schema_documents_the_error_shape(anon_client) -> None:
    schema = json.loads(anon_client.get("/api/schema/?format=json").content)
    assert set(schema["components"]["schemas"]["Error"]["properties"]) == {"errors"}
    post = schema["paths"]["/api/suites/"]["post"]["responses"]
    for code in ("400", "401", "403", "413", "429"):
        ref = post[code]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/Error")
    get = schema["paths"]["/api/suites/{name}/"]["get"]["responses"]
    assert get["404"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")


def test_throttles_answer_429_in_the_error_shape(settings, alice) -> None:
    settings.GYM_THROTTLE_RATES = {
        "anon": "3/minute",
        "user": "5/minute",
        "anon_validate": "2/minute",
    }
    anon = BrowserClient()
    codes = [anon.get("/api/tags/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    limited = anon.get("/api/tags/")
    assert limited.status_code == 429 and int(limited["Retry-After"]) > 0
    (error,) = _shape(limited)
    assert error["code"] == "throttled" and error["retry_after_seconds"] > 0
    # Signed-in users are counted on their own, at their own rate.
    user = token_client(alice)
    assert [user.get("/api/tags/").status_code for _ in range(6)] == [200] * 5 + [429]


def test_anonymous_validation_has_a_smaller_allowance(settings) -> None:
    settings.GYM_THROTTLE_RATES = {"anon": "100/minute", "user": None, "anon_validate": "2/minute"}
    anon = BrowserClient()
    body = json.dumps(small_suite("v"))
    codes = [
        anon.post("/api/validate/suite/", body, content_type="application/json").status_code
        for _ in range(3)
    ]
    assert codes == [200, 200, 429]
    assert anon.get("/api/tags/").status_code == 200


def test_failed_logins_are_limited_on_the_page(settings, alice) -> None:
    settings.GYM_LOGIN_MAX_FAILURES = 3
    client = BrowserClient()
    for _ in range(3):
        wrong = client.post_form("/accounts/login/", {"username": "alice", "password": "guess"})
        assert (
            wrong.status_code == 200 and "correct username and password" in wrong.content.decode()
        )
    # Past the limit even the right password is refused, with the reason.
    right = client.post_form(
        "/accounts/login/", {"username": "alice", "password": "alice-pass-1234"}
    )
    assert right.status_code == 200
    assert "Too many failed log-in attempts" in right.content.decode()
    assert "_auth_user_id" not in client.session


def test_failed_logins_are_limited_on_the_token_endpoint(settings, alice) -> None:
    settings.GYM_LOGIN_MAX_FAILURES = 2
    client = BrowserClient()
    for _ in range(2):
        wrong = client.post("/api/token/", {"username": "alice", "password": "guess"})
        assert wrong.status_code == 400
        _shape(wrong)
    right = client.post("/api/token/", {"username": "alice", "password": "alice-pass-1234"})
    assert right.status_code == 429
    (error,) = _shape(right)
    assert "Too many failed log-in attempts" in error["message"]
    # Another account from the same address is not locked by alice's failures.
    other = client.post("/api/token/", {"username": "bob", "password": "guess"})
    assert other.status_code == 400
