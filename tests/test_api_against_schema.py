"""The API against its own OpenAPI schema (the one /api/schema/ serves): schemathesis
sends generated requests to every operation, in-process over WSGI, anonymous and signed
in with a token, and each answer must be no 5xx, a documented status code, a documented
content type and a body that matches its schema.

Bounded and deterministic: a fixed number of examples per operation, derandomized. Every
request runs inside the test's database transaction (pytest-django), which is rolled back
afterwards: writes (uploads, registrations, run requests) reach nothing outside it."""

from __future__ import annotations

import io
import json

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connection
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from evaluations.minimal_pairs.api import PAIR_TABLES
from evaluations.models import LanguageModel, ProbingRun
from evaluations.training.models import ModelSeries, SeriesMember, TrainingRun
from suites.corpora.services import corpus_import
from suites.probing.services import probing_task_import
from suites.syntaxgym import services as suite_services
from tests.conftest import token_client
from tests.syntaxgym.test_results_pages import store_done, suite_data
from tests.test_hostile_input import _pair_world
from tests.test_upload_convention import PROBING

EXAMPLES_PER_OPERATION = 12
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

pytestmark = pytest.mark.django_db

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())


@pytest.fixture(autouse=True)
def _inside_the_test_transaction(settings):
    """Django closes the database connection after each request it serves over WSGI;
    here that would end the test's transaction (and let later writes escape it), so the
    closing is held off as Django's own test client does."""
    # Throttles have their own tests; here hundreds of requests are the point.
    settings.GYM_THROTTLE_RATES = {"anon": None, "user": None, "anon_validate": None}
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(params=["anonymous", "token"])
def auth(request, alice) -> dict[str, str]:
    """The headers of an anonymous client, or of alice's token client."""
    if request.param == "anonymous":
        return {}
    return {"Authorization": token_client(alice).defaults["HTTP_AUTHORIZATION"]}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_matches_the_schema(case, auth) -> None:
    response = case.call(headers=auth)
    # The request ran in the test's transaction, on the test database.
    assert connection.in_atomic_block
    case.validate_response(response, checks=CHECKS)


# -- what it found, each as a plain test ---------------------------------------------


def test_an_api_address_no_route_matches_answers_the_api_404(anon_client) -> None:
    # An id that is not a number matches no route: the API's error body, not a page.
    for path in ("/api/evaluations/abc/", "/api/models/%C2%96/", "/api/no-such-thing/"):
        response = anon_client.get(path)
        assert response.status_code == 404 and response["Content-Type"] == "application/json"
        assert response.json() == {
            "errors": [{"code": "not_found", "message": "There is nothing at this address."}]
        }
    page = anon_client.get("/no-such-page/at/all/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def test_mine_without_a_user_is_a_documented_401(anon_client) -> None:
    raw = json.loads(anon_client.get("/api/schema/?format=json").content)
    for path in (
        "/api/runs/",
        "/api/evaluations/",
        "/api/pairs/evaluations/",
        "/api/probing-runs/",
    ):
        response = anon_client.get(path, {"mine": "true"})
        assert response.status_code == 401, path
        assert "401" in raw["paths"][path]["get"]["responses"], path
    # A list that needs no user still refuses a token that is nobody's, and says so.
    response = anon_client.get("/api/suites/", HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert response.status_code == 401
    assert "401" in raw["paths"]["/api/suites/"]["get"]["responses"]


def test_the_parquet_export_is_documented(anon_client) -> None:
    raw = json.loads(anon_client.get("/api/schema/?format=json").content)
    documented = raw["paths"]["/api/results/export/"]["get"]["responses"]["200"]["content"]
    response = anon_client.get("/api/results/export/", {"as": "parquet"})
    assert response.status_code == 200
    assert response["Content-Type"] in documented and "text/csv" in documented


# -- real rows: every read of a seeded site answers as documented ----------------------


@pytest.fixture
def site(alice, settings, tmp_path) -> dict[str, str]:
    """A suite, a minimal-pair set and a probing task of one name, a model, and a done
    evaluation and a done pair run of one id (a queued probing run too), so that every
    read reaches a real row."""
    suite = suite_services.suite_import(source=suite_data(), owner=alice).suite
    # The site's examples have no owner.
    suite_services.suite_import(source=suite_data("an example"), owner=None)
    model = LanguageModel.objects.create(name="lm", display_name="LM", source="hub/lm")
    evaluation = store_done(model, suite)
    _pair_world(alice, model, name=suite.name, pk=evaluation.pk)
    task = probing_task_import(source=PROBING, name=suite.name, owner=alice, tags=["agreement"])
    ProbingRun.objects.create(
        pk=evaluation.pk, model=model, task=task, content_hash=task.content_hash
    )
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"
    corpus = corpus_import(
        source=io.BytesIO(b"the dog barks\nthe dogs bark\n"), name=suite.name, owner=alice
    )
    trained = LanguageModel.objects.create(name="trained", display_name="T", source="hub/t")
    TrainingRun.objects.create(
        pk=evaluation.pk,
        model=trained,
        corpus=corpus,
        content_hash=corpus.content_hash,
        training_kind="ngram",
    )
    # A series of the one name, its member the model (a series' name is a slug when
    # registered; made here by hand, so that every read by name reaches it).
    series = ModelSeries.objects.create(name=suite.name, display_name=suite.name)
    SeriesMember.objects.create(series=series, model=model, step=1, tokens=100)
    series.suites.add(suite)
    return {"name": suite.name, "model": model.name, "id": str(evaluation.pk)}


def _reads() -> list[tuple[str, dict[str, str]]]:
    """(path, path parameters to fill) for every GET of the schema, the pair tables each."""
    reads = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()
        if operation.method.upper() != "GET":
            continue
        tables = PAIR_TABLES if "{table}" in operation.path else ("",)
        reads += [(operation.path, {"table": t} if t else {}) for t in tables]
    return reads


# Reads that answer something other than 200 on the seeded site, and why.
NOT_200 = {
    "/api/probing-runs/{id}/layers.csv": 404,  # the probing run is not done
    "/api/leaderboard/minimal-pairs/compare/": 400,  # it needs two model names
}


@pytest.mark.parametrize(("path", "extra"), _reads(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_read_of_real_rows_matches_the_schema(site, auth, path: str, extra: dict) -> None:
    operation = schema[path]["GET"]
    names = {"name": site["model"] if path.startswith("/api/models/") else site["name"]}
    wanted = {"id": site["id"], "item_number": "1", **names, **extra}
    parameters = {p.name: wanted[p.name] for p in operation.path_parameters}
    case = operation.Case(path_parameters=parameters)
    response = case.call(headers=auth)
    assert response.status_code == NOT_200.get(path, 200), response.text[:300]
    case.validate_response(response, checks=CHECKS)


def test_who_owns_registered_or_requested_may_be_nobody(anon_client) -> None:
    # The site's examples, models registered by a command and runs asked for by one
    # have no user: the schema says null may come.
    raw = json.loads(anon_client.get("/api/schema/?format=json").content)
    components = raw["components"]["schemas"]
    for component, field in (
        ("SuiteSummary", "owner"),
        ("PairSet", "owner"),
        ("ProbingTask", "owner"),
        ("LanguageModel", "registered_by"),
        ("Run", "requested_by"),
    ):
        assert components[component]["properties"][field]["nullable"] is True, component
