"""An n-gram site run's memory budget and temporary disk bound (issue 48): `memory_mb`
and `disk_mb` under options (POST /api/training-runs/ and the training form) reach the
trainer and the run's facts; bad values are a 400 that names them and writes nothing;
without them the budget is a quarter of the worker's memory; a run whose scratch would
pass `disk_mb` stops saying so, its scratch removed."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from evaluations.models import LanguageModel
from evaluations.training import ngram, services
from evaluations.training.models import TrainingRun
from evaluations.training.worker import run_training
from suites.corpora.services import corpus_import
from tests.conftest import token_client
from tests.training.conftest import PAGE_FORM

pytestmark = pytest.mark.django_db


def post(user: User, options: dict[str, Any], kind: str = "ngram", name: str = "kn") -> Any:
    body = {"corpus": "book", "name": name, "kind": kind, "options": options}
    return token_client(user).post(
        "/api/training-runs/", json.dumps(body), content_type="application/json"
    )


def train(run: TrainingRun) -> dict[str, Any]:
    services.local_folder(run).mkdir(parents=True, exist_ok=True)
    return run_training(services.training_payload(run), progress=lambda done, total: None)


def test_the_budget_and_the_bound_reach_the_trainer_and_the_facts(
    book_corpus, alice, alice_client
) -> None:
    response = post(alice, {"order": 3, "memory_mb": 64, "disk_mb": 500})
    assert response.status_code == 201, response.content
    assert response.json()["options"] == {
        "order": 3,
        "min_count": 1,
        "memory_mb": 64,
        "disk_mb": 500,
    }
    run = TrainingRun.objects.get()
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "memory budget 64 MB; temporary disk bound 500 MB" in page
    summary = train(run)["summary"]
    assert summary["memory_mb"] == 64 and summary["disk_mb"] == 500
    assert summary["counting"] == "in memory"  # the book is tiny
    run.summary = summary
    run.status = TrainingRun.Status.DONE
    run.save()
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "in memory, memory budget 64 MB; 0 sorted runs on disk" in page
    assert "temporary disk bound 500 MB" in page
    assert "memory_mb=64 " in page and "disk_mb=500 " in page  # the options, as given


def test_without_them_the_budget_is_a_quarter_of_the_worker_memory(
    book_corpus, alice, alice_client
) -> None:
    assert post(alice, {"order": 2}).status_code == 201
    run = TrainingRun.objects.get()
    assert "memory_mb" not in run.options and "disk_mb" not in run.options
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "memory budget a quarter of the worker's memory" in page
    assert "none but the free space" in page
    assert "memory_mb=None" not in page
    summary = train(run)["summary"]
    assert summary["memory_mb"] == ngram.default_memory_mb() and summary["disk_mb"] is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"memory_mb": 0}, "memory_mb must be from 1 to 1,073,741,824; got 0"),
        ({"memory_mb": "lots"}, "memory_mb must be a whole number, not 'lots'"),
        ({"memory_mb": 1.5}, "memory_mb must be a whole number, not '1.5'"),
        ({"disk_mb": -3}, "disk_mb must be from 1 to 1,073,741,824; got -3"),
    ],
)
def test_bad_values_are_refused(book_corpus, alice, options, message) -> None:
    response = post(alice, options)
    assert response.status_code == 400, response.content
    errors = {error["path"]: error["message"] for error in response.json()["errors"]}
    field = next(iter(options))
    assert errors == {f"$.{field}": message}  # where `order` is said too
    assert not TrainingRun.objects.exists() and not LanguageModel.objects.exists()


def test_they_are_options_of_ngram_runs_only(book_corpus, alice) -> None:
    response = post(alice, {"memory_mb": 64}, kind="causal")
    assert response.status_code == 400, response.content
    errors = {error["path"]: error["message"] for error in response.json()["errors"]}
    assert errors == {
        "$.options.memory_mb": "memory_mb is an option of ngram runs, not of causal runs"
    }
    assert not TrainingRun.objects.exists()


def test_the_form_sends_them(book_corpus, alice_client) -> None:
    form = {**PAGE_FORM, "name": "words", "kind": "ngram", "memory_mb": 128, "disk_mb": ""}
    response = alice_client.post_form("/training/new/", form)
    assert response.status_code == 302, response.content.decode()[-3000:]
    options = TrainingRun.objects.get().options
    assert options["memory_mb"] == 128 and "disk_mb" not in options
    html = alice_client.get("/training/new/").content.decode()
    assert 'name="memory_mb"' in html and 'name="disk_mb"' in html
    response = alice_client.post_form("/training/new/", {**form, "name": "w2", "memory_mb": 0})
    assert response.status_code == 400, response.content.decode()[-3000:]
    assert "Ensure this value is greater than or equal to 1." in response.content.decode()


def test_a_run_past_its_disk_bound_stops_and_says_why(training_dirs, tmp_path: Path) -> None:
    """30,000 lines of 10 words: the id stream alone passes a 1 MB bound."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(2_000)]
    lines = (" ".join(rng.choices(words, k=10)) for _ in range(30_000))
    source = tmp_path / "big.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = corpus_import(source=source, name="big", owner=None)
    run = services.training_request(
        corpus=corpus, name="big-kn3", kind="ngram", options={"order": 3, "disk_mb": 1}
    )
    with pytest.raises(ngram.NgramDiskFull, match=r"over the bound of 1 MB \(disk_mb\)"):
        train(run)
    folder = services.local_folder(run)
    assert not list(folder.glob(ngram.SCRATCH_PREFIX + "*"))
    assert not (folder / ngram.ARPA_NAME).exists()
