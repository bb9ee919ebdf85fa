"""The OpenAPI schema documents what the API really takes and answers: the list filters,
the request bodies and query parameters of the writes, and the shapes of the answers
(a request's plain list of runs, the leaderboard, the results document). Every URL an
answer carries works as given for any suite name."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from evaluations.models import LanguageModel
from suites.syntaxgym import services as suite_services
from tests.conftest import BrowserClient
from tests.syntaxgym.test_results_pages import store_done, suite_data

pytestmark = pytest.mark.django_db

ODD_NAME = "what? #1 100%"


@pytest.fixture
def schema(anon_client) -> dict[str, Any]:
    response = anon_client.get("/api/schema/?format=json")
    assert response.status_code == 200
    return json.loads(response.content)


def _query_params(schema: dict[str, Any], path: str, method: str = "get") -> dict[str, Any]:
    operation = schema["paths"][path][method]
    return {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"}


def _answer(schema: dict[str, Any], path: str, method: str, code: str) -> dict[str, Any]:
    return schema["paths"][path][method]["responses"][code]["content"]["application/json"]["schema"]


def _component(schema: dict[str, Any], ref: str) -> dict[str, Any]:
    return schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]


def test_list_filters_are_documented(schema) -> None:
    for path in ("/api/suites/", "/api/minimal-pairs/", "/api/probing-tasks/"):
        params = _query_params(schema, path)
        assert {"q", "search", "tag", "ordering", "page"} <= set(params), path
        assert "name" in params["ordering"]["schema"]["enum"]
    evaluations = _query_params(schema, "/api/evaluations/")
    assert {"model", "suite", "status", "page"} <= set(evaluations)
    assert set(evaluations["status"]["schema"]["enum"]) == {
        "queued",
        "running",
        "done",
        "failed",
        "cancelled",
    }
    assert {"tag", "sort", "dir"} <= set(_query_params(schema, "/api/leaderboard/"))


def test_writes_document_their_bodies_and_parameters(schema) -> None:
    body = schema["paths"]["/api/evaluations/"]["post"]["requestBody"]["content"]
    request = _component(schema, body["application/json"]["schema"]["$ref"])
    assert {"model", "models", "suites", "tag"} <= set(request["properties"])
    upload = _query_params(schema, "/api/suites/", "post")
    assert upload["on_conflict"]["schema"]["enum"] == ["error", "rename"]
    assert "tags" in upload
    uploaded = _component(schema, _answer(schema, "/api/suites/", "post", "201")["$ref"])
    assert {"renamed_from", "warnings", "url", "tags"} <= set(uploaded["properties"])
    rerun = schema["paths"]["/api/evaluations/rerun-outdated/"]["post"]
    rerun_body = _component(
        schema, rerun["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    )
    assert set(rerun_body["properties"]) == {"suite", "model"}


def test_answers_have_their_real_shapes(schema) -> None:
    # A request answers a plain list of runs (not a page), each saying if it is new.
    for path in ("/api/evaluations/", "/api/evaluations/rerun-outdated/"):
        answer = _answer(schema, path, "post", "201")
        assert answer["type"] == "array", path
        run = _component(schema, answer["items"]["$ref"])
        assert {"id", "model", "suite", "status", "outdated", "queued_now"} <= set(
            run["properties"]
        )
        assert "page" not in _query_params(schema, path, "post")
    listed = _component(schema, _answer(schema, "/api/evaluations/", "get", "200")["$ref"])
    assert {"count", "next", "previous", "results"} <= set(listed["properties"])
    board = _component(schema, _answer(schema, "/api/leaderboard/", "get", "200")["$ref"])
    assert {"rows", "suites", "groups", "compared_suites"} <= set(board["properties"])
    row = _component(schema, board["properties"]["rows"]["items"]["$ref"])
    assert {"model", "overall", "covered", "scores", "group_means"} <= set(row["properties"])
    document = _answer(schema, "/api/evaluations/{id}/results/", "get", "200")
    results = _component(schema, document["$ref"])["properties"]["results"]
    summary = _component(schema, results["$ref"])
    assert {"accuracy", "predictions", "items", "diagnostics"} <= set(summary["properties"])
    assert {"items_passed", "items_evaluated", "accuracy_interval"} <= set(summary["properties"])
    # Two models compared on a suite, with McNemar's test.
    compare = "/api/suites/{name}/compare/"
    assert "models" in _query_params(schema, compare)
    comparison = _component(schema, _answer(schema, compare, "get", "200")["$ref"])
    assert {"models", "counts", "paired_test"} <= set(comparison["properties"])
    # Every error answers in the one documented shape.
    assert _answer(schema, "/api/evaluations/", "post", "400")["$ref"].endswith("/Error")


def _urls(data: Any) -> list[str]:
    """Every value under a key named `url` anywhere in an answer."""
    if isinstance(data, dict):
        found = [v for k, v in data.items() if k == "url" and isinstance(v, str)]
        return found + [u for v in data.values() for u in _urls(v)]
    if isinstance(data, list):
        return [u for v in data for u in _urls(v)]
    return []


def test_every_url_in_answers_works_for_an_odd_suite_name(anon_client, alice) -> None:
    suite = suite_services.suite_import(source=suite_data(ODD_NAME), owner=alice).suite
    model = LanguageModel.objects.create(name="lm", display_name="LM", source="org/lm")
    evaluation = store_done(model, suite)
    answers = [
        anon_client.get("/api/suites/", {"q": "#1 100"}).json(),
        anon_client.get("/api/evaluations/", {"suite": ODD_NAME}).json(),
        anon_client.get(f"/api/evaluations/{evaluation.pk}/").json(),
    ]
    urls = [u for answer in answers for u in _urls(answer)]
    assert len(urls) == 3 and any("what%3F%20%231%20100%25" in u for u in urls)
    for url in urls:
        parts = urlsplit(url)
        assert parts.query == "" and parts.fragment == "", url
        assert anon_client.get(parts.path).status_code == 200, url
    board = anon_client.get("/api/leaderboard/").json()
    assert board["rows"][0]["scores"][ODD_NAME]["evaluation"] == evaluation.pk


def test_writes_without_credentials_get_401_with_a_token_challenge(db) -> None:
    client = BrowserClient()
    for path, body in [
        ("/api/evaluations/", {"models": ["x"], "suites": ["y"]}),
        ("/api/evaluations/rerun-outdated/", {"suite": "y"}),
        ("/api/models/", {"source": "gpt2"}),
        ("/api/suites/?on_conflict=rename", {}),
    ]:
        response = client.post(path, json.dumps(body), content_type="application/json")
        assert response.status_code == 401, path
        assert response["WWW-Authenticate"] == "Token"
        assert response.json()["errors"][0]["code"] == "not_authenticated"
