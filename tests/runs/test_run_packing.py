"""Packed work tasks: an evaluation request over many suites is scored in tasks of a
token budget's worth of sentences (small suites share one task, a large suite is split
across several), and each suite is still stored, counted and managed on its own.
Real workers, the real broker and the real database where a worker is involved; the
workers' logs say how many tasks they received."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, ItemResult, PredictionResult, RunPart
from evaluations.runs import lifecycle as runs
from evaluations.runs import packing, tasks
from evaluations.scoring import worker
from evaluations.syntaxgym import services
from suites.syntaxgym import services as suite_services
from tests.celery_harness import Worker
from tests.conftest import small_suite
from tests.syntaxgym.test_evaluation_worker import _big_suite, _held_on_gpu_worker, _import, _wait


def received(worker: Worker, task: str) -> int:
    """How many messages of `task` the worker took (its log's "received" lines)."""
    return sum(
        1
        for line in worker.log.read_text().splitlines()
        if f"Task {task}[" in line and line.rstrip().endswith("received")
    )


# The plan, without a database.


def test_small_runs_share_a_task_and_a_large_one_is_split_into_equal_parts() -> None:
    small = [(1, 1, [10] * 5), (2, 1, [10] * 3), (3, 2, [10] * 4)]
    (only,) = packing.pack(small, budget=1000)
    assert [(p.run_id, p.attempt, p.index, p.count, p.size) for p in only] == [
        (1, 1, 0, 1, 5),
        (2, 1, 0, 1, 3),
        (3, 2, 0, 1, 4),
    ]
    # 100 sentences of 10 tokens in tasks of 300: four parts of 25, one task each.
    plan = packing.pack([(7, 1, [10] * 100)], budget=300)
    assert [[(p.index, p.count, p.start, p.stop) for p in task] for task in plan] == [
        [(0, 4, 0, 25)],
        [(1, 4, 25, 50)],
        [(2, 4, 50, 75)],
        [(3, 4, 75, 100)],
    ]
    # Parts cover the run once, in order, whatever the sizes.
    uneven = [3, 40, 1, 1, 7, 90, 2, 2, 2, 5, 60, 1]
    ranges = packing.split_run(uneven, budget=50)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(uneven)
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(ranges, ranges[1:], strict=False))
    assert sum(tokens for *_, tokens in ranges) == sum(uneven)


def test_a_task_is_closed_when_the_next_part_would_pass_the_budget() -> None:
    plan = packing.pack([(1, 1, [10] * 6), (2, 1, [10] * 6), (3, 1, [10] * 2)], budget=130)
    assert [[p.run_id for p in task] for task in plan] == [[1, 2], [3]]
    assert packing.estimated_tokens(["The dog ", " is", "here."]) == 5
    assert packing.estimated_tokens("The dog is here.") == 5


# Storing parts: no worker needed (the parts are scored by the real engine here).


@pytest.fixture
def split(tiny_gpt2, alice, django_capture_on_commit_callbacks):
    """Alice's 4-sentence suite, its run planned as two parts of two sentences, and each
    part's results as a worker returns them."""
    suite = suite_services.suite_import(source=small_suite("in parts"), owner=alice).suite
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    with django_capture_on_commit_callbacks(execute=True):
        outcome = services.evaluation_request(model=model, suites=[suite], user=alice)
    evaluation = outcome.evaluations[0]
    payload = services.scoring_payload(evaluation)
    sentences = payload.pop("sentences")
    parts = worker.run_scoring_groups({**payload, "groups": [sentences[:2], sentences[2:]]})
    whole = worker.run_scoring({**payload, "sentences": sentences})
    return evaluation, parts, whole


def _store_part(evaluation: Evaluation, part: int, results: dict, attempt: int = 1) -> bool:
    args = ["suite", evaluation.pk, attempt, part, 2, {"inline": results}]
    return tasks.store_part.apply(args=args).get()


@pytest.mark.django_db
def test_parts_are_stored_once_and_the_last_one_stores_the_run(split) -> None:
    evaluation, parts, whole = split
    assert _store_part(evaluation, 1, parts[1]) is True
    evaluation.refresh_from_db()
    # Half of it is there: the run is running, its progress the stored part's sentences.
    assert (evaluation.status, evaluation.progress_done, evaluation.progress_total) == (
        "running",
        2,
        4,
    )
    assert not ItemResult.objects.filter(evaluation=evaluation).exists()
    # The same part again (a re-delivered message) changes nothing.
    assert _store_part(evaluation, 1, parts[1]) is False
    assert RunPart.objects.filter(run_id=evaluation.pk, results__isnull=False).count() == 1
    assert _store_part(evaluation, 0, parts[0]) is True
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.progress_done) == ("done", 4)
    assert not RunPart.objects.exists()  # the parts are gone once the run is stored
    # ... and a late copy of either part after that writes nothing.
    assert _store_part(evaluation, 0, parts[0]) is False
    assert ItemResult.objects.filter(evaluation=evaluation).count() == 2
    assert PredictionResult.objects.filter(evaluation=evaluation).count() == 1
    # The two parts stored together equal the run scored in one piece.
    for row in ItemResult.objects.filter(evaluation=evaluation):
        index = (row.item_number - 1) * 2
        for offset, condition in enumerate(("match", "mismatch")):
            want = [r["sum"] for r in whole["sentences"][index + offset]["regions"]]
            assert row.values[condition]["sum"] == pytest.approx(want, abs=1e-4)
    assert evaluation.diagnostics == {**whole["diagnostics"]}


@pytest.mark.django_db
def test_a_part_of_an_older_attempt_or_of_a_cancelled_run_is_refused(split, alice) -> None:
    evaluation, parts, _ = split
    assert _store_part(evaluation, 0, parts[0]) is True
    runs.run_cancel(run=evaluation, user=alice)
    assert _store_part(evaluation, 1, parts[1]) is False
    evaluation.refresh_from_db()
    assert evaluation.status == "cancelled"
    evaluation = runs.run_retry(run=evaluation, user=alice)
    assert evaluation.attempt == 2
    # The first attempt's part is dropped; its late parts are refused.
    assert not RunPart.objects.filter(attempt=1).exists()
    assert _store_part(evaluation, 1, parts[1], attempt=1) is False
    assert _store_part(evaluation, 0, parts[0], attempt=2) is True
    assert _store_part(evaluation, 1, parts[1], attempt=2) is True
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.attempt) == ("done", 2)
    assert ItemResult.objects.filter(evaluation=evaluation).count() == 2


@pytest.mark.django_db
def test_a_redelivered_part_whose_file_is_gone_does_not_fail_the_run(
    split, settings, tmp_path
) -> None:
    evaluation, parts, _ = split
    settings.GYM_RUN_RESULTS_DIR = str(tmp_path)
    packed = tasks.results_pack("suite", evaluation.pk, 1, parts[0])
    args = ["suite", evaluation.pk, 1, 0, 2, packed]
    assert tasks.store_part.apply(args=args).get() is True
    # The storing worker died after its commit: the message comes again, its file gone.
    assert tasks.store_part.apply(args=args).get() is False
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.error) == ("running", "")
    # A part whose file is lost before it was ever stored fails the run with the reason.
    lost = ["suite", evaluation.pk, 1, 1, 2, {"file": "never-written.json"}]
    assert tasks.store_part.apply(args=lost).get() is False
    evaluation.refresh_from_db()
    assert evaluation.status == "failed" and "lost" in evaluation.error


@pytest.mark.django_db
def test_progress_of_a_split_run_is_the_sum_of_its_parts(split) -> None:
    evaluation, _, _ = split

    def report(part: int, done: int, restart: bool = False) -> None:
        entry = {"run": evaluation.pk, "attempt": 1, "part": part, "parts": 2}
        tasks.progress_parts.apply(args=("suite", [{**entry, "done": done, "size": 2}], restart))
        evaluation.refresh_from_db()

    report(0, 0, restart=True)
    assert (evaluation.status, evaluation.progress_done) == ("running", 0)
    report(0, 1)
    report(1, 2)
    assert evaluation.progress_done == 3
    report(1, 1)  # late message of the same delivery
    assert evaluation.progress_done == 3
    report(1, 0, restart=True)  # its worker died; another one starts that part again
    assert evaluation.progress_done == 1


# Through real workers.

real_workers = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@contextmanager
def _sweeping(every: float = 1.0) -> Iterator[None]:
    """The periodic sweep, as celery beat runs it on a site, in a thread for a while."""
    from django.db import connection

    stop = threading.Event()

    def loop() -> None:
        try:
            while not stop.wait(every):
                tasks.sweep()
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


@real_workers[0]
@real_workers[1]
def test_a_request_over_several_small_suites_is_one_task_and_each_suite_stored_alone(
    redis_broker, workers, tiny_gpt2, alice
) -> None:
    names = ["number_src", "npi_orc_any", "subordination"]
    suites = _import(names)
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    gpu = workers("celery,gpu")
    outcome = services.evaluation_request(model=model, suites=suites, user=alice)
    evaluations = _wait([e.pk for e in outcome.evaluations])
    assert [e.status for e in evaluations] == ["done"] * 3, [e.error for e in evaluations]
    assert (received(gpu, "runs.work_pack"), received(gpu, "runs.work")) == (1, 0)
    assert received(gpu, "runs.store_part") == 3  # each suite stored in its own message
    for evaluation in evaluations:
        items = ItemResult.objects.filter(evaluation=evaluation).count()
        assert items == evaluation.suite.item_count
        assert evaluation.progress_done == evaluation.progress_total > 0
    assert len({e.progress_total for e in evaluations}) == 3  # each its own sentences


@real_workers[0]
@real_workers[1]
def test_a_large_suite_split_across_tasks_stores_what_one_task_stores(
    redis_broker, workers, tiny_gpt2, alice, settings, tmp_path
) -> None:
    suite = _big_suite(60)  # 240 sentences, about 2,900 estimated tokens
    twin = tmp_path / "tiny-twin"
    shutil.copytree(tiny_gpt2, twin)  # the same model under another name
    split_model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    whole_model = model_registry.model_register(source=str(twin), name="tiny-twin")
    gpu = workers("celery,gpu", GYM_PROGRESS_EVERY_SECONDS="0")
    settings.GYM_PACK_TOKEN_BUDGET = 800  # the web side plans the tasks
    split = services.evaluation_request(model=split_model, suites=[suite], user=alice)
    (split_run,) = _wait([split.evaluations[0].pk])
    assert split_run.status == "done", split_run.error
    assert received(gpu, "runs.work_pack") == 4
    settings.GYM_PACK_TOKEN_BUDGET = 0  # packing off: one task per suite, as before
    whole = services.evaluation_request(model=whole_model, suites=[suite], user=alice)
    (whole_run,) = _wait([whole.evaluations[0].pk])
    assert whole_run.status == "done", whole_run.error
    assert (received(gpu, "runs.work_pack"), received(gpu, "runs.work")) == (4, 1)

    got = {r.item_number: r for r in ItemResult.objects.filter(evaluation=split_run)}
    want = {r.item_number: r for r in ItemResult.objects.filter(evaluation=whole_run)}
    assert sorted(got) == sorted(want) == list(range(1, 61))
    # The same numbers up to float32 noise: other batches add the same terms in another
    # order (region sums of up to ~100 bits came out 2.4e-4 apart once, a full run's
    # worker under load); a wrong context or a lost token moves a region by whole bits.
    for number, row in want.items():
        assert got[number].passed == row.passed
        for condition, metrics in row.values.items():
            assert got[number].values[condition]["sum"] == pytest.approx(
                metrics["sum"], rel=1e-5, abs=1e-4
            )
    assert split_run.accuracy == whole_run.accuracy
    assert split_run.progress_done == split_run.progress_total == 240
    assert not RunPart.objects.exists()


@real_workers[0]
@real_workers[1]
def test_cancel_and_retry_of_one_suite_of_a_pack(
    redis_broker, workers, tiny_gpt2, alice, pace
) -> None:
    suites = [_big_suite(n) for n in (120, 121, 122)]
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    env = {"GYM_RUN_HOLD_DIR": str(pace.folder), "GYM_PROGRESS_EVERY_SECONDS": "0"}
    workers("celery", **env)
    gpu = workers("gpu", **env)
    pace.hold()
    outcome = services.evaluation_request(model=model, suites=suites, user=alice)
    first, middle, last = outcome.evaluations
    # Mid-way through the one task, each suite shows its own share of the work.
    pace.wait_held(middle)
    for evaluation in (first, last):
        evaluation.refresh_from_db()
        assert evaluation.status == "running"
        assert evaluation.progress_total == 4 * evaluation.suite.item_count
    runs.run_cancel(run=middle, user=alice)
    pace.release()
    finished = _wait([e.pk for e in outcome.evaluations])
    assert [e.status for e in finished] == ["done", "cancelled", "done"]
    assert not ItemResult.objects.filter(evaluation=middle).exists()
    assert received(gpu, "runs.work_pack") == 1
    done_at = {e.pk: e.finished_at for e in finished}

    # Retrying the cancelled one sends that suite alone, in a task of its own.
    middle = runs.run_retry(run=middle, user=alice)
    (middle,) = _wait([middle.pk])
    assert (middle.status, middle.attempt) == ("done", 2)
    assert ItemResult.objects.filter(evaluation=middle).count() == 121
    assert received(gpu, "runs.work_pack") == 2
    for evaluation in Evaluation.objects.filter(pk__in=[first.pk, last.pk]):
        assert (evaluation.attempt, evaluation.finished_at) == (1, done_at[evaluation.pk])


@real_workers[0]
@real_workers[1]
def test_a_split_suite_whose_worker_dies_mid_part_is_completed_once(
    redis_broker, workers, tiny_gpt2, alice, pace, settings
) -> None:
    suite = _big_suite(400)  # 1,600 sentences, about 20,000 estimated tokens
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    settings.GYM_PACK_TOKEN_BUDGET = 12_000  # two parts, two tasks
    evaluation, gpu, env = _held_on_gpu_worker(workers, pace, settings, model, suite, alice)
    assert 0 < evaluation.progress_done < 800  # within the first part
    first_start = evaluation.started_at
    gpu.kill()
    workers("gpu", **env)
    # The killed part's message waits as unacknowledged until the visibility timeout;
    # the sweep (beat runs it on a site) sends the run again once the part that started
    # is held by nobody, though the run's other part may still be queued.
    settings.GYM_SWEEP_ORPHAN_AFTER = 2
    with _sweeping():
        evaluation = pace.wait_held(evaluation, after=first_start, timeout=240)
        pace.release()
        (evaluation,) = _wait([evaluation.pk], timeout=240)
    assert evaluation.status == "done", evaluation.error
    assert ItemResult.objects.filter(evaluation=evaluation).count() == 400
    assert PredictionResult.objects.filter(evaluation=evaluation).count() == 1
    assert evaluation.progress_done == evaluation.progress_total == 1600
    assert not RunPart.objects.exists()
