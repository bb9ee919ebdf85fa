"""The lifecycle contract's real-worker half, over every registered kind: a run asked for
through the kind's API is taken by a real Celery worker (scoring on the gpu queue,
storing on the default queue, as deployed), held mid-way after a progress report, its
pool process killed as the OOM killer would, and the run is delivered again at once and
done exactly once; or cancelled mid-way, and the worker stops at its next report and takes
the next message. Like tests/runs/test_lifecycle_contract.py, a kind registered without
a case here fails."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from evaluations.language_models import registry as model_registry
from evaluations.models import ItemResult, LanguageModel, PairSentenceTokens
from evaluations.runs import lifecycle as runs
from suites.corpora.services import corpus_import
from suites.minimal_pairs.sets import minimal_pair_set_import
from suites.probing.services import probing_task_import
from tests.celery_harness import Pace, Worker, wait_finished
from tests.conftest import token_client
from tests.runs.test_lifecycle_contract import CORPUS_LINES, PROBING_LINES
from tests.syntaxgym.test_evaluation_worker import _big_suite

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PAIRS = 1000  # enough batches (the engine batches by tokens) that a run is held mid-way


def _pairs_tsv() -> bytes:
    rows = ["sentid\tpairid\tcomparison\tsentence\tROI\tphenomenon"]
    for pair in range(1, PAIRS + 1):
        rows.append(f"{2 * pair - 1}\t{pair}\texpected\tThe key {pair} is on the table.\t4\tagr")
        rows.append(f"{2 * pair}\t{pair}\tunexpected\tThe key {pair} are on the table.\t4\tagr")
    return ("\n".join(rows) + "\n").encode()


@dataclass(frozen=True)
class WorkerCase:
    """A benchmark big enough to be held mid-way, the API request for it, and what one
    store of the run wrote (to tell once from twice)."""

    request_path: str
    body: Callable[[Path, str], dict[str, Any]]
    stored: Callable[[Any], Any]


def _suite_body(_: Path, model: str) -> dict[str, Any]:
    return {"models": [model], "suites": [_big_suite(400).name]}


def _pairs_body(_: Path, model: str) -> dict[str, Any]:
    pair_set = minimal_pair_set_import(data=_pairs_tsv(), name="held pairs", owner=None).pair_set
    return {"models": [model], "sets": [pair_set.name]}


def _probing_body(_: Path, model: str) -> dict[str, Any]:
    task = probing_task_import(source=PROBING_LINES, name="held task", owner=None)
    return {"models": [model], "task": task.name}


def _training_body(folder: Path, _: str) -> dict[str, Any]:
    source = folder / "corpus.txt"
    source.write_text(CORPUS_LINES * 4)
    corpus = corpus_import(source=source, name="held corpus", owner=None)
    options = {"preset": "tiny", "steps": 4, "checkpoints": 2, "micro_batch": 4}
    return {"corpus": corpus.name, "name": "held-lm", "kind": "causal", "options": options}


CASES: dict[str, WorkerCase] = {
    "suite": WorkerCase(
        "/api/evaluations/",
        _suite_body,
        lambda run: ItemResult.objects.filter(evaluation_id=run.pk).count(),
    ),
    "pairs": WorkerCase(
        "/api/pairs/evaluations/",
        _pairs_body,
        lambda run: PairSentenceTokens.objects.filter(evaluation_id=run.pk).count(),
    ),
    "probing": WorkerCase(
        "/api/probing-runs/",
        _probing_body,
        lambda run: run.layers.count(),
    ),
    "training": WorkerCase(
        "/api/training-runs/",
        _training_body,
        lambda run: sorted(
            LanguageModel.objects.filter(name__startswith="held-lm").values_list("name", flat=True)
        ),
    ),
}

EXPECTED = {
    "suite": 400,
    "pairs": 2 * PAIRS,
    "probing": None,  # the tiny model's layers, read from its config below
    # The last step's checkpoint is the finished model itself (issue 46, defect 5).
    "training": ["held-lm", "held-lm-256"],
}


def test_every_registered_kind_has_a_worker_case() -> None:
    assert set(runs.KINDS) == set(CASES) == set(EXPECTED)


def _pool_of(worker: Worker) -> int:
    """The worker's one pool process (its main process's child)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        children = Path(f"/proc/{worker.process.pid}/task/{worker.process.pid}/children")
        pids = [int(p) for p in children.read_text().split()] if children.exists() else []
        if len(pids) == 1:
            return pids[0]
        time.sleep(0.2)
    raise AssertionError("the worker's pool process was not found")


@dataclass
class Held:
    """A run asked for through its kind's API, held mid-way on a real scoring worker."""

    kind: runs.RunKind
    case: WorkerCase
    run: Any
    first: Any  # the run as it was when first held
    scoring: Worker
    client: Any
    pace: Pace


@pytest.fixture
def held(
    name: str,
    redis_broker: Any,
    workers: Any,
    tiny_gpt2: Path,  # noqa: F811
    settings: Any,
    tmp_path: Path,
) -> Held:
    """A run of the kind `name` (the test's parameter) held mid-way on a real worker."""
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"
    settings.GYM_TRAINING_DIR = tmp_path / "trained"
    kind, case = runs.kind_named(name), CASES[name]
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    body = case.body(tmp_path, "tiny")
    pace = Pace(tmp_path / "pace")
    env = {
        "GYM_PROGRESS_EVERY_SECONDS": "0",
        "GYM_CANCEL_CHECK_EVERY_SECONDS": "0",
        "GYM_RUN_HOLD_DIR": str(pace.folder),
        "GYM_CORPUS_DIR": str(settings.GYM_CORPUS_DIR),
        "GYM_TRAINING_DIR": str(settings.GYM_TRAINING_DIR),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    workers("celery", **env)
    scoring = workers("gpu", **env)
    pace.hold()
    client = token_client(User.objects.create_user("owner"))
    answer = client.post(case.request_path, json.dumps(body), content_type="application/json")
    assert answer.status_code == 201, answer.content
    run: Any = kind.run_model.objects.get(  # type: ignore[misc]  # every kind's run has a model
        model__name="tiny" if name != "training" else "held-lm"
    )
    first = pace.wait_held(run, timeout=300)
    return Held(kind, case, run, first, scoring, client, pace)


def _finished(held: Held) -> Any:
    return wait_finished(held.kind.run_model, held.run.pk, what="the run")


def _expected(name: str, model_dir: Path) -> Any:
    """What one store of a done run of this kind wrote (the probing layers are the tiny
    model's, with the embedding output)."""
    if name == "probing":
        return json.loads((model_dir / "config.json").read_text())["n_layer"] + 1
    return EXPECTED[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_run_whose_pool_process_is_killed_mid_way_is_done_exactly_once(
    name,
    held,
    tiny_gpt2,  # noqa: F811
) -> None:
    os.kill(_pool_of(held.scoring), signal.SIGKILL)
    # Given back at once (the worker saw its pool process die) and started again.
    held.pace.wait_held(held.run, after=held.first.started_at, timeout=300)
    held.pace.release()
    run = _finished(held)
    log = held.scoring.log.read_text()
    assert (run.status, run.attempt, run.error) == ("done", 1, ""), log[-3000:]
    assert held.case.stored(run) == _expected(name, tiny_gpt2)
    assert "WorkerLostError" in log


@pytest.mark.parametrize("name", sorted(CASES))
def test_cancel_while_running_stops_the_worker_which_then_takes_the_next_run(
    name,
    held,
    tiny_gpt2,  # noqa: F811
) -> None:
    api = reverse(held.kind.api_detail, args=[held.run.pk])
    post = held.client.post
    assert post(f"{api}cancel/", "{}", content_type="application/json").status_code == 200
    held.pace.release()

    # The worker stops at its next report instead of finishing the work: it is free for
    # the next message, which here is the same run asked for again (a new attempt).
    retried = post(f"{api}retry/", "{}", content_type="application/json")
    assert retried.status_code == 200, retried.content
    run = _finished(held)
    log = held.scoring.log.read_text()
    assert (run.status, run.attempt) == ("done", 2), log[-3000:]
    # Two deliveries: the cancelled one ended early (no results handed over), then the
    # retry's, whose results alone were stored.
    assert log.count(" succeeded in ") == 2, log[-3000:]
    assert held.case.stored(run) == _expected(name, tiny_gpt2)
