"""Training runs on the site, in one process: the request (page, API, hostile input), the
payload, the worker function, the checkpoint reports and the store, registered models
`<name>@<tokens>`, ordinary suite runs queued on each, learning curves and age of
acquisition. The real-worker test is tests/training/test_training_worker.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from evaluations import statistics
from evaluations.models import Evaluation, LanguageModel, PairEvaluation, ProbingRun
from evaluations.training import selectors, services
from evaluations.training.models import TrainingRun
from evaluations.training.services import local_folder
from evaluations.training.worker import run_training
from gym import artifacts
from suites.corpora.services import corpus_import
from suites.minimal_pairs.sets import minimal_pair_set_import
from suites.probing.services import probing_task_import
from suites.syntaxgym.services import suite_import
from tests.conftest import EXAMPLES, single_torch_thread, suite_evaluation
from tests.training.conftest import (
    PAGE_FORM,
    book_file,
    example_pair_set,
    run_with_checkpoints,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def folders(training_dirs):
    with single_torch_thread():
        yield


@pytest.fixture
def corpus(tmp_path):
    return corpus_import(source=book_file(tmp_path), name="book", owner=None)


@pytest.fixture
def suite():
    return suite_import(source=(EXAMPLES / "agreement_local.json").read_text(), owner=None).suite


@pytest.fixture
def attractors():
    return probing_task_import(
        source=EXAMPLES / "probing" / "subject_number_attractors.txt",
        name="attractors",
        owner=None,
        task_type="custom",
    )


def test_age_of_acquisition() -> None:
    def points(*accuracies: float | None) -> list[dict]:
        return [{"tokens": 10**i, "accuracy": a} for i, a in enumerate(accuracies, start=1)]

    assert selectors.age_of_acquisition(points(0.5, 0.85, 0.7, 0.9, 0.95), 0.8) == 10_000
    assert selectors.age_of_acquisition(points(0.9, 0.85, 0.8), 0.8) == 10
    assert selectors.age_of_acquisition(points(0.9, 0.5), 0.8) is None
    assert selectors.age_of_acquisition(points(0.9, None), 0.8) is None


def test_causal_run_in_process(
    corpus, suite, attractors, alice, _private_broker, django_capture_on_commit_callbacks
) -> None:
    pair_set = minimal_pair_set_import(
        data=(EXAMPLES / "minimal_pairs" / "agreement_minimal_pairs.tsv").read_bytes(),
        name="agreement pairs",
        owner=None,
    ).pair_set
    waiting = _private_broker("gpu")  # the tests' broker is shared by the whole session
    with django_capture_on_commit_callbacks(execute=True):
        run = services.training_request(
            corpus=corpus,
            name="Book GPT",
            kind="causal",
            options={"preset": "tiny", "steps": 4, "checkpoints": 3, "micro_batch": 4},
            suites=[suite],
            pair_sets=[pair_set],
            probing_tasks=[attractors],
            user=alice,
        )
    assert run.model.name == "book-gpt" and run.model.kind == "causal"
    assert run.options["tokens_per_step"] == 256 and run.progress_total == 4
    assert _private_broker("gpu") == waiting + 1  # sent to the gpu queue on commit
    payload = services.training_payload(run)
    assert payload["corpus"]["normalised"] is True
    # The corpus by its key in the artifact store and its hash: never a path of this host.
    assert payload["corpus"]["key"] == corpus.artifact_key
    assert payload["corpus"]["sha256"] == corpus.content_hash
    assert str(corpus.path) not in json.dumps(payload)
    assert payload["corpus"]["validation_lines"] == corpus.validation_lines == 7
    results = run_training(json.loads(json.dumps(payload)), progress=lambda done, total: None)
    # The worker reported each checkpoint on the default queue; store them as that would.
    reported = results["checkpoints"]
    assert [(c["step"], c["tokens"]) for c in reported] == [(1, 256), (2, 512), (4, 1024)]
    # What each checkpoint takes on disk, its training state included.
    folder = local_folder(run) / "checkpoint-256"
    assert reported[0]["bytes"] == sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    # Someone registered the name the second checkpoint would get: it gets another.
    LanguageModel.objects.create(name="book-gpt-512", display_name="x", source="gpt2")
    services.training_checkpoint_store(run_id=run.pk, attempt=1, point=reported[0], entries=[])
    # A report that comes twice changes nothing.
    services.training_checkpoint_store(run_id=run.pk, attempt=1, point=reported[0], entries=[])
    assert services.training_results_store(run_id=run.pk, attempt=1, results=results)
    assert not services.training_results_store(run_id=run.pk, attempt=1, results=results)
    run.refresh_from_db()
    assert run.status == "done" and run.progress_done == 4
    assert [c["bytes"] for c in run.checkpoints] == [c["bytes"] for c in reported]
    # The last step's checkpoint has the finished model's weights: it is the finished
    # model (issue 46, defect 5), evaluated once.
    assert [c["model"] for c in run.checkpoints] == [
        "book-gpt-256",
        f"book-gpt-512-run{run.pk}",
        "book-gpt",
    ]
    assert not LanguageModel.objects.filter(name__startswith="book-gpt-1024").exists()
    first = LanguageModel.objects.get(name="book-gpt-256")
    assert first.display_name == "Book GPT@256"
    # In the artifact store, where any worker finds it; no path of a host in the row.
    stored_folder = services.store_folder(run)
    assert stored_folder.startswith(f"book-gpt-{run.pk}-")
    assert first.source == f"artifact:trained/{stored_folder}/checkpoint-256"
    assert run.model.source == f"artifact:trained/{stored_folder}/model"
    stored_files = {
        f["path"] for f in artifacts.read_manifest(f"trained/{stored_folder}/checkpoint-256")
    }
    assert "model.safetensors" in stored_files and "training_state.pt" not in stored_files
    assert {"model.safetensors", "loss.jsonl", "training.json"} <= {
        f["path"] for f in artifacts.read_manifest(f"trained/{stored_folder}/model")
    }
    assert artifacts.exists(f"trained/{stored_folder}/inputs.json")
    assert artifacts.exists(f"trained/{stored_folder}/states/checkpoint-256/training_state.pt")
    # Each checkpoint and the finished model on the suite: ordinary runs, queued once.
    asked = Evaluation.objects.filter(suite=suite).order_by("model__name")
    assert [e.model.name for e in asked] == [
        "book-gpt",
        "book-gpt-256",
        f"book-gpt-512-run{run.pk}",
    ]
    pairs = PairEvaluation.objects.filter(pair_set=pair_set).order_by("model__name")
    assert [e.model.name for e in pairs] == [e.model.name for e in asked]
    probes = ProbingRun.objects.filter(task=attractors).order_by("model__name")
    assert [(p.model.name, p.pooling, p.probe) for p in probes] == [
        (e.model.name, "mean", "logreg") for e in asked
    ]
    # The loss curve: 4 steps and 3 validation points; the folder's file has them too.
    loss = selectors.loss_curves(run)
    assert [p[0] for p in loss["train"]] == [256, 512, 768, 1024]
    assert [p[0] for p in loss["validation"]] == [256, 512, 1024]
    logged = (local_folder(run) / "loss.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in logged] == run.log
    download = Client().get(f"/training/{run.pk}/loss.jsonl")
    assert download.getvalue().decode().splitlines() == logged
    # Each model's page names its training run and corpus (provenance).
    client = Client()
    page = client.get("/models/book-gpt-256/").content.decode()
    assert 'A checkpoint of <a href="/models/book-gpt/">Book GPT</a> after 256 tokens' in page
    assert f'<a href="/training/{run.pk}/">training run {run.pk}</a> (done)' in page
    page = client.get("/models/book-gpt/").content.decode()
    assert "Causal transformer from scratch,\n  trained on the corpus" in page
    assert client.get(f"/models/book-gpt-512-run{run.pk}/").status_code == 200
    # Learning curves from the checkpoints' suite runs, once they are done.
    Evaluation.objects.filter(model__name="book-gpt-256").update(status="done", accuracy=0.9)
    Evaluation.objects.filter(model__name=f"book-gpt-512-run{run.pk}").update(
        status="done", accuracy=0.8
    )
    Evaluation.objects.filter(model__name="book-gpt").update(status="done", accuracy=0.85)
    PairEvaluation.objects.filter(pair_set=pair_set).update(status="done", accuracy=0.5)
    curves = selectors.learning_curves(run)
    ProbingRun.objects.filter(model__name="book-gpt-256").update(status="done", best_te=0.7)
    curves = selectors.learning_curves(run)
    row, pair_row, probe_row = curves["suites"]
    assert probe_row["kind"] == "probing"
    assert [p["accuracy"] for p in probe_row["points"]] == [0.7, None, None]
    assert (pair_row["kind"], pair_row["suite"], pair_row["age_of_acquisition"]) == (
        "pairs",
        "agreement pairs",
        None,
    )
    assert [p["accuracy"] for p in pair_row["points"]] == [0.5, 0.5, 0.5]
    assert [(p["tokens"], p["accuracy"]) for p in row["points"]] == [
        (256, 0.9),
        (512, 0.8),
        (1024, 0.85),
    ]
    assert row["age_of_acquisition"] == 256
    assert selectors.learning_curves(run, threshold=0.88)["suites"][0]["age_of_acquisition"] is None
    assert selectors.learning_curves(run, threshold=0.5)["suites"][1]["age_of_acquisition"] == 256
    # Each curve names what it measures: the pair set's own metric (a TSV set's is
    # nlpscholar), a suite's predictions, a probing task's probe; the CSV's last column.
    assert [r["metric"] for r in curves["suites"]] == ["predictions", "nlpscholar", "probe"]
    assert selectors.curves_csv(curves).splitlines() == [
        "kind,benchmark,tokens,step,model,accuracy,age_of_acquisition,metric",
        f"suite,{suite.name},256,1,book-gpt-256,0.900000,256,predictions",
        f"suite,{suite.name},512,2,book-gpt-512-run{run.pk},0.800000,256,predictions",
        f"suite,{suite.name},1024,4,book-gpt,0.850000,256,predictions",
        "pairs,agreement pairs,256,1,book-gpt-256,0.500000,,nlpscholar",
        f"pairs,agreement pairs,512,2,book-gpt-512-run{run.pk},0.500000,,nlpscholar",
        "pairs,agreement pairs,1024,4,book-gpt,0.500000,,nlpscholar",
        "probing,attractors,256,1,book-gpt-256,0.700000,,probe",
        f"probing,attractors,512,2,book-gpt-512-run{run.pk},,,probe",
        "probing,attractors,1024,4,book-gpt,,,probe",
    ]


def test_ngram_run_in_process(corpus, alice) -> None:
    run = services.training_request(
        corpus=corpus, name="book-3gram", kind="ngram", options={"order": 3}, user=alice
    )
    folder = services.store_folder(run)
    assert run.model.source == f"artifact:trained/{folder}/model.arpa"
    results = run_training(services.training_payload(run), progress=lambda done, total: None)
    assert results["summary"]["sentences"] == corpus.training_lines == 703
    assert services.training_results_store(run_id=run.pk, attempt=1, results=results)
    run.refresh_from_db()
    assert run.status == "done"
    assert (
        b"".join(artifacts.stream(f"trained/{folder}/model.arpa"))
        == (local_folder(run) / "model.arpa").read_bytes()
    )
    # The held-out lines' perplexity (issue 46, defect 7), in the summary and on the page.
    heldout = run.summary["heldout"]
    assert heldout["sentences"] == corpus.validation_lines == 7
    assert set(heldout["by_order"]) == {"1", "2", "3"}
    assert heldout["perplexity"] == heldout["by_order"]["3"] > 1
    page = Client().get(run.get_absolute_url()).content.decode()
    assert "Held-out perplexity" in page and f"{heldout['perplexity']}" in page


def test_request_errors_change_nothing(corpus, attractors, alice) -> None:
    cases: list[tuple[str, dict[str, Any], dict[str, str]]] = [
        ("ngram", {"order": 7}, {"order": "order must be from 2 to 6; got 7"}),
        ("ngram", {"order": "x"}, {"order": "order must be a whole number, not 'x'"}),
        ("causal", {"steps": 0}, {"steps": "steps must be from 1 to 10,000,000; got 0"}),
        (
            "causal",
            {"preset": "huge"},
            {
                "preset": "unknown preset 'huge'; choose one of tiny, tiny-llama, small, small-llama, custom"
            },
        ),
        (
            "causal",
            {"learning_rate": "nan"},
            {"learning_rate": "learning_rate must be from 1e-08 to 1; got nan"},
        ),
        ("causal", {"heads": 3}, {"options": "the width (64) must be a multiple of the heads (3)"}),
        ("rnn", {}, {"kind": "kind must be one of ngram, causal, masked, not 'rnn'"}),
    ]
    for kind, options, errors in cases:
        with pytest.raises(services.TrainingRequestInvalid) as caught:
            services.training_request(
                corpus=corpus, name="m", kind=kind, options=options, user=alice
            )
        assert caught.value.errors == errors
    with pytest.raises(services.TrainingRequestInvalid) as caught:
        services.training_request(
            corpus=corpus, name="m", kind="ngram", probing_tasks=[attractors], user=alice
        )
    assert caught.value.errors == {
        "probing_tasks": "an n-gram model has no hidden states (no layers) to probe; "
        "probe causal runs"
    }
    for name in ("!!!", ".", ".."):  # the model's name is a slug: dots leave nothing
        with pytest.raises(services.TrainingRequestInvalid) as caught:
            services.training_request(corpus=corpus, name=name, kind="ngram", user=alice)
        assert caught.value.errors == {
            "name": "give the model a name of letters, digits and hyphens"
        }
    assert not TrainingRun.objects.exists() and not LanguageModel.objects.exists()


def test_pages_and_api(
    corpus, suite, alice_client, anon_client, _private_broker, django_capture_on_commit_callbacks
) -> None:
    page = alice_client.get(f"/training/new/?corpus={corpus.name}")
    assert page.status_code == 200
    response = alice_client.post_form(
        "/training/new/", {**PAGE_FORM, "steps": 10, "checkpoints": 3, "suites": [suite.name]}
    )
    run = TrainingRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/training/{run.pk}/"
    html = anon_client.get(f"/training/{run.pk}/").content.decode()
    assert 'Training <a href="/models/from-page/">from-page</a>' in html
    assert "No checkpoint yet." in html
    corpus_page = anon_client.get("/corpora/book/").content.decode()
    assert f'href="/training/{run.pk}/"' in corpus_page
    headers = {"HTTP_X_CSRFTOKEN": alice_client.csrf_token()}
    body = {"corpus": "book", "name": "api-3gram", "kind": "ngram", "options": {"order": 4}}
    response = alice_client.post(
        "/api/training-runs/", json.dumps(body), content_type="application/json", **headers
    )
    assert response.status_code == 201, response.content
    assert response.json()["options"] == {"order": 4, "min_count": 1}
    body["options"] = {"order": 9}
    body["name"] = "other"
    response = alice_client.post(
        "/api/training-runs/", json.dumps(body), content_type="application/json", **headers
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "$.order"
    hostile: object
    for hostile in (
        {"corpus": "nope", "name": "x", "kind": "ngram"},
        {"corpus": "book", "name": "x", "kind": "ngram", "options": "zz"},
        [],
        {"corpus": "book", "name": "x", "kind": "ngram", "threshold": "inf"},
    ):
        response = alice_client.post(
            "/api/training-runs/", json.dumps(hostile), content_type="application/json", **headers
        )
        assert response.status_code == 400, (hostile, response.content)
    # Tags stand for their suites; an unknown one is a 400 that names it.
    suite.tags.create(name="learning-curves")
    body = {"corpus": "book", "name": "tagged", "kind": "ngram", "tags": ["learning-curves"]}
    response = alice_client.post(
        "/api/training-runs/", json.dumps(body), content_type="application/json", **headers
    )
    assert response.status_code == 201 and response.json()["suites"] == [suite.name]
    body = {"corpus": "book", "name": "tagged-2", "kind": "ngram", "tags": ["nope"]}
    response = alice_client.post(
        "/api/training-runs/", json.dumps(body), content_type="application/json", **headers
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["message"] == "no suite has the tag 'nope'"
    detail = anon_client.get(f"/api/training-runs/{run.pk}/").json()
    assert detail["status"] == "queued" and detail["loss"] == {"train": [], "validation": []}
    assert anon_client.get("/api/training-runs/999/").status_code == 404
    assert anon_client.get("/training/999/").status_code == 404
    assert anon_client.post("/api/training-runs/", {}).status_code in (401, 403)
    # Cancel: the run stops; once that commits, the worker is told through the cache.
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(f"/api/training-runs/{run.pk}/cancel/", **headers)
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    from django.core.cache import cache

    assert cache.get(services.stop_key(run.pk)) == 1


def test_a_name_with_a_nul_names_nothing(corpus, alice) -> None:
    """PostgreSQL cannot compare a string with a NUL: refused before any query (a JSON
    body is refused by its parser already; a form is not)."""
    from tests.conftest import token_client

    for field, value in (("corpus", "a\x00b"), ("suites", ["a\x00b"]), ("probing_tasks", ["\x00"])):
        body = {"corpus": corpus.name, "name": "m", "kind": "ngram", field: value}
        response = token_client(alice).post("/api/training-runs/", body)
        assert response.status_code == 400, (field, response.content)
        assert response.json()["errors"][0]["message"] == "Invalid value."
    assert not TrainingRun.objects.exists()


def test_learning_curves_read_current_done_runs_only(corpus, suite) -> None:
    # Issue 46, defect 4: of a checkpoint's runs on a benchmark the curve kept whichever
    # the query gave last, on any content: after a suite changed, a curve could mix
    # outdated and current results. Only a done run on the current content counts; a
    # point with only outdated runs says so.
    names = ["curve-64", "curve-128", "curve-256"]
    made = LanguageModel.objects.create(name="curve", display_name="Curve", source="/tmp/c")
    checkpoints = [LanguageModel.objects.create(name=n, source=f"/tmp/{n}") for n in names]
    run = TrainingRun.objects.create(
        model=made,
        corpus=corpus,
        content_hash=corpus.content_hash,
        training_kind="causal",
        status="done",
        checkpoints=[
            {"step": step, "tokens": 64 * step, "model": name}
            for step, name in zip((1, 2, 4), names, strict=True)
        ],
    )
    run.suites.set([suite])
    old = "0" * 64
    # 64: a current done run, then an older run on older content (made later, so that
    # the newest row is the outdated one).
    current = suite_evaluation(checkpoints[0], suite, status="done", accuracy=0.75)
    Evaluation.objects.filter(pk=current.pk).update(content_hash="1" * 64)
    outdated = suite_evaluation(checkpoints[0], suite, status="done", accuracy=0.25)
    Evaluation.objects.filter(pk=outdated.pk).update(content_hash=old)
    Evaluation.objects.filter(pk=current.pk).update(content_hash=suite.content_hash)
    # 128: a done run on older content, and a current one that failed.
    older = suite_evaluation(checkpoints[1], suite, status="done", accuracy=0.5)
    Evaluation.objects.filter(pk=older.pk).update(content_hash=old)
    suite_evaluation(checkpoints[1], suite, status="failed")
    # 256: only a done run on older content.
    stale = suite_evaluation(checkpoints[2], suite, status="done", accuracy=1.0)
    Evaluation.objects.filter(pk=stale.pk).update(content_hash=old)

    (row,) = selectors.learning_curves(run)["suites"]
    assert [(p["accuracy"], p["status"]) for p in row["points"]] == [
        (0.75, "done"),
        (None, "failed"),
        (None, "outdated"),
    ]
    assert (row["outdated"], row["missing"]) == (1, 1)
    assert row["age_of_acquisition"] is None  # the last point has no current result
    page = Client().get(f"/training/{run.pk}/").content.decode()
    assert "1 point has only results on older content of its benchmark" in page
    assert "1 point has no result yet" in page


def test_chance_levels(corpus, suite, attractors) -> None:
    """Each benchmark's chance line: 0.5 for minimal pairs; for a probing task the test
    accuracy of always answering the label most frequent in training (the example task:
    SG is 120 of tr's 200 lines, and 18 of te's 50); for a suite the random baseline's
    done result on its current content, else none."""
    from evaluations.baseline import BASELINE_NAME

    run = run_with_checkpoints(corpus, "chance", [1])
    run.suites.set([suite])
    run.pair_sets.set([example_pair_set()])
    run.probing_tasks.set([attractors])

    def chances() -> dict[str, float | None]:
        return {row["kind"]: row["chance"] for row in selectors.learning_curves(run)["suites"]}

    assert chances() == {"suite": None, "pairs": 0.5, "probing": 18 / 50}
    assert statistics.majority_rate({"tr": {"a": 3, "b": 3}, "te": {"a": 1, "b": 3}}) == 0.25
    assert statistics.majority_rate({"tr": {}, "te": {"a": 1}}) is None
    baseline = LanguageModel.objects.create(name=BASELINE_NAME, source="/tmp/random")
    result = suite_evaluation(baseline, suite, status="done", accuracy=0.45)
    assert chances()["suite"] == 0.45
    Evaluation.objects.filter(pk=result.pk).update(content_hash="0" * 64)  # outdated
    assert chances()["suite"] is None
    page = Client().get(f"/training/{run.pk}/").content.decode()
    assert "The dashed line in a benchmark's colour is its chance level" in page
