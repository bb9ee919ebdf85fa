"""Hostile input on every public endpoint: pages and API, listed from the URLconfs, each
sent bad query strings, bad path arguments and bad bodies, anonymously and signed in.
Nothing may answer 5xx; every 4xx carries a message."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from evaluations import token_data
from evaluations.models import PairEvaluation, PairSentenceTokens
from evaluations.scoring.schema import TokenScore
from evaluations.syntaxgym import services as evaluation_services
from suites.minimal_pairs import sets as pair_sets
from suites.syntaxgym import services
from tests.conftest import small_suite, suite_evaluation, token_client, url_patterns

pytestmark = pytest.mark.django_db

# Bodies that broke the server before: nesting that exhausts the stack, a lone
# surrogate, a NUL, bytes that are not UTF-8.
DEEP_JSON = "[" * 50_000 + "]" * 50_000
SURROGATE_JSON = json.dumps({**small_suite("lone \udc00 surrogate")}, ensure_ascii=True)
NUL_JSON = json.dumps(small_suite("nul \x00 name"))
BAD_BODIES = {
    "deep json": (DEEP_JSON, "application/json"),
    "lone surrogate": (SURROGATE_JSON, "application/json"),
    "nul": (NUL_JSON, "application/json"),
    "not utf-8": (b'{"name": "\xff\xfe"}', "application/json"),
    "surrogate in fields": (
        json.dumps({"model": "m\udc00", "suites": ["\udc00"], "formula": "(1;%a\udc00%) > 0"}),
        "application/json",
    ),
    "deep form": ("a" + "[x]" * 1000 + "=1", "application/x-www-form-urlencoded"),
}
QUERIES = {
    "nul search": "q=%00&search=%00",
    "huge id": "ids=99999999999999999999",
    "superscript digit": "ids=%C2%B2",
    "bad page": "page=99999999999999999999",
    "nul everywhere": "page=%00&sort=%00&tag=%00&status=%00&ordering=%00&model=%00&suite=%00&as=%00",
    "odd values": "sort=%ED%A0%80&status=x%27%22%3C&ordering=-&metric=all&as=csv&to=csv&replace=%FF",
}
PATH_VALUES = {
    "name": ["%00", "%ED%A0%80", "x" * 5000],
    "pk": ["99999999999999999999"],
    "item_number": ["99999999999999999999", "-99999999999999999999"],
}


def public_routes() -> list[str]:
    """Every route of the site but Django's admin (which has its own tests upstream)."""
    return sorted({route for route, _p in url_patterns() if not route.startswith("admin/")})


def _fill(route: str, values: dict[str, str]) -> str:
    for converter in ("str", "slug", "int", "signed"):
        for key, value in values.items():
            route = route.replace(f"<{converter}:{key}>", value)
    return "/" + route


@pytest.fixture
def world(alice):
    """A suite, a model and an evaluation, so that every path argument can be real."""
    suite = services.suite_import(source=small_suite("real suite"), owner=alice).suite
    model = evaluation_services.LanguageModel.objects.create(
        name="real-model", display_name="Real model", source="real/model"
    )
    evaluation = suite_evaluation(model, suite)
    _pair_world(alice, model, name=suite.name, pk=evaluation.pk)
    return {"name": suite.name, "pk": str(evaluation.pk), "tag": "real", "item_number": "1"}


def _pair_world(alice, model, *, name: str, pk: int) -> None:
    """A minimal-pair set of the same name and a done run with the same id, so that the
    pair routes (tables, import) reach their views with real objects too."""
    data = "sentid\tpairid\tcomparison\tsentence\n1\t1\texpected\ta b\n2\t1\tunexpected\tb a\n"
    pair_set = pair_sets.minimal_pair_set_import(data=data, name=name, owner=alice).pair_set
    run = PairEvaluation.objects.create(
        pk=pk, model=model, pair_set=pair_set, content_hash=pair_set.content_hash, status="done"
    )
    # Each sentence is two one-letter words: tokens (0, 1) and (1, 3), 1 and 2 bits.
    tokens = [
        token_data.pack_tokens([TokenScore(a, 0, 1, 0, 1.0), TokenScore(" " + b, 1, 3, 0, 2.0)])
        for a, b in (("a", "b"), ("b", "a"))
    ]
    PairSentenceTokens.objects.bulk_create(
        PairSentenceTokens(evaluation=run, position=i, sentid=str(i + 1), tokens=t)
        for i, t in enumerate(tokens)
    )


@pytest.fixture(autouse=True)
def _no_throttle(settings):
    # This file sends hundreds of requests on purpose; throttling has its own tests.
    settings.GYM_THROTTLE_RATES = {"anon": None, "user": None, "anon_validate": None}


def _problems(client: Client, method: str, path: str, **kwargs: object) -> list[str]:
    response = getattr(client, method)(path, **kwargs)
    status = response.status_code
    where = f"{method.upper()} {path[:80]} -> {status}"
    if status >= 500:
        return [where]
    if 400 <= status < 500 and status != 405:
        body = response.content.decode("utf-8", "replace")
        if len(body.strip()) < 20:
            return [f"{where} without a message: {body[:80]!r}"]
    return []


def _clients(alice) -> list[Client]:
    # Without CSRF checks, so that bodies reach the views instead of the CSRF guard.
    signed_in = Client()
    signed_in.force_login(alice)
    return [Client(), signed_in]


def test_every_route_is_covered() -> None:
    routes = public_routes()
    # The routes the issue named, so that the list cannot silently come out empty.
    for expected in ("api/validate/suite/", "evaluations/", "", "api/token/", "accounts/login/"):
        assert expected in routes
    assert len(routes) >= 30


@pytest.mark.parametrize("case", sorted(QUERIES))
def test_hostile_query_strings(case: str, world, alice) -> None:
    problems = []
    for client in _clients(alice):
        for route in public_routes():
            path = _fill(route, world) + "?" + QUERIES[case]
            problems += _problems(client, "get", path)
    assert problems == []


@pytest.mark.parametrize("argument", ["name", "pk", "item_number"])
def test_hostile_path_arguments(argument: str, world, alice) -> None:
    problems = []
    for client in _clients(alice):
        for route in public_routes():
            if f":{argument}>" not in route:
                continue
            for value in PATH_VALUES[argument]:
                path = _fill(route, {**world, argument: value})
                problems += _problems(client, "get", path)
                problems += _problems(
                    client, "post", path, data="{}", content_type="application/json"
                )
    assert problems == []


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_hostile_bodies(case: str, world, alice) -> None:
    body, content_type = BAD_BODIES[case]
    problems = []
    for client in _clients(alice):
        for route in public_routes():
            if route in ("accounts/logout/", "suites/<str:name>/delete/"):
                continue  # would end the session or remove the suite the others use
            path = _fill(route, world)
            for method in ("post", "put"):
                problems += _problems(client, method, path, data=body, content_type=content_type)
    assert problems == []


def test_named_cases_answer_4xx_with_a_message(anon_client, world) -> None:
    deep = anon_client.post("/api/validate/suite/", DEEP_JSON, content_type="application/json")
    assert deep.status_code == 200 and deep.json()["ok"] is False
    assert "nested too deeply" in deep.json()["errors"][0]["message"]

    lone = anon_client.post("/api/validate/suite/", SURROGATE_JSON, content_type="application/json")
    assert lone.status_code == 200 and lone.json()["ok"] is False
    (error,) = lone.json()["errors"]
    assert error["path"] == "$.meta.name" and "lone surrogate" in error["message"]

    for query in ("ids=99999999999999999999", "ids=%C2%B2"):
        page = anon_client.get(f"/evaluations/?{query}")
        assert page.status_code == 400
        assert "is not an evaluation id" in page.content.decode()

    search = anon_client.get("/?q=%00")
    assert search.status_code == 400 and "NUL character" in search.content.decode()
    api_search = anon_client.get("/api/suites/?search=%00")
    assert api_search.status_code == 400
    assert "NUL character" in api_search.json()["errors"][0]["message"]


def test_surrogate_upload_is_refused_with_its_location(alice, alice_client) -> None:
    response = alice_client.post_form("/upload/", {"text": SURROGATE_JSON})
    assert response.status_code == 400
    assert "lone surrogate" in response.content.decode()
    # A signed-in session without the CSRF header is refused before the body is read;
    # a token client gets the located error.
    session_api = alice_client.post("/api/suites/", SURROGATE_JSON, content_type="application/json")
    assert session_api.status_code == 403
    assert "CSRF" in session_api.json()["errors"][0]["message"]
    token_api = token_client(alice).post(
        "/api/suites/", SURROGATE_JSON, content_type="application/json"
    )
    assert token_api.status_code == 400
    assert "lone surrogate" in token_api.json()["errors"][0]["message"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/probing-runs/", {"task": "t\x00", "models": ["m"]}, "task"),
        ("/api/probing-runs/", {"task": "t", "models": ["m\x00"]}, "models"),
        ("/api/pairs/evaluations/", {"models": ["m\x00"], "sets": ["s"]}, "models"),
        ("/api/pairs/evaluations/", {"models": ["m"], "sets": ["s\x00"]}, "sets"),
    ],
)
def test_a_name_with_a_nul_character_names_nothing_before_any_query(
    alice, path: str, body: dict, field: str
) -> None:
    # PostgreSQL refuses NUL in a query (a 500 there, found by schemathesis in a form
    # body; JSON bodies with NUL are refused by the parser): an invalid value before the
    # database is asked.
    answer = token_client(alice).post(path, body)
    assert answer.status_code == 400, answer.content
    assert "Invalid value." in json.dumps(answer.json())
    assert field in json.dumps(answer.json())
