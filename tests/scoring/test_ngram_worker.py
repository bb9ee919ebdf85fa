"""Integration: the CMU trigram baseline, registered as the bootstrap registers it,
evaluated through real Redis, a real Celery worker and the real database, with its ties
and unknown words stored and shown."""

from __future__ import annotations

import pytest

from evaluations import baseline
from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation
from evaluations.syntaxgym import services
from suites.syntaxgym import services as suite_services
from tests.celery_harness import Worker, broker, flush_redis, redis_or_skip, wait_finished
from tests.conftest import SHARED_DATA

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CMU_TRIGRAM = baseline.cmu_trigram_path()


@pytest.fixture
def worker(tmp_path):
    url = redis_or_skip()
    with broker(url):
        started = Worker(tmp_path, "celery,gpu")
        started.wait_ready()
        yield started
        started.stop()
    flush_redis()


@pytest.mark.skipif(CMU_TRIGRAM is None, reason="pocketsphinx is not installed")
def test_trigram_evaluation_through_a_real_worker(worker, alice, anon_client) -> None:
    assert CMU_TRIGRAM is not None
    path = SHARED_DATA / "syntaxgym-2020" / "nextflow" / "mvrr.json"
    if not path.is_file():
        pytest.skip("shared data not found")
    suite = suite_services.suite_import(source=path.read_bytes(), owner=None).suite
    model = model_registry.model_register(
        source=str(CMU_TRIGRAM),
        name=baseline.NGRAM_BASELINE_NAME,
        display_name=baseline.NGRAM_BASELINE_DISPLAY,
        is_baseline=True,
        # The package's folder is no model folder; gym_bootstrap allows it the same way.
        extra_model_dirs=[CMU_TRIGRAM.parent],
    )
    assert model.kind == "ngram"
    [evaluation] = services.evaluation_request(model=model, suites=[suite], user=alice).evaluations
    evaluation = wait_finished(Evaluation, evaluation.pk, what="the n-gram run", timeout=240)
    assert evaluation.status == "done", evaluation.error
    # Every mvrr comparison reads a region whose two words of context are the same in
    # both conditions: three exact ties per item, each a failure.
    assert evaluation.accuracy == 0.0 and evaluation.ties == 3 * suite.item_count
    assert evaluation.accuracy_random_ties == pytest.approx(0.125)
    assert evaluation.diagnostics["oov_words"] == 0
    assert evaluation.model_info["kind"] == "ngram" and evaluation.model_info["order"] == 3
    page = anon_client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert 'id="ties"' in page and 'id="oov"' in page
    row = anon_client.get("/api/leaderboard/").json()["rows"][0]
    assert row["is_baseline"] and row["ties"] == evaluation.ties
    assert Evaluation.objects.filter(model=model).count() == 1
