"""The Runs page (/runs/) and its API (/api/runs/): runs of every kind, newest first,
filtered in the query string by kind, status, model and mine, paged, in a bounded number
of queries; the old list addresses lead there; each kind's API list takes the same
filters; a bad filter value is a 400 with a message."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from evaluations.models import Evaluation, LanguageModel, PairEvaluation, ProbingRun
from evaluations.runs import lifecycle as runs
from evaluations.syntaxgym.services import evaluation_create
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet, Suite
from suites.probing.services import probing_task_import
from suites.syntaxgym import services as suite_services
from tests.conftest import signed_in_client, small_suite

pytestmark = pytest.mark.django_db

PAIRS = "sentid\tpairid\tcomparison\tsentence\n1\t1\texpected\ta b\n2\t1\tunexpected\tb a\n"
PROBING = "".join(
    f"{part}\t{label}\t{text} .\n"
    for part in ("tr", "va", "te")
    for label, text in (("A", "the dog barks"), ("B", "the dogs bark"))
)
LONG = "a-very-long-model-name-" * 4


def done_suite_run(model: LanguageModel, suite: Suite, user: User, *, items: int) -> Evaluation:
    """A finished run of `model` on `suite` that `user` asked for, `items` of `items` done."""
    return evaluation_create(
        model=model,
        suite=suite,
        content_hash=suite.content_hash,
        snapshot={},
        status="done",
        progress_done=items,
        progress_total=items,
        requested_by=user,
    )


def running_pair_run(model: LanguageModel, pair_set: MinimalPairSet, user: User) -> PairEvaluation:
    """A run of `model` on `pair_set` (PAIRS) that `user` asked for, running, 1 of 2 done."""
    return PairEvaluation.objects.create(
        model=model,
        pair_set=pair_set,
        content_hash=pair_set.content_hash,
        status="running",
        progress_done=1,
        progress_total=2,
        requested_by=user,
    )


@pytest.fixture
def world(alice, bob) -> dict:
    suite = suite_services.suite_import(source=small_suite("agreement"), owner=alice).suite
    pair_set = pair_sets.minimal_pair_set_import(data=PAIRS, name="pairs", owner=alice).pair_set
    task = probing_task_import(source=PROBING, name="number", owner=alice)
    gpt = LanguageModel.objects.create(name="gpt", display_name="GPT", source="org/gpt")
    long = LanguageModel.objects.create(name=LONG[:100], display_name=LONG, source="org/long")
    hidden = LanguageModel.objects.create(
        name="secret", display_name="Secret", source="org/secret", is_hidden=True
    )
    now = timezone.now()

    def made(run, minutes_ago: int):
        # created_at is set on insert: move it to the time the test wants.
        type(run).objects.filter(pk=run.pk).update(created_at=now - timedelta(minutes=minutes_ago))
        return run

    suite_run = made(done_suite_run(gpt, suite, alice, items=4), 30)
    pair_run = made(running_pair_run(long, pair_set, bob), 20)
    probing_run = made(
        ProbingRun.objects.create(
            model=gpt, task=task, content_hash="old", status="failed", requested_by=alice
        ),
        10,
    )
    hidden_run = made(
        PairEvaluation.objects.create(
            model=hidden, pair_set=pair_set, content_hash=pair_set.content_hash
        ),
        5,
    )
    return {
        "suite": suite_run,
        "pairs": pair_run,
        "probing": probing_run,
        "hidden": hidden_run,
        "suite_obj": suite,
        "pair_set": pair_set,
        "task": task,
    }


def _rows(page: str) -> list[str]:
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0] if "<tbody>" in page else ""
    return re.findall(r"<tr[ >].*?</tr>", body, flags=re.S)


def test_every_page_links_the_runs_page_in_its_header(anon_client, db) -> None:
    page = anon_client.get("/").content.decode()
    header = page.split("</header>", 1)[0]
    assert '<a href="/runs/">Runs</a>' in header


def test_empty_state_says_what_to_do(anon_client, alice_client, db) -> None:
    anon = anon_client.get("/runs/")
    assert anon.status_code == 200
    text = anon.content.decode()
    assert "No runs yet." in text and "0 runs" in text
    assert '<a href="/accounts/login/?next=/runs/">Log in</a>' in text
    signed_in = alice_client.get("/runs/").content.decode()
    assert '<a href="/evaluations/new/">models on suites</a>' in signed_in
    assert '<a href="/pairs/evaluations/new/">models on minimal-pair sets</a>' in signed_in
    assert '<a href="/probing-runs/new/">probing a task</a>' in signed_in
    narrowed = alice_client.get("/runs/", {"status": "failed"}).content.decode()
    assert "No run matches these filters." in narrowed


def test_lists_every_kind_newest_first_with_links(world, anon_client) -> None:
    response = anon_client.get("/runs/")
    assert response.status_code == 200
    page = response.content.decode()
    rows = _rows(page)
    # Hidden models' runs are left out for everyone but staff.
    assert len(rows) == 3 and "3 runs" in page
    probing, pairs, suite = rows
    assert "<td>Probing</td>" in probing and "<td>Minimal pairs</td>" in pairs
    assert "<td>Suite</td>" in suite
    assert f'href="/probing-runs/{world["probing"].pk}/"' in probing
    assert 'href="/probing/number/"' in probing and "outdated" in probing
    assert "Failed" in probing and "alice" in probing
    # Unfinished runs update live from their kind's API address.
    assert f'data-api="/api/pairs/evaluations/{world["pairs"].pk}/" data-finished="0"' in pairs
    assert f'data-api="/api/probing-runs/{world["probing"].pk}/" data-finished="1"' in probing
    assert f'href="/pairs/evaluations/{world["pairs"].pk}/"' in pairs
    assert 'href="/minimal-pairs/pairs/"' in pairs and LONG in pairs
    assert "Running" in pairs and "1 / 2" in pairs and "bob" in pairs
    assert f'href="/evaluations/{world["suite"].pk}/"' in suite and ">Results<" in suite
    assert 'href="/suites/agreement/"' in suite and "4 / 4" in suite


def test_staff_see_runs_of_hidden_models(world, django_user_model) -> None:
    staff = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    client = signed_in_client(staff)
    assert len(_rows(client.get("/runs/").content.decode())) == 4
    assert len(_rows(client.get("/runs/", {"model": "secret"}).content.decode())) == 1


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"kind": "suite"}, ["suite"]),
        ({"kind": "pairs"}, ["pairs"]),
        ({"kind": "probing"}, ["probing"]),
        ({"status": "done"}, ["suite"]),
        ({"status": "running", "kind": "pairs"}, ["pairs"]),
        ({"status": "running", "kind": "suite"}, []),
        ({"model": "gpt"}, ["probing", "suite"]),
        ({"mine": "1"}, ["probing", "suite"]),
        ({"mine": "0"}, ["probing", "pairs", "suite"]),
    ],
)
def test_filters(world, alice_client, query, expected) -> None:
    page = alice_client.get("/runs/", query)
    assert page.status_code == 200
    rows = _rows(page.content.decode())
    wanted = [world[name].get_absolute_url() for name in expected]
    assert len(rows) == len(wanted)
    for row, url in zip(rows, wanted, strict=True):
        assert f'href="{url}"' in row
    api = alice_client.get("/api/runs/", query)
    assert api.status_code == 200
    assert [r["url"] for r in api.json()["results"]] == wanted
    assert api.json()["count"] == len(wanted)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            {"kind": "distillation"},
            "kind must be one of suite, pairs, probing, training, not &#x27;distillation&#x27;",
        ),
        (
            {"status": "finished"},
            "status must be one of queued, running, done, failed, cancelled, not &#x27;finished&#x27;",
        ),
        ({"model": "nope"}, "no model named &#x27;nope&#x27;"),
        ({"model": "secret"}, "no model named &#x27;secret&#x27;"),
        ({"mine": "maybe"}, "mine must be 1 or 0 (true or false), not &#x27;maybe&#x27;"),
    ],
)
def test_bad_filter_values_are_400_with_a_message(world, alice_client, query, message) -> None:
    page = alice_client.get("/runs/", query)
    assert page.status_code == 400
    assert message in page.content.decode()
    api = alice_client.get("/api/runs/", query)
    assert api.status_code == 400
    (error,) = api.json()["errors"]
    assert error["path"] == f"$.{next(iter(query))}"
    assert error["message"] == message.replace("&#x27;", "'")


def test_mine_asks_an_anonymous_visitor_to_sign_in(world, anon_client) -> None:
    page = anon_client.get("/runs/", {"mine": "1"})
    assert page.status_code == 302
    assert page["Location"] == "/accounts/login/?next=/runs/%3Fmine%3D1"
    assert anon_client.get("/api/runs/", {"mine": "1"}).status_code == 401
    assert anon_client.get("/api/probing-runs/", {"mine": "1"}).status_code == 401


def test_old_list_addresses_lead_to_the_runs_page(world, anon_client) -> None:
    for address, target in [
        ("/evaluations/", "/runs/?kind=suite"),
        ("/evaluations/?status=done", "/runs/?status=done&kind=suite"),
        ("/pairs/evaluations/", "/runs/?kind=pairs"),
        ("/probing-runs/", "/runs/?kind=probing"),
        ("/probing-runs/?kind=suite", "/runs/?kind=probing"),
    ]:
        response = anon_client.get(address)
        assert response.status_code == 302, address
        assert response["Location"] == target, address
        assert anon_client.get(target).status_code == 200
    # A request's own list of what it queued stays where it was.
    pk = world["suite"].pk
    listed = anon_client.get("/evaluations/", {"ids": str(pk), "new": str(pk)})
    assert listed.status_code == 200 and "queued by this request" in listed.content.decode()


def test_each_kinds_api_list_takes_the_same_filters(world, alice_client) -> None:
    for address, run in [
        ("/api/evaluations/", "suite"),
        ("/api/pairs/evaluations/", "pairs"),
        ("/api/probing-runs/", "probing"),
    ]:
        pk = world[run].pk
        mine = alice_client.get(address, {"mine": "true"}).json()["results"]
        assert [r["id"] for r in mine] == ([pk] if run != "pairs" else []), address
        status = world[run].status
        assert [
            r["id"] for r in alice_client.get(address, {"status": status}).json()["results"]
        ] == [pk]
        for bad in ({"status": "nope"}, {"model": "nope"}, {"mine": "2"}):
            response = alice_client.get(address, bad)
            assert response.status_code == 400, (address, bad)
            assert response.json()["errors"][0]["path"] == f"$.{next(iter(bad))}"
        # One kind's list takes no kind: it is ignored, not an error.
        assert alice_client.get(address, {"kind": "other"}).status_code == 200


def test_pages_and_query_count_are_bounded(world, alice, alice_client) -> None:
    suite, pair_set, task = world["suite_obj"], world["pair_set"], world["task"]
    for n in range(40):
        model = LanguageModel.objects.create(
            name=f"m{n}", display_name=f"M {n}", source=f"org/m{n}"
        )
        evaluation_create(
            model=model, suite=suite, content_hash="x", snapshot={}, requested_by=alice
        )
        PairEvaluation.objects.create(model=model, pair_set=pair_set, content_hash="x")
        ProbingRun.objects.create(model=model, task=task, content_hash="x", requested_by=alice)
    with CaptureQueriesContext(connection) as queries:
        first = alice_client.get("/runs/")
    assert first.status_code == 200
    page = first.content.decode()
    assert len(_rows(page)) == 50 and "123 runs" in page and "Page 1 of 3" in page
    # Session and user, the count, the page's keys, one query per kind, the models.
    assert len(queries) <= 8, [q["sql"][:120] for q in queries]
    last = alice_client.get("/runs/", {"page": "3"}).content.decode()
    assert len(_rows(last)) == 23
    # The oldest run is the last row of the last page.
    assert f'href="/evaluations/{world["suite"].pk}/"' in _rows(last)[-1]
    with CaptureQueriesContext(connection) as queries:
        api = alice_client.get("/api/runs/")
    assert api.json()["count"] == 123 and len(api.json()["results"]) == 50
    assert len(queries) <= 8, [q["sql"][:120] for q in queries]
    assert sorted(runs.KINDS) == ["pairs", "probing", "suite", "training"]
