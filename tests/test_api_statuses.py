"""Every status code the OpenAPI schema documents is one the API really answers: a table
names, for each (operation, documented status), a request that reaches it on a seeded
site (the `site` fixture of test_api_against_schema), sent through the real WSGI app,
with the exact status asserted and the answer checked against the schema. A status the
schema documents that the table does not reach, or one the table reaches that the schema
does not document, turns the suite red.

Hard-to-reach statuses are reached for real: 413 with the upload limits lowered, 429
with the throttle rates (or the failed log-in limit) lowered to nothing, 503 with the
broker pointed at a closed port (requests that queue work) or with every query of the
request failing as on a lost database connection (every operation), 403 by another user (or, on an operation with no owner,
a signed-in session without its CSRF token)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.management.color import no_style
from django.db import OperationalError, connection, transaction
from django.test import override_settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok

from evaluations.minimal_pairs.api import PAIR_TABLES
from evaluations.models import Evaluation, PairEvaluation, ProbingRun
from evaluations.training.models import TrainingRun
from gym.middleware import _SLACK_BYTES
from tests.celery_harness import broker
from tests.conftest import signed_in_client, small_suite, token_client
from tests.scoring.test_ngram import TINY_ARPA
from tests.test_api_against_schema import (  # noqa: F401 (fixtures)
    CHECKS,
    _inside_the_test_transaction,
    schema,
    site,
)
from tests.test_upload_convention import PROBING

pytestmark = pytest.mark.django_db

NOWHERE = "redis://127.0.0.1:1/0"  # a closed port: the task queue is unreachable
UNKNOWN_ID = "987654"
UNKNOWN_NAME = "no-such-name"


@dataclass
class Ask:
    """One request: who sends it (anonymous, a token of alice or bob, alice's session
    without its CSRF token, or a token nobody has), what it sends, and under what
    settings. `prepare` changes the seeded rows first (a run's status, say)."""

    who: str = "alice"
    path: dict[str, str] = field(default_factory=dict)
    query: dict[str, Any] | None = None
    body: Any = None
    media_type: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    broker_down: bool = False
    database_down: bool = False
    prepare: Callable[[World], None] | None = None
    twice: bool = False  # sent once before: the answer to asking again


@dataclass
class World:
    """The seeded site: its one name (suite, pair set, probing task, corpus), its model
    and its one id (an evaluation, a pair run, a probing run and a training run)."""

    name: str
    model: str
    id: str


Reach = Callable[[World], Ask]


# -- ways to reach a status that many operations share ----------------------------------


def nul_in_query(w: World) -> Ask:
    # Refused before any view (gym.middleware.HostileInputMiddleware).
    return Ask(query={"q": "a\x00b"})


def anonymous(w: World) -> Ask:
    return Ask(who="anonymous")


def bad_token(w: World) -> Ask:
    # An operation that needs no user still refuses a token that is nobody's.
    return Ask(who="bad-token")


def by_bob(w: World) -> Ask:
    return Ask(who="bob")


def session_without_csrf(w: World) -> Ask:
    # A write with nobody's row to protect: a signed-in session must send its CSRF token.
    return Ask(who="session")


def unknown_id(w: World) -> Ask:
    return Ask(path={"id": UNKNOWN_ID})


def unknown_name(w: World) -> Ask:
    return Ask(path={"name": UNKNOWN_NAME})


def past_the_last_page(w: World) -> Ask:
    return Ask(query={"page": "99"})


def too_large(w: World) -> Ask:
    # The limits lowered to nothing: any body above the multipart slack is refused before
    # Django reads it (gym.middleware.UploadLimitMiddleware).
    return Ask(
        body=b"x" * (_SLACK_BYTES + 1),
        media_type="application/octet-stream",
        settings={
            "GYM_MAX_UPLOAD_BYTES": 0,
            "GYM_MAX_CORPUS_BYTES": 0,
            "GYM_MAX_MODEL_UPLOAD_BYTES": 0,
        },
    )


def database_down(w: World) -> Ask:
    # Every query fails as with a database gone (the token's look-up first).
    return Ask(database_down=True)


def throttled(w: World) -> Ask:
    rates = {"anon": "0/minute", "user": "0/minute", "anon_validate": "0/minute"}
    return Ask(settings={"GYM_THROTTLE_RATES": rates})


def but(reach: Reach, **changes: Any) -> Reach:
    """`reach`'s request with some of its fields changed."""
    return lambda w: dataclasses.replace(reach(w), **changes)


throttled_anonymous = but(throttled, who="anonymous")


def with_status(model: Any, status: str) -> Callable[[World], None]:
    def prepare(w: World) -> None:
        model.objects.filter(pk=w.id).update(status=status)

    return prepare


# -- the reads -------------------------------------------------------------------------

READ = {
    "200": lambda w: Ask(),
    "400": nul_in_query,
    "401": bad_token,
    "429": throttled_anonymous,
    "503": database_down,
}
LIST = {**READ, "404": past_the_last_page}
ONE_BY_NAME = {**READ, "404": unknown_name}
ONE_BY_ID = {**READ, "404": unknown_id}
BOARD = {**READ, "404": lambda w: Ask(query={"training": UNKNOWN_ID})}
MINE = {"401": lambda w: Ask(who="anonymous", query={"mine": "true"})}


# -- the writes ------------------------------------------------------------------------

WRITE = {
    "400": nul_in_query,
    "401": anonymous,
    "413": too_large,
    "429": throttled,
    "503": database_down,
}
CREATE = {**WRITE, "403": session_without_csrf}


def json_body(value: Any, **more: Any) -> Reach:
    """A JSON request; `value` may use the world (a function of it)."""

    def reach(w: World) -> Ask:
        body = value(w) if callable(value) else value
        return Ask(body=body, media_type="application/json", **more)

    return reach


def run_actions(model: Any) -> dict[str, dict[str, Reach]]:
    """Cancel and retry of one kind of run: the seeded run, made queued (cancel) or
    failed (retry) first; 409 when there is nothing to do (it is done); bob owns nothing
    of it; 503 when the retried run cannot reach the task queue."""
    cancel = {
        **WRITE,
        "200": lambda w: Ask(prepare=with_status(model, "queued")),
        "403": lambda w: Ask(who="bob", prepare=with_status(model, "queued")),
        "404": unknown_id,
        "409": lambda w: Ask(prepare=with_status(model, "done")),
    }
    retry = {
        **cancel,
        "200": lambda w: Ask(prepare=with_status(model, "failed")),
        "403": lambda w: Ask(who="bob", prepare=with_status(model, "failed")),
        "503": lambda w: Ask(broker_down=True, prepare=with_status(model, "failed")),
    }
    return {"cancel": cancel, "retry": retry}


def _pair_predictions(sentences: dict[str, str]) -> bytes:
    header = "token\tsentid\tword\twordpos\tmodel\ttokenizer\tpunctuation\tprob\tsurp\n"
    rows = "".join(
        f"{word}\t{sid}\t{word}\t{i}\tm\tt\tFalse\t0.5\t1.0\n"
        for sid, text in sentences.items()
        for i, word in enumerate(text.split())
    )
    return (header + rows).encode()


# The site's pair set: sentence 1 "a b" (expected), sentence 2 "b a" (unexpected).
PREDICTIONS = _pair_predictions({"1": "a b", "2": "b a"})
PAIRS_TSV = b"sentid\tpairid\tcomparison\tsentence\n1\t1\texpected\tx y\n2\t1\tunexpected\ty x\n"


def tsv(body: bytes, **query: str) -> Callable[[World], Ask]:
    return lambda w: Ask(body=body, media_type="text/tab-separated-values", query=query)


EVALUATIONS = run_actions(Evaluation)
PAIR_RUNS = run_actions(PairEvaluation)
PROBING_RUNS = run_actions(ProbingRun)
TRAINING_RUNS = run_actions(TrainingRun)


def outdated(w: World) -> None:
    # The seeded evaluation's results are for an earlier content of its suite.
    Evaluation.objects.filter(pk=w.id).update(content_hash="0" * 64)


def _new_suite(w: World) -> dict[str, Any]:
    return small_suite("a new suite")


def _replaced_suite(w: World) -> dict[str, Any]:
    return small_suite(w.name)


def without_evaluations(w: World) -> None:
    # A suite without evaluations is deleted (204); the seeded one has one (archived, 200).
    Evaluation.objects.filter(pk=w.id).delete()


TABLE: dict[str, dict[str, Reach]] = {
    # Corpora
    "GET /api/corpora/": LIST,
    "POST /api/corpora/": {
        **CREATE,
        "201": lambda w: Ask(
            body={"file": b"a new corpus\n", "name": "another corpus"},
            media_type="multipart/form-data",
        ),
    },
    "GET /api/corpora/{name}/": ONE_BY_NAME,
    "GET /api/corpora/{name}/overlap/": {
        **ONE_BY_NAME,
        "400": lambda w: Ask(query={"suites": UNKNOWN_NAME}),
    },
    # SyntaxGym suites
    "GET /api/suites/": LIST,
    "POST /api/suites/": {**CREATE, "201": json_body(_new_suite)},
    "GET /api/suites/{name}/": ONE_BY_NAME,
    "PUT /api/suites/{name}/": {
        **WRITE,
        "200": json_body(_replaced_suite),
        "403": json_body(_replaced_suite, who="bob"),
        "404": lambda w: Ask(path={"name": UNKNOWN_NAME}, body={}, media_type="application/json"),
    },
    "DELETE /api/suites/{name}/": {
        **WRITE,
        "200": lambda w: Ask(),
        "204": lambda w: Ask(prepare=without_evaluations),
        "403": by_bob,
        "404": unknown_name,
    },
    "GET /api/suites/{name}/compare/": ONE_BY_NAME,
    "GET /api/suites/{name}/export/": ONE_BY_NAME,
    "GET /api/tags/": READ,
    "POST /api/validate/formula/": {
        **CREATE,
        "200": json_body({"formula": "(2;%a%) > (2;%b%)", "regions": [2], "conditions": ["a"]}),
        "401": bad_token,
    },
    "POST /api/validate/suite/": {
        **CREATE,
        "200": json_body(_new_suite),
        "401": bad_token,
        "429": throttled_anonymous,
    },
    # Evaluations of suites
    "GET /api/evaluations/": {**LIST, **MINE},
    "POST /api/evaluations/": {
        **CREATE,
        "200": json_body(lambda w: {"model": w.model, "suites": [w.name]}),
        "201": json_body(lambda w: {"model": w.model, "suites": ["an example"]}),
        "503": json_body(lambda w: {"model": "trained", "suites": [w.name]}, broker_down=True),
    },
    "GET /api/evaluations/{id}/": ONE_BY_ID,
    "POST /api/evaluations/{id}/cancel/": EVALUATIONS["cancel"],
    "POST /api/evaluations/{id}/retry/": EVALUATIONS["retry"],
    "GET /api/evaluations/{id}/items/{item_number}/": ONE_BY_ID,
    "GET /api/evaluations/{id}/results/": ONE_BY_ID,
    "POST /api/evaluations/rerun-outdated/": {
        **CREATE,
        "200": json_body(lambda w: {"suite": w.name}),
        "201": json_body(lambda w: {"suite": w.name}, prepare=outdated),
        "503": json_body(lambda w: {"suite": w.name}, prepare=outdated, broker_down=True),
    },
    "GET /api/results/export/": {**READ, "404": lambda w: Ask(query={"suite": UNKNOWN_NAME})},
    # Leaderboards
    "GET /api/leaderboard/": BOARD,
    "GET /api/leaderboard/minimal-pairs/": BOARD,
    "GET /api/leaderboard/minimal-pairs/compare/": {
        **READ,
        "200": lambda w: Ask(query={"models": f"{w.model},trained"}),
    },
    "GET /api/leaderboard/probing/": BOARD,
    # Minimal pairs
    "GET /api/minimal-pairs/": LIST,
    "POST /api/minimal-pairs/": {**CREATE, "201": tsv(PAIRS_TSV, name="new pairs")},
    "GET /api/minimal-pairs/{name}/": ONE_BY_NAME,
    "PUT /api/minimal-pairs/{name}/": {
        **WRITE,
        "200": tsv(PAIRS_TSV),
        "403": but(tsv(PAIRS_TSV), who="bob"),
        "404": but(tsv(PAIRS_TSV), path={"name": UNKNOWN_NAME}),
    },
    "POST /api/minimal-pairs/{name}/analyze/": {
        **CREATE,
        "200": tsv(PREDICTIONS),
        "404": but(tsv(PREDICTIONS), path={"name": UNKNOWN_NAME}),
    },
    "GET /api/minimal-pairs/{name}/compare/": ONE_BY_NAME,
    "GET /api/minimal-pairs/{name}/export/": ONE_BY_NAME,
    "POST /api/minimal-pairs/{name}/predictions/": {
        **WRITE,
        "201": tsv(PREDICTIONS, model="imported", register="1"),
        "403": but(tsv(PREDICTIONS, model="imported", register="1"), who="bob"),
        "404": but(tsv(PREDICTIONS, model="imported", register="1"), path={"name": UNKNOWN_NAME}),
        # The seeded model has a done run on the set's content.
        "409": lambda w: tsv(PREDICTIONS, model=w.model)(w),
    },
    "GET /api/pairs/evaluations/": {**LIST, **MINE},
    "POST /api/pairs/evaluations/": {
        **CREATE,
        "200": json_body(lambda w: {"models": [w.model], "sets": [w.name]}),
        "201": json_body(lambda w: {"models": ["trained"], "sets": [w.name]}),
        "503": json_body(lambda w: {"models": ["trained"], "sets": [w.name]}, broker_down=True),
    },
    "GET /api/pairs/evaluations/{id}/": ONE_BY_ID,
    "GET /api/pairs/evaluations/{id}/{table}/": {
        **ONE_BY_ID,
        "409": lambda w: Ask(prepare=with_status(PairEvaluation, "queued")),
    },
    "POST /api/pairs/evaluations/{id}/cancel/": PAIR_RUNS["cancel"],
    "POST /api/pairs/evaluations/{id}/retry/": PAIR_RUNS["retry"],
    # Models
    "GET /api/models/": LIST,
    "POST /api/models/": {
        **CREATE,
        "201": json_body({"source": "EleutherAI/pythia-14m"}),
        # An uploaded model file: accepted at once, checked by a worker.
        "202": lambda w: Ask(
            body=TINY_ARPA.encode(),
            query={"name": "uploaded-arpa", "filename": "tiny.arpa"},
            media_type="text/plain",
        ),
    },
    "GET /api/models/{name}/": ONE_BY_NAME,
    # Probing
    "GET /api/probing-runs/": {**LIST, **MINE},
    "POST /api/probing-runs/": {
        **CREATE,
        "200": json_body(lambda w: {"task": w.name, "models": ["trained"]}, twice=True),
        "201": json_body(lambda w: {"task": w.name, "models": ["trained"]}),
        "503": json_body(lambda w: {"task": w.name, "models": ["trained"]}, broker_down=True),
    },
    "GET /api/probing-runs/{id}/": ONE_BY_ID,
    "POST /api/probing-runs/{id}/cancel/": PROBING_RUNS["cancel"],
    "GET /api/probing-runs/{id}/layers.csv": {
        **ONE_BY_ID,
        "200": lambda w: Ask(prepare=with_status(ProbingRun, "done")),
    },
    "POST /api/probing-runs/{id}/retry/": PROBING_RUNS["retry"],
    "GET /api/probing-tasks/": LIST,
    "POST /api/probing-tasks/": {
        **CREATE,
        "201": lambda w: Ask(body=PROBING, media_type="text/plain", query={"name": "new task"}),
    },
    "GET /api/probing-tasks/{name}/": ONE_BY_NAME,
    # Training
    "GET /api/training-runs/": LIST,
    "POST /api/training-runs/": {
        **CREATE,
        "201": json_body(lambda w: {"corpus": w.name, "name": "trained-again", "kind": "ngram"}),
        "503": json_body(
            lambda w: {"corpus": w.name, "name": "trained-again", "kind": "ngram"}, broker_down=True
        ),
    },
    "GET /api/training-runs/{id}/": ONE_BY_ID,
    "POST /api/training-runs/{id}/cancel/": TRAINING_RUNS["cancel"],
    "POST /api/training-runs/{id}/retry/": TRAINING_RUNS["retry"],
    # Model series
    "GET /api/model-series/": LIST,
    "POST /api/model-series/": {
        **CREATE,
        "201": json_body(lambda w: {"name": "another-series", "models": [w.model], "steps": [1]}),
    },
    "GET /api/model-series/{name}/": ONE_BY_NAME,
    "GET /api/model-series/{name}/curves/": ONE_BY_NAME,
    "POST /api/model-series/{name}/evaluate/": {
        **CREATE,
        "202": json_body(lambda w: {"suites": [w.name]}),
        "404": lambda w: Ask(
            path={"name": UNKNOWN_NAME}, body={"suites": [w.name]}, media_type="application/json"
        ),
    },
    "GET /api/runs/": {**LIST, **MINE},
    # Accounts
    "POST /api/token/": {
        "200": json_body({"username": "alice", "password": "alice-pass-1234"}, who="anonymous"),
        "400": json_body({"username": "alice", "password": "wrong"}, who="anonymous"),
        "401": bad_token,
        "403": lambda w: Ask(
            who="session",
            body={"username": "alice", "password": "alice-pass-1234"},
            media_type="application/json",
        ),
        "413": but(too_large, who="anonymous"),
        # One failed log-in is the limit: the next try waits.
        "429": json_body(
            {"username": "alice", "password": "wrong"},
            who="anonymous",
            settings={"GYM_LOGIN_MAX_FAILURES": 1},
            twice=True,
        ),
        "503": json_body(
            {"username": "alice", "password": "alice-pass-1234"},
            who="anonymous",
            database_down=True,
        ),
    },
}


def _documented() -> set[tuple[str, str]]:
    pairs = set()
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()
        key = f"{operation.method.upper()} {operation.path}"
        pairs |= {(key, str(code)) for code in operation.definition.raw["responses"]}
    return pairs


def test_the_table_reaches_exactly_the_documented_statuses() -> None:
    documented = _documented()
    tabled = {(key, code) for key, codes in TABLE.items() for code in codes}
    assert sorted(documented - tabled) == [], "documented, with no request that reaches it"
    assert sorted(tabled - documented) == [], "reached in the table, not documented"


def _credentials(who: str, alice: Any, bob: Any) -> tuple[dict[str, str], dict[str, str]]:
    """The headers and cookies of who sends a request."""
    if who in ("alice", "bob"):
        user = alice if who == "alice" else bob
        return {"Authorization": token_client(user).defaults["HTTP_AUTHORIZATION"]}, {}
    if who == "bad-token":
        return {"Authorization": "Token " + "0" * 40}, {}
    if who == "session":
        return {}, {"sessionid": signed_in_client(alice).cookies["sessionid"].value}
    return {}, {}


def _fill(path: str, w: World) -> dict[str, str]:
    name = w.model if path.startswith("/api/models/") else w.name
    return {"id": w.id, "item_number": "1", "name": name, "table": PAIR_TABLES[0]}


def _database_gone(*_args: Any) -> None:
    raise OperationalError("server closed the connection unexpectedly")


def _reach(operation: str, code: str, seeded: dict[str, str], alice: Any, bob: Any) -> str:
    """Send the table's request for (operation, code); what is wrong with the answer
    ("" when it is the status asked for and matches the schema)."""
    method, path = operation.split(" ", 1)
    world = World(name=seeded["name"], model=seeded["model"], id=seeded["id"])
    api = schema[path][method]
    ask = TABLE[operation][code](world)
    if ask.prepare:
        ask.prepare(world)
    values = {**_fill(path, world), **ask.path}
    case = api.Case(
        path_parameters={p.name: values[p.name] for p in api.path_parameters},
        query=ask.query,
        media_type=ask.media_type,
        **({"body": ask.body} if ask.body is not None else {}),
    )
    headers, cookies = _credentials(ask.who, alice, bob)
    with ExitStack() as stack:
        stack.enter_context(override_settings(**ask.settings))
        if ask.broker_down:
            stack.enter_context(broker(NOWHERE))
        if ask.database_down:
            stack.enter_context(connection.execute_wrapper(_database_gone))
        if ask.twice:
            case.call(headers=headers, cookies=cookies)
        response = case.call(headers=headers, cookies=cookies)
    if str(response.status_code) != code:
        return f"{code}: answered {response.status_code} {response.text[:300]}"
    # A documented 503 is the answer asked for, not a server error.
    checks = [c for c in CHECKS if c is not not_a_server_error or code < "500"]
    try:
        case.validate_response(response, checks=checks)
    except Exception as exc:  # noqa: BLE001 (every failure of the operation at once)
        return f"{code}: {str(exc)[:600]}"
    return ""


def test_every_documented_status_is_reached(site, alice, bob) -> None:  # noqa: F811
    """Every operation's statuses on one seeded site (built once: the test's cost is the
    site), each in a savepoint rolled back afterwards: the cases do not see each other's
    writes (nor throttle counters: the cache is cleared). Every failure is listed."""
    from django.core.cache import cache

    # The site's runs of each kind share one id given by hand, which PostgreSQL's
    # sequences do not count: move them past it, or the cases' new runs would reach it.
    with connection.cursor() as cursor:
        models = [Evaluation, PairEvaluation, ProbingRun, TrainingRun]
        for statement in connection.ops.sequence_reset_sql(no_style(), models):
            cursor.execute(statement)
    problems = []
    for operation in sorted(TABLE):
        for code in TABLE[operation]:
            if TABLE[operation][code](NO_WORLD).broker_down:
                continue  # in the test below: the queue is reached once the request commits
            cache.clear()
            with transaction.atomic():
                problem = _reach(operation, code, site, alice, bob)
                transaction.set_rollback(True)
            if problem:
                problems.append(f"{operation} {problem}")
    assert not problems, "\n".join(problems)


NO_WORLD = World("", "", "0")  # to read the table's requests without sending them
QUEUE_DOWN = [
    (operation, code)
    for operation, codes in sorted(TABLE.items())
    for code, reach in codes.items()
    if reach(NO_WORLD).broker_down
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("operation", "code"), QUEUE_DOWN)
def test_the_queue_down_statuses_are_reached(operation, code, site, alice, bob) -> None:  # noqa: F811
    """Runs are sent to the queue when the request's transaction commits, so these
    requests run outside a test transaction (the tables are emptied afterwards)."""
    assert _reach(operation, code, site, alice, bob) == ""
