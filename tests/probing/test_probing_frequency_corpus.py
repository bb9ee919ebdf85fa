"""An uploaded corpus as the frequency baseline's source: asked for on the API and the
request page, stored on the run, counted by the worker (streamed, only the task's forms),
log10 relative frequencies with half a count for forms the corpus lacks, and named on
the run page and in the downloads."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from evaluations.models import ProbingRun
from evaluations.probing import controls
from evaluations.probing import services as probing_services
from evaluations.probing.worker import frequency_source, payload_instances, run_probing
from evaluations.scoring.schema import ScoringError
from gym import artifact_cache, artifacts
from suites.corpora.models import Corpus
from suites.corpora.services import corpus_import
from suites.models import ProbingTask
from suites.probing.services import probing_task_import
from tests.conftest import BrowserClient, token_client, tsv_lines

pytestmark = pytest.mark.django_db

# 16 words. Lowercased: dog 2, dogs 2, cat 1, cats 0 (the fallback).
CORPUS = b"the dog barks .\nThe Dog sleeps and the dogs bark .\na cat sees dogs\n"
WORDS = 16
# partition, label, form (field #3), sentence: SentEval's full subj_number layout.
TASK = tsv_lines(
    [
        ("tr", "NN", "dog", "The dog barks ."),
        ("tr", "NNS", "dogs", "The dogs bark ."),
        ("tr", "NN", "cat", "The cat sleeps ."),
        ("tr", "NNS", "cats", "The cats sleep ."),
        ("va", "NN", "Dog", "Dog runs ."),
        ("va", "NNS", "cats", "cats run ."),
        ("te", "NN", "cat", "A cat sits ."),
        ("te", "NNS", "dogs", "Dogs sit ."),
    ]
)
# By hand: log10(count / 16), and log10(0.5 / 16) for cats.
EXPECTED = [
    math.log10(2 / 16),
    math.log10(2 / 16),
    math.log10(1 / 16),
    math.log10(0.5 / 16),
    math.log10(2 / 16),
    math.log10(0.5 / 16),
    math.log10(1 / 16),
    math.log10(2 / 16),
]


@pytest.fixture(autouse=True)
def corpus_dir(settings, tmp_path) -> Path:
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"
    return settings.GYM_CORPUS_DIR


@pytest.fixture
def corpus(alice, tmp_path) -> Corpus:
    path = tmp_path / "counts.txt"
    path.write_bytes(CORPUS)
    return corpus_import(source=path, name="counts", owner=alice)


@pytest.fixture
def task(alice) -> ProbingTask:
    return probing_task_import(source=TASK, name="subj_number", owner=alice)


def _post(client: BrowserClient, body: dict):
    return client.post("/api/probing-runs/", json.dumps(body), content_type="application/json")


def test_counts_stream_only_the_forms_the_task_needs() -> None:
    lines = iter(CORPUS.decode().splitlines())
    source = controls.corpus_unigrams(lines, ["Dog", "cats", "dog\u2019s"], name="counts")
    assert source.counts == {"dog": 2, "cats": 0, "dog's": 0}
    assert (source.words, source.name) == (WORDS, f"corpus counts ({WORDS} words)")
    assert source.fallback == pytest.approx(math.log10(0.5 / WORDS))
    # One pass over the lines it is given (a stream: nothing is read twice).
    assert next(lines, None) is None
    with pytest.raises(ValueError, match="no words"):
        controls.corpus_unigrams(iter(["", "  "]), ["dog"], name="empty")


def test_api_request_stores_the_corpus_and_the_worker_counts_in_it(
    task, corpus, gpt2, alice, anon_client
) -> None:
    client = token_client(alice)
    body = {"task": task.name, "models": ["tiny-gpt2"], "seeds": 1, "frequency_corpus": "counts"}
    created = _post(client, body)
    assert created.status_code == 201, created.content
    listed = created.json()[0]
    assert listed["frequency_corpus"] == "counts"
    assert listed["frequency_source"] == f"corpus counts ({WORDS} words)"
    # The CMU default is a run of its own; asking again for either returns it.
    cmu = _post(client, {**body, "frequency_corpus": None})
    assert cmu.status_code == 201 and cmu.json()[0]["frequency_source"] == controls.CMU_SOURCE
    assert _post(client, body).status_code == 200
    assert ProbingRun.objects.count() == 2
    run = ProbingRun.objects.get(pk=listed["id"])
    assert run.frequency_corpus == corpus

    payload = probing_services.PROBING_RUNS.build_payload(run)
    # The payload names the corpus by its key in the artifact store, never by a path of
    # this host: the worker fetches it into its own cache.
    assert payload["frequency"] == {
        "corpus": "counts",
        "key": f"corpora/{corpus.content_hash}",
        "content_hash": corpus.content_hash,
    }
    assert str(corpus.path.parent) not in json.dumps(payload)
    instances = payload_instances(payload)
    source = frequency_source(payload, instances)
    assert source is not None
    values, fell_back = controls.frequency_features(controls.target_forms(instances) or [], source)
    np.testing.assert_allclose(values, EXPECTED)
    assert fell_back == 2

    results = run_probing(payload)
    frequency = results["baselines"]["frequency"]
    assert frequency["source"] == f"corpus counts ({WORDS} words)"
    assert (frequency["fell_back"], frequency["instances"], frequency["forms"]) == (2, 8, 5)
    assert frequency["fallback"] == pytest.approx(math.log10(0.5 / WORDS))
    assert probing_services.probing_results_store(
        run_id=run.pk, attempt=run.attempt, results=results
    )

    page = anon_client.get(f"/probing-runs/{run.pk}/").content.decode()
    assert f"frequency source: <span data-frequency-source>corpus counts ({WORDS} words)" in page
    assert f"counted in corpus counts ({WORDS} words); 2 of 8 forms not in it fell back" in page
    detail = anon_client.get(f"/api/probing-runs/{run.pk}/").json()
    assert detail["frequency_corpus"] == "counts"
    assert detail["baselines"]["frequency"]["fell_back"] == 2
    document = json.loads(anon_client.get(f"/probing-runs/{run.pk}/results.json").content)
    assert document["frequency_source"] == f"corpus counts ({WORDS} words)"
    rows = list(
        csv.DictReader(
            io.StringIO(anon_client.get(f"/api/probing-runs/{run.pk}/layers.csv").content.decode())
        )
    )
    assert {row["frequency_source"] for row in rows} == {f"corpus counts ({WORDS} words)"}
    assert {row["frequency_fell_back"] for row in rows} == {"2"}
    # The leaderboard's frequency row is the CMU unigrams': a corpus run does not fill it.
    board = anon_client.get("/api/leaderboard/probing/").json()
    assert board["rows"][0]["cells"][task.name]["run"] == run.pk
    assert board["baselines"][task.name]["frequency"] is None
    assert board["baselines"][task.name]["length"] is not None
    # The CMU run names its source before it has run.
    other = anon_client.get(f"/probing-runs/{cmu.json()[0]['id']}/").content.decode()
    assert f"<span data-frequency-source>{controls.CMU_SOURCE}</span>" in other


def test_an_unknown_corpus_or_a_task_without_the_baseline_is_a_400(
    task, corpus, gpt2, alice
) -> None:
    client = token_client(alice)
    unknown = _post(
        client, {"task": task.name, "models": ["tiny-gpt2"], "frequency_corpus": "nowhere"}
    )
    assert unknown.status_code == 400
    error = unknown.json()["errors"][0]
    assert error["path"] == "$.frequency_corpus"
    assert "no corpus is named nowhere" in error["message"]
    custom = probing_task_import(source=TASK, name="toy", owner=alice, task_type="custom")
    refused = _post(
        client, {"task": custom.name, "models": ["tiny-gpt2"], "frequency_corpus": "counts"}
    )
    assert refused.status_code == 400
    error = refused.json()["errors"][0]
    assert error["path"] == "$.frequency_corpus"
    assert "a custom task has no frequency baseline" in error["message"]
    assert not ProbingRun.objects.exists()


def test_the_request_page_offers_the_corpora(task, corpus, gpt2, alice_client) -> None:
    form = alice_client.get(f"/probing-runs/new/?task={task.name}").content.decode()
    assert "CMU US English trigram unigrams (default)" in form
    assert '<option value="counts">counts</option>' in form
    data = {"task": task.name, "models": ["tiny-gpt2"], "pooling": "mean", "probe": "logreg"}
    bad = alice_client.post_form("/probing-runs/new/", {**data, "frequency_corpus": "nowhere"})
    assert bad.status_code == 400 and "no corpus is named that" in bad.content.decode()
    assert not ProbingRun.objects.exists()
    done = alice_client.post_form("/probing-runs/new/", {**data, "frequency_corpus": "counts"})
    assert done.status_code == 302
    assert ProbingRun.objects.get().frequency_corpus == corpus


def test_a_corpus_file_the_worker_cannot_read_fails_the_run_with_the_reason(
    task, corpus, gpt2
) -> None:
    run = probing_services.probing_run_request(
        models=[gpt2], task=task, seeds=1, frequency_corpus=corpus
    ).runs[0]
    payload = probing_services.PROBING_RUNS.build_payload(run)
    # Gone from this host, the artifact store and the worker's cache alike.
    corpus.path.unlink()
    artifacts.delete(corpus.artifact_key)
    artifact_cache.forget(corpus.artifact_key)
    with pytest.raises(ScoringError, match="the frequency corpus 'counts' could not be read"):
        run_probing(payload)
