"""One run lifecycle, the same for every kind of run: the contract is written once and
runs over `runs.KINDS`, so that a kind registered later is held to it the moment it
registers (the first test fails until the kind says how a test asks for one of its runs).

Through the kind's own API and pages, as a person would: the request, the run's page and
API detail agreeing at every step, progress, failure with its reason, retry as a new
attempt, cancel while queued and while running, a late result of a cancelled or earlier
attempt refused, and outdated once the benchmark's content changes. What the worker
computes is each kind's own and is tested in its package (tests/<kind>/); a run on a
real worker, killed mid-run, is tests/runs/test_run_faults.py and test_site_faults.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from evaluations.models import LanguageModel, Run
from evaluations.runs import lifecycle as runs
from suites.corpora.services import corpus_import
from suites.minimal_pairs.sets import minimal_pair_set_import
from suites.probing.services import probing_task_import
from suites.syntaxgym.services import suite_import
from tests.conftest import EXAMPLES, BrowserClient, small_suite, token_client, tsv_lines

pytestmark = pytest.mark.django_db

PROBING_LINES = tsv_lines(
    [
        ("tr", "A", "the dog barks ."),
        ("tr", "B", "the dogs bark ."),
        ("va", "A", "a cat sleeps ."),
        ("va", "B", "the cats sleep ."),
        ("te", "A", "the bird sings ."),
        ("te", "B", "the birds sing ."),
    ]
)
CORPUS_LINES = "".join(f"the {w} sat on the mat .\n" for w in ("cat", "dog", "bird") * 20)


@dataclass(frozen=True)
class Case:
    """How a test asks for one run of a kind through the kind's API: the benchmark it
    makes for `owner`, and the request's path and body for the model named `model`."""

    benchmark: Callable[[User, Path], Any]
    request_path: str
    body: Callable[[Any, str], dict[str, Any]]


CASES: dict[str, Case] = {
    "suite": Case(
        benchmark=lambda owner, _: (
            suite_import(source=small_suite("contract suite"), owner=owner).suite
        ),
        request_path="/api/evaluations/",
        body=lambda suite, model: {"models": [model], "suites": [suite.name]},
    ),
    "pairs": Case(
        benchmark=lambda owner, _: (
            minimal_pair_set_import(
                data=(EXAMPLES / "minimal_pairs" / "agreement_minimal_pairs.tsv").read_bytes(),
                name="contract pairs",
                owner=owner,
            ).pair_set
        ),
        request_path="/api/pairs/evaluations/",
        body=lambda pair_set, model: {"models": [model], "sets": [pair_set.name]},
    ),
    "probing": Case(
        benchmark=lambda owner, _: probing_task_import(
            source=PROBING_LINES, name="contract task", owner=owner
        ),
        request_path="/api/probing-runs/",
        body=lambda task, model: {"models": [model], "task": task.name},
    ),
    "training": Case(
        benchmark=lambda owner, folder: corpus_import(
            source=_written(folder / "corpus.txt", CORPUS_LINES), name="contract", owner=owner
        ),
        request_path="/api/training-runs/",
        body=lambda corpus, _: {"corpus": corpus.name, "name": "contract-lm", "kind": "ngram"},
    ),
}


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_every_registered_kind_is_held_to_the_contract() -> None:
    assert set(runs.KINDS) == set(CASES), (
        "a kind of run was registered without a case here: add how a test asks for one "
        "of its runs to CASES"
    )


@dataclass
class Asked:
    kind: runs.RunKind
    run: Run
    owner: BrowserClient

    @property
    def api(self) -> str:
        return reverse(self.kind.api_detail, args=[self.run.pk])

    @property
    def page(self) -> str:
        return self.run.get_absolute_url()

    def refreshed(self) -> Run:
        self.run.refresh_from_db()
        return self.run

    def read(self, client: BrowserClient | None = None) -> tuple[dict[str, Any], str]:
        """The run as its API detail and its page show it, to the owner by default."""
        client = client or self.owner
        answer = client.get(self.api)
        assert answer.status_code == 200, answer.content
        page = client.get(self.page)
        assert page.status_code == 200
        return answer.json(), page.content.decode()

    def post(self, action: str, client: BrowserClient | None = None) -> Any:
        return (client or self.owner).post(
            f"{self.api}{action}/", "{}", content_type="application/json"
        )


@pytest.fixture(params=sorted(CASES))
def asked(request, alice, settings, tmp_path) -> Asked:
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"
    settings.GYM_TRAINING_DIR = tmp_path / "trained"
    kind = runs.kind_named(request.param)
    case = CASES[request.param]
    benchmark = case.benchmark(alice, tmp_path)
    LanguageModel.objects.create(name="m", display_name="M", source="/models/m")
    client = token_client(alice)
    answer = client.post(
        case.request_path, case.body(benchmark, "m"), content_type="application/json"
    )
    assert answer.status_code == 201, answer.content
    created = kind.run_model.objects.get()
    return Asked(kind=kind, run=created, owner=client)


def _shows_status(page: str, status: str) -> bool:
    return re.search(rf"\b{status}\b", page, re.IGNORECASE) is not None


def test_a_request_makes_one_queued_run_that_page_and_api_agree_on(asked: Asked) -> None:
    run = asked.refreshed()
    assert (run.status, run.attempt) == ("queued", 1)
    assert asked.kind.build_payload(run)  # what a worker gets, built from the run alone
    detail, page = asked.read()
    assert (detail["id"], detail["status"], detail["attempt"]) == (run.pk, "queued", 1)
    assert _shows_status(page, "queued")
    # The Runs page of every kind lists it, under its kind's name.
    listed = asked.owner.get(f"/api/runs/?kind={asked.kind.name}").json()["results"]
    assert [(r["kind"], r["id"], r["status"]) for r in listed] == [
        (asked.kind.name, run.pk, "queued")
    ]


def test_progress_then_failure_with_its_reason_then_retry_as_a_new_attempt(
    asked: Asked,
) -> None:
    kind, run = asked.kind, asked.run
    runs.run_progress(kind=kind, run_id=run.pk, attempt=1, done=1, total=4, restart=True)
    runs.run_progress(kind=kind, run_id=run.pk, attempt=1, done=3, total=4)
    # A late report of fewer done changes nothing.
    runs.run_progress(kind=kind, run_id=run.pk, attempt=1, done=2, total=4)
    detail, page = asked.read()
    assert detail["status"] == "running" and asked.refreshed().progress_done == 3
    assert _shows_status(page, "running")

    assert runs.run_fail(kind=kind, run_id=run.pk, attempt=1, reason="The GPU fell over.")
    detail, page = asked.read()
    assert (detail["status"], detail["error"]) == ("failed", "The GPU fell over.")
    assert "The GPU fell over." in page

    retried = asked.post("retry")
    assert retried.status_code == 200, retried.content
    assert (retried.json()["status"], retried.json()["attempt"]) == ("queued", 2)
    run = asked.refreshed()
    assert (run.status, run.attempt, run.error, run.progress_done) == ("queued", 2, "", 0)
    # The first attempt's worker is stale now: its reports change nothing.
    assert not runs.run_fail(kind=kind, run_id=run.pk, attempt=1, reason="late")
    runs.run_progress(kind=kind, run_id=run.pk, attempt=1, done=4, total=4)
    assert asked.refreshed().status == "queued"
    # Retrying a queued run that is already sent, or a done one, is a conflict.
    type(run).objects.filter(pk=run.pk).update(enqueued=True)
    assert asked.post("retry").status_code == 409


@pytest.mark.parametrize("state", ["queued", "running"])
def test_cancel_refuses_the_attempt_s_late_results(asked: Asked, state: str) -> None:
    kind, run = asked.kind, asked.run
    if state == "running":
        runs.run_progress(kind=kind, run_id=run.pk, attempt=1, done=1, total=4, restart=True)
    cancelled = asked.post("cancel")
    assert cancelled.status_code == 200, cancelled.content
    assert cancelled.json()["status"] == "cancelled"
    detail, page = asked.read()
    assert detail["status"] == "cancelled" and "Cancelled by alice" in detail["error"]
    assert _shows_status(page, "cancelled")
    # Whatever the worker still sends for this attempt is refused; the run stays cancelled.
    assert not runs.run_advance(kind, run.pk, 1, "done")
    assert not runs.run_fail(kind=kind, run_id=run.pk, attempt=1, reason="late")
    assert asked.refreshed().status == "cancelled"
    # A second cancel is a conflict; a retry starts a new attempt.
    assert asked.post("cancel").status_code == 409
    assert asked.post("retry").json()["attempt"] == 2


def test_only_the_owner_the_requester_or_staff_may_manage_a_run(
    asked: Asked, charlie_client, dana_client
) -> None:
    stranger = token_client(User.objects.get(username="charlie"))
    assert asked.post("cancel", stranger).status_code == 403
    assert asked.refreshed().status == "queued"
    staff = token_client(User.objects.get(username="dana"))
    assert asked.post("cancel", staff).status_code == 200
    # Anonymous readers see the run but may not act on it.
    anonymous = BrowserClient()
    assert anonymous.get(asked.api).status_code == 200
    assert asked.post("retry", anonymous).status_code == 401


def test_a_run_is_outdated_once_its_benchmark_s_content_changes(asked: Asked) -> None:
    run = asked.refreshed()
    assert asked.read()[0]["outdated"] is False
    benchmark = run.benchmark
    type(benchmark).objects.filter(pk=benchmark.pk).update(content_hash="0" * 64)
    detail, _ = asked.read()
    assert detail["outdated"] is True
