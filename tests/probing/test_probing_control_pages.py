"""Seeds, controls, the frequency baseline and MDL on the site: asking with the options
(page and API, hostile values refused with 400), the payload carrying field #3, the
store, the run page and downloads, and a run stored before these fields (shown as —)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from evaluations.models import ProbingLayerResult, ProbingRun
from evaluations.probing import services as probing_services
from evaluations.probing.controls import cmu_unigrams
from suites.models import ProbingTask
from suites.probing.services import probing_task_import
from tests.conftest import token_client, tsv_lines
from tests.probing.conftest import done_run

pytestmark = pytest.mark.django_db
# subj_number with the subject noun as field #3; "prickle" and "marmosets" are not in the
# CMU vocabulary.
WITH_FORMS = tsv_lines(
    [
        ("tr", "NN", "dog", "the dog barks ."),
        ("tr", "NNS", "dogs", "the dogs bark loudly ."),
        ("tr", "NN", "cat", "a cat sleeps ."),
        ("tr", "NNS", "cats", "some cats sleep all day ."),
        ("tr", "NN", "prickle", "a prickle ran down ."),
        ("va", "NN", "bird", "a bird sleeps ."),
        ("va", "NNS", "birds", "the birds sing every day ."),
        ("te", "NN", "horse", "the horse barks ."),
        ("te", "NNS", "marmosets", "the marmosets sing all night ."),
        ("te", "NNS", "horses", "horses sleep ."),
    ]
)


@pytest.fixture
def task(alice) -> ProbingTask:
    return probing_task_import(
        source=WITH_FORMS, name="toy subjects", owner=alice, task_type="subj_number"
    )


def test_a_run_with_seeds_control_frequency_and_mdl(task, gpt2, anon_client) -> None:
    if cmu_unigrams() is None:
        pytest.skip("pocketsphinx's CMU model is not installed")
    run = probing_services.probing_run_request(models=[gpt2], task=task, seeds=2, mdl=True).runs[0]
    payload = probing_services.probing_payload(run)
    assert payload["form"][:2] == ["dog", "dogs"] and payload["seeds"] == 2 and payload["mdl"]
    # Other options are other runs; the same options, the same run.
    assert probing_services.probing_run_request(models=[gpt2], task=task).runs[0].pk != run.pk
    again = probing_services.probing_run_request(models=[gpt2], task=task, seeds=2, mdl=True)
    assert again.existing == [run]

    run = done_run(run)
    assert run.seeds == 2 and run.mdl
    frequency = run.baselines["frequency"]
    assert frequency["instances"] == 10 and frequency["fell_back"] == 2
    assert run.baselines["applicable"]["frequency"] is True
    layers = list(run.layers.order_by("layer"))
    for layer in layers:
        stats = layer.stats
        assert len(stats["seed_te"]) == 2
        assert stats["selectivity"] == layer.te_accuracy - stats["control"]["te_accuracy"]
        assert stats["mdl"]["uniform_bits"] == 5.0
    best = next(layer for layer in layers if layer.layer == run.best_layer)
    assert run.best_selectivity == best.stats["selectivity"]
    # A word-type control: the file names each sentence's form.
    assert run.diagnostics["control"] == {"kind": "word type", "seed": 4321}

    page = anon_client.get(f"/probing-runs/{run.pk}/").content.decode()
    assert (
        "counted in CMU US English trigram unigrams; 2 of 10 forms not in it fell back to a "
        "log10 probability of -9.63"
    ) in page
    assert "Which baselines and controls apply to which task type" in page
    assert "<code>odd_man_out</code>" in page and "MDL (bits)" in page
    plot = json.loads(
        page.split('id="probing-plot-data" type="application/json">')[1].split("<")[0]
    )
    assert plot["seeds"] == 2 and len(plot["te_std"]) == len(layers)
    assert plot["control_te"] == [layer.stats["control"]["te_accuracy"] for layer in layers]
    assert plot["frequency"] == frequency["te_accuracy"]

    document = json.loads(anon_client.get(f"/probing-runs/{run.pk}/results.json").content)
    assert document["seeds"] == [1234, 1235] and document["mdl"] is True
    assert document["control"] == {"kind": "word type", "seed": 4321}
    assert document["layers"][0]["seed_te"] == layers[0].stats["seed_te"]
    rows = list(
        csv.DictReader(
            io.StringIO(anon_client.get(f"/probing-runs/{run.pk}/layers.csv").content.decode())
        )
    )
    assert float(rows[0]["selectivity"]) == layers[0].stats["selectivity"]
    assert float(rows[0]["mdl_bits"]) == layers[0].stats["mdl"]["bits"]
    assert rows[0]["seeds"] == "2"


def test_a_run_stored_before_seeds_and_controls_shows_dashes(task, gpt2, anon_client) -> None:
    run = ProbingRun.objects.create(
        model=gpt2,
        task=task,
        content_hash=task.content_hash,
        status=ProbingRun.Status.DONE,
        best_layer=1,
        best_va=0.5,
        best_te=0.75,
        baselines={
            "majority": {"label": "NN", "va_accuracy": 0.5, "te_accuracy": 0.25},
            "length": {"va_accuracy": 0.5, "te_accuracy": 0.5},
            "chance": 0.5,
        },
        confusion={"labels": ["NN", "NNS"], "matrix": [[1, 0], [1, 1]]},
        diagnostics={"sentences": 10, "notes": []},
    )
    for k in range(3):
        ProbingLayerResult.objects.create(
            run=run, layer=k, va_accuracy=0.5, te_accuracy=0.75, hyperparameters={"l2": 0.1}
        )
    assert run.seeds == 1 and not run.mdl and run.best_selectivity is None
    response = anon_client.get(f"/probing-runs/{run.pk}/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "this run has no control task" in page and "not computed for this run" in page
    # sd, control te and selectivity, on each of the three layers
    assert page.count('<td class="num">\u2014</td>') == 9
    plot = json.loads(
        page.split('id="probing-plot-data" type="application/json">')[1].split("<")[0]
    )
    assert plot["te_std"] == [None, None, None] and plot["frequency"] is None
    document = json.loads(anon_client.get(f"/probing-runs/{run.pk}/results.json").content)
    assert document["seeds"] == [1234] and document["control"] is None
    assert document["layers"][0] == {
        "layer": 0, "va_accuracy": 0.5, "te_accuracy": 0.75, "hyperparameters": {"l2": 0.1}
    }  # fmt: skip
    rows = list(
        csv.DictReader(
            io.StringIO(anon_client.get(f"/probing-runs/{run.pk}/layers.csv").content.decode())
        )
    )
    assert rows[0]["selectivity"] == "" and rows[0]["frequency_te_accuracy"] == ""
    board = anon_client.get("/leaderboard/").content.decode()
    assert "sel \u2014" in board
    api = anon_client.get(f"/api/probing-runs/{run.pk}/").json()
    assert api["seeds"] == 1 and api["best_selectivity"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"seeds": 0},
        {"seeds": 11},
        {"seeds": -3},
        {"seeds": "three"},
        {"seeds": 10**30},
        {"seeds": [3]},
        {"seeds": 2.5},
        {"mdl": "perhaps"},
        {"mdl": {"on": True}},
    ],
)
def test_hostile_options_are_refused_with_400(task, gpt2, alice, body) -> None:
    client = token_client(alice)
    sent = {"task": task.name, "models": [gpt2.name], **body}
    response = client.post("/api/probing-runs/", json.dumps(sent), content_type="application/json")
    assert response.status_code == 400, response.content
    assert ProbingRun.objects.count() == 0


@pytest.mark.parametrize("seeds", ["0", "abc", "99999999999999999999", "-1", "2.5", "\x00"])
def test_the_request_form_refuses_bad_seeds(task, gpt2, alice_client, seeds: str) -> None:
    data = {"task": task.name, "models": [gpt2.name], "pooling": "mean", "probe": "logreg"}
    response = alice_client.post_form("/probing-runs/new/", {**data, "seeds": seeds})
    assert response.status_code == 400
    assert ProbingRun.objects.count() == 0
    # Left out, it is the default; MDL ticked is a run of its own.
    alice_client.post_form("/probing-runs/new/", data)
    alice_client.post_form("/probing-runs/new/", {**data, "mdl": "on"})
    assert sorted(ProbingRun.objects.values_list("seeds", "mdl")) == [(3, False), (3, True)]


def test_the_leaderboard_shows_the_latest_of_runs_with_other_seeds(task, gpt2, anon_client) -> None:
    from datetime import timedelta

    from django.utils import timezone

    now = timezone.now()
    common = {
        "model": gpt2, "task": task, "content_hash": task.content_hash, "status": "done",
        "best_layer": 0, "best_va": 0.5, "baselines": {}, "confusion": {},
    }  # fmt: skip
    newer = ProbingRun.objects.create(
        **common, seeds=3, best_te=0.8, best_selectivity=0.3, finished_at=now
    )
    ProbingRun.objects.create(**common, seeds=1, best_te=0.6, finished_at=now - timedelta(days=1))
    data = anon_client.get("/api/leaderboard/probing/").json()
    cell = data["rows"][0]["cells"][task.name]
    assert cell["run"] == newer.pk and cell["selectivity"] == 0.3
    page = anon_client.get(f"/probing/{task.name}/").content.decode()
    assert "mean · logreg · 3 seeds" in page and "mean · logreg · 1 seed<" in page
