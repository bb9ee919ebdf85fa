"""A large store on SQLite is written in bounded transactions (issue 23), yet a run
becomes visible only whole: readers show no rows of a run that is not done, a store
killed half way is completed once by the next delivery, two deliveries never both write,
and a web write made while a store is under way gets the lock.

The stores here pause between two transactions on a file the test controls (the
GYM_RUN_HOLD_DIR hook), so nothing depends on how fast the machine writes. The chunked
store is SQLite's: those tests are skipped on PostgreSQL, where the store is one
transaction. The readers' test runs on both."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, ItemResult, PredictionResult, RunPart
from evaluations.runs import lifecycle as runs
from evaluations.runs import tasks
from evaluations.scoring import worker
from evaluations.syntaxgym import comparisons, exports, items, selectors, services
from suites.syntaxgym import selectors as suite_selectors
from suites.syntaxgym import services as suite_services
from tests.celery_harness import database_url, until
from tests.conftest import agreement_item, suite_document

pytestmark = pytest.mark.django_db(transaction=True)

ITEMS = 30
REPO = Path(__file__).resolve().parents[2]


def sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the chunked store is SQLite's; PostgreSQL stores in one transaction")


def _suite_data(items: int, name: str) -> dict[str, Any]:
    every = {n + 1: agreement_item("The dog", f"here {n}.") for n in range(items)}
    return suite_document(name, every, ["(2;%mismatch%) > (2;%match%)"])


@pytest.fixture
def held(tmp_path, settings) -> Path:
    """Stores in this process write 10 rows a transaction and wait after each while the
    file `hold-store` is in the returned folder."""
    folder = tmp_path / "hold"
    folder.mkdir()
    settings.GYM_RUN_HOLD_DIR = str(folder)
    settings.GYM_STORE_CHUNK_ROWS = 10
    settings.GYM_STORE_CHUNK_SECONDS = 3600
    settings.GYM_STORE_CHUNK_PAUSE_SECONDS = 0
    return folder


@pytest.fixture
def scored(tiny_gpt2) -> tuple[Evaluation, dict[str, Any]]:
    """A requested evaluation of ITEMS items and the worker's results for it."""
    suite = suite_services.suite_import(
        source=_suite_data(ITEMS, "store in chunks"), owner=None
    ).suite
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    snapshot = suite_selectors.suite_canonical(suite)
    # The row a request makes, without publishing its work (no worker here).
    evaluation = services.evaluation_create(
        model=model,
        suite=suite,
        content_hash=suite.content_hash,
        snapshot=snapshot,
        progress_total=2 * ITEMS,
        enqueued=True,
    )
    evaluation.refresh_from_db()
    return evaluation, worker.run_scoring(services.scoring_payload(evaluation))


def _rows(evaluation: Evaluation) -> int:
    return ItemResult.objects.filter(evaluation_id=evaluation.pk).count()


def _store_in_thread(evaluation: Evaluation, results: dict[str, Any]) -> tuple[Any, list[Any]]:
    answer: list[Any] = []

    def store() -> None:
        try:
            answer.append(
                services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results)
            )
        except Exception as exc:  # noqa: BLE001 - handed to the test
            answer.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=store)
    thread.start()
    return thread, answer


@contextmanager
def _store_held_half_way(
    held: Path, evaluation: Evaluation, results: dict[str, Any]
) -> Iterator[tuple[threading.Thread, list[Any]]]:
    """A store in a thread, held after its first transaction (its rows committed) until
    the block ends; yields the thread and its answer, both still to be waited for."""
    (held / "hold-store").touch()
    thread, answer = _store_in_thread(evaluation, results)
    try:
        until("rows committed", lambda: _rows(evaluation) >= 10 or answer, timeout=120, every=0.05)
        yield thread, answer
    finally:
        (held / "hold-store").unlink()


def _assert_nothing_shown(client: Any, evaluation: Evaluation) -> None:
    """No page, export, comparison or count shows a row of the evaluation."""
    pk = evaluation.pk
    for url in (
        f"/evaluations/{pk}/results/",
        f"/evaluations/{pk}/items/1/",
        f"/evaluations/{pk}/results.json",
        f"/evaluations/{pk}/results.csv",
        f"/api/evaluations/{pk}/results/",
    ):
        assert client.get(url).status_code == 404, url
    evaluation = Evaluation.objects.select_related("model", "suite").get(pk=pk)
    assert selectors.item_counts(Evaluation.objects.filter(pk=pk)) == {}
    assert list(selectors.export_item_rows([pk])) == []
    assert selectors.result_page(evaluation).items == []
    assert items.item_result(evaluation, 1) is None
    document = exports.results_document(evaluation)
    assert all(
        value is None
        for item in document["items"]
        for condition in item["conditions"]
        for region in condition["regions"]
        for value in region["metric_value"].values()
    )
    assert document["results"]["items_evaluated"] == 0
    assert comparisons._outcomes([pk, pk]) == {}


def test_readers_show_no_rows_of_a_run_that_is_not_done(scored, client) -> None:
    """Rows a store has written before the run is done (a half-done chunked store, or a
    retried run's old rows) are shown nowhere; once done, they are."""
    evaluation, results = scored
    assert services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results)
    assert client.get(f"/evaluations/{evaluation.pk}/items/1/").status_code == 200
    assert selectors.item_counts(Evaluation.objects.filter(pk=evaluation.pk))
    # Every row in, but the run not done: as a chunked store leaves it before its last
    # transaction.
    Evaluation.objects.filter(pk=evaluation.pk).update(status=Evaluation.Status.RUNNING)
    assert _rows(evaluation) == ITEMS
    _assert_nothing_shown(client, evaluation)


def test_a_large_store_is_written_in_several_transactions_and_done_only_in_the_last(
    scored, held, client, caplog
) -> None:
    sqlite_only()
    evaluation, results = scored
    caplog.set_level(logging.INFO, logger="evaluations.syntaxgym.services")
    with _store_held_half_way(held, evaluation, results) as (thread, answer):
        # The first transaction committed its rows; the store waits before the next.
        assert answer == [] and _rows(evaluation) == 10
        evaluation.refresh_from_db()
        assert evaluation.status != Evaluation.Status.DONE
        assert evaluation.store_claim
        _assert_nothing_shown(client, evaluation)
    thread.join(120)
    assert answer == [True]
    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.DONE and evaluation.store_claim == ""
    assert _rows(evaluation) == ITEMS
    assert PredictionResult.objects.filter(evaluation=evaluation).count() == 1
    # 30 rows at 10 a transaction, the last with the done transition.
    assert f"stored {ITEMS} item rows of evaluation {evaluation.pk} in 4 transactions" in (
        caplog.text
    )
    assert client.get(f"/evaluations/{evaluation.pk}/items/{ITEMS}/").status_code == 200


def test_a_web_write_made_while_a_store_is_under_way_gets_the_lock(scored, held) -> None:
    """With the store half done (between two of its transactions), another connection
    that waits at most half a second for the lock writes, and so does the site's own
    service; the store then completes."""
    sqlite_only()
    evaluation, results = scored
    with _store_held_half_way(held, evaluation, results) as (thread, answer):
        other = sqlite3.connect(connection.settings_dict["NAME"], timeout=0.5)
        other.isolation_level = None
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE auth_user SET first_name = 'x' WHERE id = -1")
        other.execute("COMMIT")
        other.close()
        suite = suite_services.suite_import(source=_suite_data(2, "uploaded meanwhile"), owner=None)
        assert suite.suite.pk
    thread.join(120)
    assert answer == [True]
    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.DONE and _rows(evaluation) == ITEMS


def test_a_second_delivery_takes_the_store_over_and_the_first_writes_no_more(scored, held) -> None:
    """Two deliveries of one attempt: the later claim wins, removes the earlier one's
    rows and completes the run; the earlier one stops at its next transaction."""
    sqlite_only()
    evaluation, results = scored
    with _store_held_half_way(held, evaluation, results) as (thread, answer):
        first_claim = Evaluation.objects.get(pk=evaluation.pk).store_claim
        # The second delivery runs while the first waits, and is held in turn until the
        # file goes: it runs in a thread too.
        second, second_answer = _store_in_thread(evaluation, results)
        until(
            "the second delivery claimed the store",
            lambda: Evaluation.objects.get(pk=evaluation.pk).store_claim not in ("", first_claim),
            timeout=120,
            every=0.05,
        )
    thread.join(120)
    second.join(120)
    assert answer == [False] and second_answer == [True]
    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.DONE
    numbers = list(
        ItemResult.objects.filter(evaluation=evaluation).values_list("item_number", flat=True)
    )
    assert sorted(numbers) == list(range(1, ITEMS + 1))
    assert services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results) is False


@pytest.mark.parametrize("close", ["cancel", "fail"])
def test_a_run_closed_while_its_store_is_under_way_keeps_none_of_its_rows(
    scored, held, admin_user, close: str
) -> None:
    """Cancelled (or failed) half way through its store: the store stops at its next
    transaction and removes the rows it had written, instead of leaving them, hidden,
    until a retry; a retry then stores the run whole."""
    sqlite_only()
    evaluation, results = scored
    with _store_held_half_way(held, evaluation, results) as (thread, answer):
        assert _rows(evaluation) >= 10
        if close == "cancel":
            runs.run_cancel(run=Evaluation.objects.get(pk=evaluation.pk), user=admin_user)
        else:
            assert runs.run_fail(kind=services.SUITE_RUNS, run_id=evaluation.pk, attempt=1,
                                 reason="the worker gave up")  # fmt: skip
    thread.join(120)
    assert answer == [False]
    evaluation.refresh_from_db()
    assert evaluation.status == (Evaluation.Status.CANCELLED if close == "cancel" else
                                 Evaluation.Status.FAILED)  # fmt: skip
    assert _rows(evaluation) == 0
    retried = runs.run_retry(run=evaluation, user=admin_user)
    assert services.results_store(evaluation_id=retried.pk, attempt=2, results=results) is True
    assert _rows(evaluation) == ITEMS


def test_a_store_killed_half_way_is_completed_once_by_the_next_delivery(
    scored, held, tmp_path
) -> None:
    """A real process storing the results is killed (SIGKILL) between two of its
    transactions: the run stays not done with some rows; the next delivery removes them
    and writes every item once; a stale attempt writes nothing."""
    sqlite_only()
    evaluation, results = scored
    packed = tmp_path / "results.json"
    packed.write_text(json.dumps(results))
    (held / "hold-store").touch()
    script = (
        "import django, json, sys; django.setup(); "
        "from evaluations.runs import tasks; "
        "tasks.store.apply(args=['suite', int(sys.argv[1]), 1, "
        "{'inline': json.load(open(sys.argv[2]))}]).get()"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gym.settings",
        "DATABASE_URL": database_url(),
        "GYM_RUN_HOLD_DIR": str(held),
        "GYM_STORE_CHUNK_ROWS": "10",
        "GYM_STORE_CHUNK_SECONDS": "3600",
        "GYM_STORE_CHUNK_PAUSE_SECONDS": "0",
    }
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(evaluation.pk), str(packed)], cwd=REPO, env=env
    )
    try:
        until(
            "rows committed",
            lambda: _rows(evaluation) >= 10 or process.poll() is not None,
            timeout=180,
            every=0.05,
        )
        assert process.poll() is None
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
        (held / "hold-store").unlink()
    evaluation.refresh_from_db()
    assert evaluation.status != Evaluation.Status.DONE and _rows(evaluation) == 10
    # A stale attempt writes nothing, not even a claim.
    assert tasks.store.apply(args=["suite", evaluation.pk, 2, {"inline": results}]).get() is False
    assert Evaluation.objects.get(pk=evaluation.pk).store_claim == evaluation.store_claim
    assert tasks.store.apply(args=["suite", evaluation.pk, 1, {"inline": results}]).get() is True
    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.DONE
    numbers = list(
        ItemResult.objects.filter(evaluation=evaluation).values_list("item_number", flat=True)
    )
    assert sorted(numbers) == list(range(1, ITEMS + 1))
    assert tasks.store.apply(args=["suite", evaluation.pk, 1, {"inline": results}]).get() is False
    assert _rows(evaluation) == ITEMS


def test_a_split_run_whose_store_died_is_stored_by_a_part_redelivered_without_its_file(
    scored, settings, tmp_path
) -> None:
    """Both parts kept (the delivery of the last one died while storing the whole run,
    after its file was read): the re-delivered message of a part, whose file is gone,
    stores the run; the parts are removed once it is done."""
    evaluation, results = scored
    half = len(results["sentences"]) // 2
    parts = [
        {**results, "sentences": results["sentences"][:half]},
        {**results, "sentences": results["sentences"][half:]},
    ]
    kind = runs.kind_named("suite")
    assert runs.run_part_store(
        kind=kind, run_id=evaluation.pk, attempt=1, part=0, parts=2, results=parts[0]
    )
    # The last part kept as its store would keep it, the run not stored: a death between.
    RunPart.objects.filter(run_id=evaluation.pk, index=1).delete()
    RunPart.objects.create(
        kind="suite",
        run_id=evaluation.pk,
        attempt=1,
        count=2,
        index=1,
        size=len(parts[1]["sentences"]),
        done=len(parts[1]["sentences"]),
        results=parts[1],
    )
    evaluation.refresh_from_db()
    assert evaluation.status != Evaluation.Status.DONE
    settings.GYM_RUN_RESULTS_DIR = str(tmp_path)
    gone = {"file": "part-1.json"}
    assert tasks.store_part.apply(args=["suite", evaluation.pk, 1, 1, 2, gone]).get() is True
    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.DONE and _rows(evaluation) == ITEMS
    assert not RunPart.objects.filter(run_id=evaluation.pk).exists()
    assert tasks.store_part.apply(args=["suite", evaluation.pk, 1, 1, 2, gone]).get() is False
