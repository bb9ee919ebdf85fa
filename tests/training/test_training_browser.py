"""A training run's page in a real browser: the loss curve and the learning curves draw
(log axis); screenshot in the artifacts folder."""

from __future__ import annotations

import pytest

from evaluations.models import Evaluation
from evaluations.training import services
from evaluations.training.worker import run_training
from suites.corpora.services import corpus_import
from suites.syntaxgym.services import suite_import
from tests.browser import artifact
from tests.conftest import EXAMPLES, single_torch_thread

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_run_page_draws_loss_and_learning_curves(book_corpus, page) -> None:
    suites = [
        suite_import(source=(EXAMPLES / f"{name}.json").read_text(), owner=None).suite
        for name in ("agreement_local", "npi_licensing")
    ]
    run = services.training_request(
        corpus=book_corpus,
        name="book-tiny",
        kind="causal",
        options={"preset": "tiny", "steps": 12, "checkpoints": 4, "micro_batch": 4},
        suites=suites,
    )
    with single_torch_thread():
        results = run_training(services.training_payload(run), progress=lambda d, t: None)
    assert services.training_results_store(run_id=run.pk, attempt=1, results=results)
    run.refresh_from_db()
    # Accuracies as the checkpoints' suite runs would store them.
    for n, point in enumerate(run.checkpoints):
        for suite, base in zip(suites, (0.3, 0.6), strict=True):
            Evaluation.objects.filter(model__name=point["model"], suite=suite).update(
                status="done", accuracy=min(1.0, base + 0.15 * n)
            )
    page.goto(f"/training/{run.pk}/")
    loss = page.locator("#loss-plot").evaluate(
        "c => window.Chart.getChart(c).data.datasets.map(d => d.data.length)"
    )
    assert loss == [12, 4]
    scale = page.locator("#learning-plot").evaluate("c => window.Chart.getChart(c).scales.x.type")
    assert scale == "logarithmic"
    page.screenshot(path=artifact("training-run.png"), full_page=True)


def test_request_page_trains_from_the_corpus_page(training_dirs, page, alice, tmp_path) -> None:
    from tests.browser import login

    plain = tmp_path / "kids.txt"
    plain.write_text("look at the doggy\nwhere is the ball\n" * 50)
    corpus_import(source=plain, name="kids", owner=alice)
    login(page, "alice", "alice-pass-1234", next_url="/corpora/kids/")
    page.get_by_role("link", name="Train a model on this corpus").click()
    page.get_by_label("Name").fill("kids-3gram")
    page.get_by_label("Kind").select_option("ngram")
    page.screenshot(path=artifact("training-request.png"), full_page=True)
    page.get_by_role("button", name="Train").click()
    page.wait_for_url("**/training/*/")
    assert page.locator("h1").inner_text() == "Training kids-3gram"
    page.goto("/corpora/kids/")
    assert page.get_by_role("link", name="kids-3gram").count() == 1
