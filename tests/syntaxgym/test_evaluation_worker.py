"""Integration: real Redis, a real Celery worker process, the real database (PostgreSQL
in CI), a tiny local model loaded through the same path as a hub model."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from evaluations import scoring
from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, ItemResult, LanguageModel, PredictionResult
from evaluations.syntaxgym import services
from suites import formats
from suites.models import Suite
from suites.syntaxgym import services as suite_services
from tests.celery_harness import broker, flush_redis, redelivery_env, redis_or_skip
from tests.conftest import SHARED_DATA, token_client

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

NEXTFLOW = SHARED_DATA / "syntaxgym-2020" / "nextflow"
SUITES = ["number_src", "npi_orc_any", "subordination"]


def _wait(pks: list[int], timeout: float = 240) -> list[Evaluation]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        evaluations = list(Evaluation.objects.filter(pk__in=pks).order_by("pk"))
        if all(e.finished for e in evaluations):
            return evaluations
        time.sleep(0.5)
    states = list(
        Evaluation.objects.filter(pk__in=pks).values_list("pk", "status", "progress_done", "error")
    )
    raise AssertionError(f"evaluations not finished after {timeout}s: {states}")


def _import(names: list[str]) -> list[Suite]:
    if not NEXTFLOW.is_dir():
        pytest.skip("shared data not found")
    return [
        suite_services.suite_import(source=(NEXTFLOW / f"{n}.json").read_bytes(), owner=None).suite
        for n in names
    ]


def test_end_to_end_through_a_real_worker(redis_broker, workers, tiny_gpt2, alice) -> None:
    suites = _import(SUITES)
    model = model_registry.model_register(
        source=str(tiny_gpt2), name="tiny", display_name="Tiny GPT-2"
    )
    assert model.kind == "causal"
    workers()
    client = token_client(alice)
    response = client.post(
        "/api/evaluations/",
        json.dumps({"model": "tiny", "suites": SUITES}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    pks = [e["id"] for e in response.json()]
    evaluations = _wait(pks)
    assert [e.status for e in evaluations] == ["done"] * 3, [e.error for e in evaluations]

    # Asking again returns the same evaluations and runs nothing.
    again = client.post(
        "/api/evaluations/",
        json.dumps({"model": "tiny", "suites": SUITES}),
        content_type="application/json",
    )
    assert again.status_code == 200 and [e["id"] for e in again.json()] == pks

    # Stored region values equal the scoring engine called directly.
    loaded = scoring.load_model(str(tiny_gpt2))
    for evaluation, suite in zip(evaluations, suites, strict=True):
        keys = formats.sentences(evaluation.snapshot)
        direct = scoring.score_sentences(loaded, [regions for _i, _c, regions in keys])
        stored = {r.item_number: r for r in ItemResult.objects.filter(evaluation=evaluation)}
        assert len(stored) == suite.item_count
        for (item_number, condition, _regions), score in zip(keys, direct, strict=True):
            got = stored[item_number].values[condition]["sum"]
            want = [region.metrics["sum"] for region in score.regions]
            assert got == pytest.approx(want, abs=1e-4)
        assert evaluation.progress_done == evaluation.progress_total == len(keys)
        assert evaluation.model_info.get("kind") == "causal"

    # Accuracy of number_src against its prediction evaluated by hand.
    number_src = evaluations[0]
    assert number_src.suite.name == "number_src"
    formulas = [p["formula"] for p in number_src.snapshot["predictions"]]
    assert formulas == [
        "(7;%match_sing%) < (7;%mismatch_sing%) & (7;%match_plural%) < (7;%mismatch_plural%)"
    ]
    items = ItemResult.objects.filter(evaluation=number_src)
    verb = 6  # region 7, the verb
    by_hand = [
        r.values["match_sing"]["sum"][verb] < r.values["mismatch_sing"]["sum"][verb]
        and r.values["match_plural"]["sum"][verb] < r.values["mismatch_plural"]["sum"][verb]
        for r in items
    ]
    assert [r.passed for r in items] == by_hand
    assert number_src.accuracy == pytest.approx(sum(by_hand) / len(by_hand))
    only = PredictionResult.objects.get(evaluation=number_src, position=0)
    assert (only.passed, only.evaluated) == (sum(by_hand), len(by_hand))
    # The evaluation page shows it.
    page = client.get(f"/evaluations/{number_src.pk}/").content.decode()
    assert "Done" in page


def _big_suite(items: int) -> Suite:
    """number_src repeated to `items` items, each sentence made unique: large enough that
    scoring takes a few seconds with the tiny model."""
    if not NEXTFLOW.is_dir():
        pytest.skip("shared data not found")
    data = json.loads((NEXTFLOW / "number_src.json").read_text())
    base = data["items"]
    data["items"] = [{**base[i % len(base)], "item_number": i + 1} for i in range(items)]
    for i, item in enumerate(data["items"]):
        item["conditions"] = [
            {
                **c,
                "regions": [
                    *c["regions"][:-1],
                    {**c["regions"][-1], "content": f"{c['regions'][-1]['content']} {i}"},
                ],
            }
            for c in item["conditions"]
        ]
    data["meta"]["name"] = f"number_src x{items}"
    return suite_services.suite_import(source=data, owner=None).suite


def _held_on_gpu_worker(
    workers: Any, pace: Any, settings: Any, model: Any, suite: Suite, user: Any
) -> tuple[Evaluation, Any, dict[str, str]]:
    """An evaluation of `model` on `suite` held mid-run on a GPU worker that a test may
    kill (Redis re-delivers its message after the visibility timeout), with storing and
    progress on another worker as deployed, so that progress is stored while the scoring
    runs: the evaluation, the GPU worker and the workers' environment."""
    env = redelivery_env(settings, pace)
    workers("celery", **env)
    gpu = workers("gpu", **env)
    pace.hold()
    evaluation = services.evaluation_request(model=model, suites=[suite], user=user).evaluations[0]
    return pace.wait_held(evaluation), gpu, env


def test_worker_killed_mid_run_is_completed_once_by_a_restarted_worker(
    redis_broker, workers, tiny_gpt2, alice, pace, settings
) -> None:
    suite = _big_suite(400)
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    evaluation, gpu, env = _held_on_gpu_worker(workers, pace, settings, model, suite, alice)
    assert 0 < evaluation.progress_done < 1600
    first_start = evaluation.started_at
    gpu.kill()
    evaluation.refresh_from_db()
    assert evaluation.status == "running"  # killed mid-scoring: nothing to store yet
    assert not ItemResult.objects.filter(evaluation=evaluation).exists()

    # Redis hands the message to a new GPU worker once its visibility timeout has
    # passed; that delivery starts the run's progress and clock again.
    workers("gpu", **env)
    evaluation = pace.wait_held(evaluation, after=first_start, timeout=240)
    assert evaluation.started_at > first_start
    pace.release()
    (evaluation,) = _wait([evaluation.pk], timeout=240)
    assert evaluation.status == "done", evaluation.error
    assert ItemResult.objects.filter(evaluation=evaluation).count() == 400
    assert PredictionResult.objects.filter(evaluation=evaluation).count() == 1
    assert Evaluation.objects.filter(suite=suite, model=model).count() == 1
    assert evaluation.progress_done == evaluation.progress_total == 1600


def test_a_run_over_the_time_limit_fails_with_its_reason(
    redis_broker, workers, tiny_gpt2, alice, pace, settings
) -> None:
    suite = _big_suite(400)
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    # A hard limit of 2 s puts the soft limit at 1 s; the run is held mid-way (if it gets
    # that far) until a limit stops it.
    settings.CELERY_TASK_HARD_TIME_LIMIT = 2  # the limits travel with the message
    workers("celery,gpu", GYM_RUN_HOLD_DIR=str(pace.folder))
    pace.hold()
    evaluation = services.evaluation_request(model=model, suites=[suite], user=alice).evaluations[0]
    (evaluation,) = _wait([evaluation.pk], timeout=120)
    assert evaluation.status == "failed"
    # The soft limit (1 s) ends it with its reason; when it strikes inside code that
    # swallows it (importing torch), the hard limit (2 s) does.
    assert re.search(r"longer than this site's limit of [12] s", evaluation.error)
    assert "CELERY_TASK_HARD_TIME_LIMIT" in evaluation.error
    assert not ItemResult.objects.filter(evaluation=evaluation).exists()


def test_redis_down_at_request_time_gives_a_clear_message_then_works(
    workers,
    tiny_gpt2,
    alice,
) -> None:
    url = redis_or_skip()
    suite = _import(["number_src"])[0]
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    client = token_client(alice)
    body = json.dumps({"model": "tiny", "suites": [suite.name]})
    with broker("redis://127.0.0.1:1/0"):  # nothing listens there
        response = client.post("/api/evaluations/", body, content_type="application/json")
    assert response.status_code == 503
    assert "could not be reached" in response.json()["errors"][0]["message"]
    evaluation = Evaluation.objects.get()
    assert evaluation.status == "queued" and not evaluation.enqueued
    with broker(url):
        workers()
        response = client.post("/api/evaluations/", body, content_type="application/json")
        assert response.status_code == 200
        (evaluation,) = _wait([evaluation.pk])
    assert evaluation.status == "done"
    flush_redis()


def test_missing_model_fails_permanently_with_reason_and_can_be_retried(
    redis_broker,
    workers,
    tiny_gpt2,
    alice,
    alice_client,
) -> None:
    suite = _import(["number_src"])[0]
    missing = LanguageModel.objects.create(
        name="ghost", display_name="Ghost", source="/nonexistent/model"
    )
    workers()
    # Alice asks, so she may retry it.
    evaluation = services.evaluation_request(model=missing, suites=[suite], user=alice).evaluations[
        0
    ]
    (evaluation,) = _wait([evaluation.pk], timeout=120)
    assert evaluation.status == "failed"
    assert "could not be loaded" in evaluation.error
    page = alice_client.get(evaluation.get_absolute_url()).content.decode()
    assert "Retry" in page and "could not be loaded" in page
    # The model appears where it was expected; a retry then succeeds.
    LanguageModel.objects.filter(pk=missing.pk).update(source=str(tiny_gpt2))
    response = alice_client.post_form(f"/evaluations/{evaluation.pk}/retry/")
    assert response.status_code == 302
    (evaluation,) = _wait([evaluation.pk], timeout=120)
    assert evaluation.status == "done" and evaluation.attempt == 2
    assert ItemResult.objects.filter(evaluation=evaluation).count() == suite.item_count
