"""Probing runs through the run machinery, in this process: asking (page, API), the
payload, the worker function, storing exactly once, the result page, downloads, the
leaderboard section, the model page, permissions and hostile input. The real Celery
worker path is in test_probing_worker.py."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from evaluations.language_models import registry as model_registry
from evaluations.models import LanguageModel, ProbingLayerResult, ProbingRun
from evaluations.probing import services as probing_services
from evaluations.runs import lifecycle as runs
from suites.models import ProbingTask
from suites.probing.services import probing_task_import
from tests.conftest import BrowserClient, token_client, tsv_lines
from tests.probing.conftest import done_run, worker_results

pytestmark = pytest.mark.django_db
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "probing"
SMALL = tsv_lines(
    [
        ("tr", "A", "the dog barks ."),
        ("tr", "B", "the dogs bark loudly ."),
        ("tr", "A", "a cat sleeps ."),
        ("tr", "B", "some cats sleep all day ."),
        ("tr", "A", "the bird sings ."),
        ("va", "A", "a dog sleeps ."),
        ("va", "B", "the birds sing every day ."),
        ("te", "A", "the cat barks ."),
        ("te", "B", "the cats sing all night ."),
        ("te", "B", "dogs sleep ."),
    ]
)


@pytest.fixture
def task(alice) -> ProbingTask:
    return probing_task_import(source=SMALL, name="toy number", owner=alice)


def test_request_once_payload_in_file_order_and_store_exactly_once(
    task, gpt2, alice, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        first = probing_services.probing_run_request(models=[gpt2], task=task, user=alice)
    again = probing_services.probing_run_request(models=[gpt2], task=task, user=alice)
    run = first.runs[0]
    assert first.created == [run] and again.existing == [run] and again.created == []
    assert run.enqueued and run.status == "queued" and run.progress_total == 10
    # Another option is another run.
    mlp = probing_services.probing_run_request(models=[gpt2], task=task, probe="mlp").runs[0]
    assert mlp.pk != run.pk

    payload = probing_services.probing_payload(run)
    assert payload["sentences"][:2] == ["the dog barks .", "the dogs bark loudly ."]
    assert payload["partition"] == ["tr"] * 5 + ["va"] * 2 + ["te"] * 3
    assert [payload["labels"][k] for k in payload["label"]][:2] == ["A", "B"]

    results = worker_results(run)
    assert probing_services.probing_results_store(run_id=run.pk, attempt=1, results=results)
    # A second delivery, or a stale attempt, writes nothing.
    assert not probing_services.probing_results_store(run_id=run.pk, attempt=1, results=results)
    assert not probing_services.probing_results_store(run_id=run.pk, attempt=0, results=results)
    run.refresh_from_db()
    assert run.status == "done" and ProbingLayerResult.objects.filter(run=run).count() == 3
    assert run.best_layer == results["best_layer"]
    assert run.best_te == results["best"]["te_accuracy"]
    assert run.confusion == results["confusion"] and run.baselines == results["baselines"]
    # Majority by hand: tr has 3 A and 2 B; te has 1 A of 3.
    assert run.baselines["majority"] == {"label": "A", "va_accuracy": 0.5, "te_accuracy": 1 / 3}
    assert run.progress_done == run.progress_total == 10 + 3
    assert run.model_info["kind"] == "causal"


def test_store_refuses_a_document_without_layers(task, gpt2) -> None:
    run = probing_services.probing_run_request(models=[gpt2], task=task).runs[0]
    assert not probing_services.probing_results_store(
        run_id=run.pk, attempt=1, results={"layers": [], "best_layer": 0}
    )
    run.refresh_from_db()
    assert run.status == "failed" and "no layers" in run.error
    assert not ProbingLayerResult.objects.filter(run=run).exists()


def test_ngram_and_last_pooling_of_a_masked_model_are_refused(task, tiny_bert, alice) -> None:  # noqa: F811
    ngram = LanguageModel.objects.create(
        name="trigram", display_name="Trigram", source="/tmp/x.arpa", kind="ngram"
    )
    with pytest.raises(probing_services.ProbingRequestInvalid, match="no hidden states"):
        probing_services.probing_run_request(models=[ngram], task=task)
    bert = model_registry.model_register(source=str(tiny_bert), name="tiny-bert")
    assert bert.kind == "masked"
    with pytest.raises(probing_services.ProbingRequestInvalid, match="needs causal models"):
        probing_services.probing_run_request(models=[bert], task=task, pooling="last")
    assert not ProbingRun.objects.exists()

    client = token_client(alice)
    response = client.post(
        "/api/probing-runs/",
        json.dumps({"task": task.name, "models": ["trigram"]}),
        content_type="application/json",
    )
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["path"] == "$.models" and "n-gram model has no hidden states" in error["message"]
    assert not ProbingRun.objects.exists()


def test_masked_model_probes_with_mean_pooling(task, tiny_bert) -> None:  # noqa: F811
    bert = model_registry.model_register(source=str(tiny_bert), name="tiny-bert")
    run = done_run(probing_services.probing_run_request(models=[bert], task=task).runs[0])
    assert run.status == "done" and run.layers.count() == 3
    assert run.model_info["kind"] == "masked"


def test_request_from_the_task_page_and_the_run_page(task, gpt2, alice_client, anon_client) -> None:
    page = alice_client.get(f"/probing/{task.name}/").content.decode()
    assert "Probe models on this task" in page and "No model has been probed" in page
    assert (
        "Probe models on this task"
        not in anon_client.get(f"/probing/{task.name}/").content.decode()
    )
    response = alice_client.post_form(
        "/probing-runs/new/",
        {"task": task.name, "models": ["tiny-gpt2"], "pooling": "last", "probe": "logreg"},
    )
    run = ProbingRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/probing-runs/{run.pk}/"
    assert run.requested_by is not None
    assert (run.pooling, run.probe, run.requested_by.username) == ("last", "logreg", "alice")
    waiting = alice_client.get(f"/probing-runs/{run.pk}/").content.decode()
    assert "vectors: 0 of 10 sentences" in waiting and "Cancel" in waiting
    # Asking again shows the same run.
    again = alice_client.post_form(
        "/probing-runs/new/",
        {"task": task.name, "models": ["tiny-gpt2"], "pooling": "last", "probe": "logreg"},
    )
    assert again["Location"] == f"/probing-runs/{run.pk}/" and ProbingRun.objects.count() == 1

    done_run(run)
    page = anon_client.get(f"/probing-runs/{run.pk}/").content.decode()
    assert "Accuracy by layer" in page and "Confusion matrix at layer" in page
    assert 'id="probing-plot-data"' in page and "majority baseline" in page
    task_page = anon_client.get(f"/probing/{task.name}/").content.decode()
    assert f"/probing-runs/{run.pk}/" in task_page


def test_request_form_errors_are_400_and_change_nothing(task, gpt2, alice_client) -> None:
    LanguageModel.objects.create(name="tri", display_name="Tri", source="/tmp/t.arpa", kind="ngram")
    cases = [
        {"task": task.name, "models": ["tri"], "pooling": "mean", "probe": "logreg"},
        {"task": task.name, "models": ["nope"], "pooling": "mean", "probe": "logreg"},
        {"task": "no such task", "models": ["tiny-gpt2"], "pooling": "mean", "probe": "logreg"},
        {"task": task.name, "models": ["tiny-gpt2"], "pooling": "max", "probe": "logreg"},
        {"task": task.name, "models": ["tiny-gpt2"], "pooling": "mean", "probe": "svm\x00"},
        {"task": "\x00", "models": ["\x00"], "pooling": "", "probe": ""},
    ]
    for data in cases:
        response = alice_client.post_form("/probing-runs/new/", data)
        assert response.status_code == 400, data
    body = alice_client.post_form("/probing-runs/new/", cases[0]).content.decode()
    assert "n-gram model has no hidden states" in body
    assert not ProbingRun.objects.exists()


def test_anonymous_cannot_ask_and_others_cannot_cancel_or_retry(
    task, gpt2, alice, bob, dana, anon_client
) -> None:
    response = anon_client.post_form(
        "/probing-runs/new/", {"task": task.name, "models": ["tiny-gpt2"]}
    )
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    api = BrowserClient().post(
        "/api/probing-runs/",
        json.dumps({"task": task.name, "models": ["tiny-gpt2"]}),
        content_type="application/json",
    )
    assert api.status_code == 401
    run = probing_services.probing_run_request(models=[gpt2], task=task, user=alice).runs[0]
    # bob neither owns the task nor asked for the run.
    assert token_client(bob).post(f"/api/probing-runs/{run.pk}/cancel/").status_code == 403
    run.refresh_from_db()
    assert run.status == "queued"
    cancelled = token_client(dana).post(f"/api/probing-runs/{run.pk}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert token_client(bob).post(f"/api/probing-runs/{run.pk}/retry/").status_code == 403
    retried = token_client(alice).post(f"/api/probing-runs/{run.pk}/retry/")
    assert retried.status_code == 200 and retried.json()["attempt"] == 2
    run.refresh_from_db()
    done_run(run)
    refused = token_client(alice).post(f"/api/probing-runs/{run.pk}/retry/")
    assert refused.status_code == 409 and "done" in refused.json()["errors"][0]["message"]


def test_api_request_list_detail_and_csv(task, gpt2, alice) -> None:
    client = token_client(alice)
    body = {"task": task.name, "models": ["tiny-gpt2"], "pooling": "mean", "probe": "logreg"}
    created = client.post("/api/probing-runs/", json.dumps(body), content_type="application/json")
    assert created.status_code == 201, created.content
    run_id = created.json()[0]["id"]
    again = client.post("/api/probing-runs/", json.dumps(body), content_type="application/json")
    assert again.status_code == 200 and again.json()[0]["id"] == run_id
    run = done_run(ProbingRun.objects.get(pk=run_id))

    listed = BrowserClient().get("/api/probing-runs/", {"model": "tiny-gpt2", "task": task.name})
    assert [r["id"] for r in listed.json()["results"]] == [run_id]
    assert BrowserClient().get("/api/probing-runs/", {"task": "other"}).json()["results"] == []
    detail = BrowserClient().get(f"/api/probing-runs/{run_id}/").json()
    assert [row["layer"] for row in detail["layers"]] == [0, 1, 2]
    assert detail["best_te"] == run.best_te and detail["confusion"]["labels"] == ["A", "B"]

    for address in (f"/api/probing-runs/{run_id}/layers.csv", f"/probing-runs/{run_id}/layers.csv"):
        response = BrowserClient().get(address)
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(response.content.decode())))
        assert [int(r["layer"]) for r in rows] == [0, 1, 2]
        chosen = [r for r in rows if r["chosen_on_va"] == "1"]
        assert len(chosen) == 1 and int(chosen[0]["layer"]) == run.best_layer
        assert float(chosen[0]["te_accuracy"]) == run.best_te

    document = json.loads(BrowserClient().get(f"/probing-runs/{run_id}/results.json").content)
    assert set(document) == {
        "task", "model", "pooling", "probe", "baselines", "layers", "best_layer", "best",
        "confusion", "diagnostics", "seeds", "mdl", "control", "best_selectivity", "human",
        "frequency_source",
    }  # fmt: skip
    assert document["frequency_source"] == "CMU US English trigram unigrams"
    assert document["human"] is None  # nobody has labelled the task's sentences
    assert document["best"] == document["layers"][document["best_layer"]]
    assert str(Path(gpt2.source).parent) not in json.dumps(document)  # no server folders


def test_hostile_and_missing_addresses_are_4xx(task, gpt2, alice) -> None:
    client = token_client(alice)
    run = probing_services.probing_run_request(models=[gpt2], task=task).runs[0]
    # Not done yet: no results to download.
    for address in (
        f"/probing-runs/{run.pk}/results.json",
        f"/probing-runs/{run.pk}/layers.csv",
        f"/api/probing-runs/{run.pk}/layers.csv",
        "/probing-runs/999999/",
        f"/api/probing-runs/{2**63}/",
    ):
        assert client.get(address).status_code == 404, address
    # The site's request guard answers 400 for a NUL anywhere.
    assert client.get(f"/probing-runs/{run.pk}/?control=%00").status_code == 400
    assert client.get(f"/probing-runs/{run.pk}/?control=99999999999999999999999").status_code == 200
    for body in (
        {"task": task.name, "models": "tiny-gpt2"},
        {"task": task.name, "models": []},
        {"task": task.name, "models": ["tiny-gpt2"], "pooling": "max"},
        {"task": task.name, "models": [{"x": 1}]},
        {"task": ["x"], "models": ["tiny-gpt2"]},
        {"task": "\x00", "models": ["\x00"]},
        {"task": task.name, "models": ["tiny-gpt2"] * 101},
    ):
        response = client.post(
            "/api/probing-runs/", json.dumps(body), content_type="application/json"
        )
        assert response.status_code == 400, (body, response.content)
        assert response.json()["errors"]
    # A NUL is refused by the request guard, an unknown status by the run filters; a task
    # that does not exist narrows the list to nothing (as the suite filter of evaluations).
    assert client.get("/api/probing-runs/", {"model": "\x00"}).status_code == 400
    unknown_task = client.get("/api/probing-runs/", {"task": "x" * 5000})
    assert unknown_task.status_code == 200 and unknown_task.json()["results"] == []
    bad_status = client.get("/api/probing-runs/", {"status": "nope"})
    assert bad_status.status_code == 400
    assert bad_status.json()["errors"][0]["path"] == "$.status"
    assert client.get("/leaderboard/probing.csv", {"pooling": "max"}).status_code == 200
    assert ProbingRun.objects.count() == 1


def by_model_selectivity(rows: list[list[str]], model: str) -> float:
    return float(next(row for row in rows if row[0] == model)[5])


def test_control_overlay_leaderboard_and_model_page(task, gpt2, tiny_bert, anon_client) -> None:  # noqa: F811
    control = model_registry.model_register(source=str(tiny_bert), name="control-model")
    empty = anon_client.get("/models/control-model/").content.decode()
    assert "has not been probed on any task yet" in empty
    run = done_run(probing_services.probing_run_request(models=[gpt2], task=task).runs[0])
    other = done_run(probing_services.probing_run_request(models=[control], task=task).runs[0])

    page = anon_client.get(f"/probing-runs/{run.pk}/", {"control": other.pk}).content.decode()
    assert f'<option value="{other.pk}" selected>' in page
    plot = json.loads(
        page.split('id="probing-plot-data" type="application/json">')[1].split("<")[0]
    )
    assert plot["control"]["te"] == list(other.layers.values_list("te_accuracy", flat=True))
    assert plot["te"] == list(run.layers.values_list("te_accuracy", flat=True))
    assert plot["best_layer"] == run.best_layer
    assert plot["majority"] == pytest.approx(1 / 3)
    # An id that is not a run on this task draws nothing extra.
    alone = anon_client.get(f"/probing-runs/{run.pk}/", {"control": run.pk}).content.decode()
    assert '"control": null' in alone

    board = anon_client.get("/leaderboard/").content.decode()
    assert 'id="probing"' in board and "majority baseline" in board
    data = anon_client.get("/api/leaderboard/probing/").json()
    assert [t["name"] for t in data["tasks"]] == ["toy number"]
    cells = {row["model"]: row["cells"]["toy number"] for row in data["rows"]}
    assert cells["tiny-gpt2"] == {
        "te_accuracy": run.best_te,
        "va_accuracy": run.best_va,
        "layer": run.best_layer,
        "selectivity": run.best_selectivity,
        "seeds": run.seeds,
        "te_sd": next(
            (layer.stats or {}).get("te_std")
            for layer in run.layers.all()
            if layer.layer == run.best_layer
        )
        if run.seeds > 1
        else None,
        "run": run.pk,
    }
    assert data["baselines"]["toy number"]["majority"] == pytest.approx(1 / 3)
    assert data["baselines"]["toy number"]["length"] == run.baselines["length"]["te_accuracy"]
    assert anon_client.get("/api/leaderboard/probing/", {"probe": "mlp"}).json()["rows"] == []
    rows = list(
        csv.reader(io.StringIO(anon_client.get("/leaderboard/probing.csv").content.decode()))
    )
    assert rows[0] == [
        "model", "pooling", "probe", "toy number", "toy number:layer", "toy number:selectivity",
        "toy number:seeds", "toy number:te_sd",
    ]  # fmt: skip
    assert by_model_selectivity(rows, "tiny-gpt2") == run.best_selectivity
    by_model = {row[0]: row for row in rows[1:]}
    assert float(by_model["tiny-gpt2"][3]) == run.best_te
    assert by_model["tiny-gpt2"][4] == str(run.best_layer)
    assert float(by_model["baseline:majority"][3]) == pytest.approx(1 / 3)

    model_page = anon_client.get(f"/models/{gpt2.name}/").content.decode()
    assert "Probing: accuracy by layer" in model_page
    assert f'id="probing-curve-{run.pk}"' in model_page


def test_sweep_and_fail_move_probing_runs_like_suites(task, gpt2, settings) -> None:
    run = probing_services.probing_run_request(models=[gpt2], task=task).runs[0]
    kind = runs.kind_of(run)
    assert kind is probing_services.PROBING_RUNS
    runs.run_progress(kind=kind, run_id=run.pk, attempt=1, done=4, total=13, restart=True)
    run.refresh_from_db()
    assert run.status == "running" and run.progress_text == "vectors: 4 of 10 sentences"
    runs.run_progress(kind=kind, run_id=run.pk, attempt=1, done=12, total=13)
    run.refresh_from_db()
    assert run.progress_text == "probes: 2 of 3 layers"
    settings.GYM_RUN_STALE_AFTER = 0
    report = runs.runs_sweep()
    run.refresh_from_db()
    assert report.failed == 1 and run.status == "failed"
    # Late results of the failed attempt are refused.
    assert not probing_services.probing_results_store(
        run_id=run.pk, attempt=1, results=worker_results(run)
    )


def test_bootstrap_probes_the_random_baseline_on_the_example_tasks_once(
    settings, tmp_path, alice
) -> None:
    from django.core.management import call_command

    from evaluations import baseline

    settings.VAR_DIR = tmp_path
    call_command("import_probing_task", str(EXAMPLE), stdout=io.StringIO())
    # A user's own task is not the site's to probe.
    probing_task_import(source=SMALL, name="alices-own", owner=alice)
    out = io.StringIO()
    call_command("gym_bootstrap", "--evaluate-examples", stdout=out)
    asked = set(ProbingRun.objects.values_list("model__name", "task__name", "pooling", "probe"))
    assert asked == {(baseline.BASELINE_NAME, "subject_number_attractors", "mean", "logreg")}
    assert "1 example probing tasks queued" in out.getvalue()
    again = io.StringIO()
    call_command("gym_bootstrap", "--evaluate-examples", stdout=again)
    assert ProbingRun.objects.count() == 1
    assert "0 example probing tasks queued, 1 already asked for" in again.getvalue()


def test_the_run_page_cancels_and_retries_with_a_message(
    task, gpt2, alice, alice_client, bob_client
) -> None:
    run = probing_services.probing_run_request(models=[gpt2], task=task, user=alice).runs[0]
    cancel_form = f'action="/probing-runs/{run.pk}/cancel/"'
    retry_form = f'action="/probing-runs/{run.pk}/retry/"'
    assert cancel_form in alice_client.get(run.get_absolute_url()).content.decode()
    assert cancel_form not in bob_client.get(run.get_absolute_url()).content.decode()
    assert bob_client.post_form(f"/probing-runs/{run.pk}/cancel/").status_code == 403
    cancelled = alice_client.post_form(f"/probing-runs/{run.pk}/cancel/", follow=True)
    assert cancelled.redirect_chain == [(run.get_absolute_url(), 302)]
    page = cancelled.content.decode()
    assert "Cancelled." in page and retry_form in page and cancel_form not in page
    again = alice_client.post_form(f"/probing-runs/{run.pk}/cancel/", follow=True)
    assert "only queued or running runs can be cancelled" in again.content.decode()
    assert bob_client.post_form(f"/probing-runs/{run.pk}/retry/").status_code == 403
    retried = alice_client.post_form(f"/probing-runs/{run.pk}/retry/", follow=True)
    assert "Sent again." in retried.content.decode()
    run.refresh_from_db()
    assert (run.status, run.attempt) == ("queued", 2)
    ProbingRun.objects.filter(pk=run.pk).update(status="running")
    refused = alice_client.post_form(f"/probing-runs/{run.pk}/retry/", follow=True).content
    assert "cancel it first" in refused.decode() and "Sent again." not in refused.decode()


def test_an_outdated_run_is_not_retried_on_other_instances(task, gpt2, alice) -> None:
    """A task keeps only its current instances: a retry of a run on earlier content
    would probe other sentences under the run's content, so it is refused with the
    reason, and nothing changes."""
    run = probing_services.probing_run_request(models=[gpt2], task=task, user=alice).runs[0]
    kind = probing_services.PROBING_RUNS
    runs.run_fail(kind=kind, run_id=run.pk, attempt=1, reason="GPU fell over")
    asked_on = run.content_hash
    ProbingTask.objects.filter(pk=task.pk).update(content_hash="3" * 64)
    refused = token_client(alice).post(f"/api/probing-runs/{run.pk}/retry/")
    assert refused.status_code == 409
    assert "cannot be retried" in refused.json()["errors"][0]["message"]
    run.refresh_from_db()
    assert (run.status, run.attempt, run.error) == ("failed", 1, "GPU fell over")
    # On the content it was asked on, the same retry is sent.
    ProbingTask.objects.filter(pk=task.pk).update(content_hash=asked_on)
    assert token_client(alice).post(f"/api/probing-runs/{run.pk}/retry/").status_code == 200
    run.refresh_from_db()
    assert (run.status, run.attempt) == ("queued", 2)
