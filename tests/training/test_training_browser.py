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


def test_learning_curves_follow_the_evaluations(training_dirs, tmp_path, page) -> None:
    """Issue 46: the chart was drawn at page load only. A done run whose checkpoints'
    evaluations finish while its page is open redraws them, and its table, without a
    reload; each benchmark has its chance line (minimal pairs: 0.5)."""
    from evaluations.models import LanguageModel
    from tests.conftest import suite_evaluation
    from tests.training.conftest import example_pair_set, run_with_checkpoints

    text = tmp_path / "tiny.txt"
    text.write_text("a line\nanother line\n")
    corpus = corpus_import(source=text, name="tiny", owner=None)
    suite = suite_import(source=(EXAMPLES / "agreement_local.json").read_text(), owner=None).suite
    run = run_with_checkpoints(corpus, "live", [1, 4, 16], status="done")
    run.suites.set([suite])
    run.pair_sets.set([example_pair_set()])
    evaluations = [
        suite_evaluation(
            LanguageModel.objects.create(name=c["model"], source=f"/tmp/{c['model']}"),
            suite,
            status="queued",
        )
        for c in run.checkpoints
    ]
    page.goto(f"/training/{run.pk}/")
    chart = page.locator("#learning-plot")
    shown = "c => window.Chart.getChart(c).data.datasets.map(d => [d.label, d.data.length])"
    assert chart.evaluate(shown) == [
        [suite.name, 0],
        ["pairs", 0],
        ["pairs: chance", 2],
    ]
    chance = chart.evaluate(
        "c => window.Chart.getChart(c).data.datasets.filter(d => d.chance)"
        ".map(d => d.data.map(p => [p.x, p.y]))"
    )
    assert chance == [[[64, 0.5], [1024, 0.5]]]
    Evaluation.objects.filter(pk=evaluations[1].pk).update(status="done", accuracy=0.7)
    page.wait_for_function(
        "() => window.Chart.getChart(document.getElementById('learning-plot'))"
        ".data.datasets[0].data.length === 1"
    )
    point = chart.evaluate("c => window.Chart.getChart(c).data.datasets[0].data[0]")
    assert point == {"x": 256, "y": 0.7}
    cell = page.locator('tr[data-curve="0"] td[data-point="1"]')
    assert cell.inner_text() == "0.700"
    page.screenshot(path=artifact("training-curves-live.png"), full_page=True)


def test_the_form_shows_the_chosen_kind_and_checks_the_corpus(
    training_dirs, page, alice, tmp_path
) -> None:
    from tests.browser import login

    suite = suite_import(source=(EXAMPLES / "agreement_local.json").read_text(), owner=None).suite
    text = tmp_path / "school.txt"
    text.write_text("The teacher is in the classroom.\nThe bell rang.\n" * 5)
    corpus_import(source=text, name="school", owner=alice)
    login(page, "alice", "alice-pass-1234", next_url="/training/new/?corpus=school")
    ngram = page.locator('fieldset[data-kind="ngram"]')
    custom = page.locator('fieldset[data-preset="custom"]')
    loop = page.locator("fieldset", has_text="Optimisation")
    assert ngram.is_hidden() and custom.is_hidden() and loop.is_visible()
    page.get_by_label("Kind").select_option("ngram")
    assert ngram.is_visible() and loop.is_hidden()
    assert page.get_by_label("Probing tasks").is_hidden()
    page.get_by_label("Kind").select_option("causal")
    page.get_by_label("Preset").select_option("custom")
    assert custom.is_visible() and page.get_by_label("Layers").is_visible()
    assert page.get_by_label("Weight decay").is_visible()
    page.get_by_label("Suites").select_option([suite.name])
    found = page.locator("#corpus-check tr.overlap-found")
    found.wait_for()
    assert found.locator("td").nth(2).inner_text() == "80"
    assert found.locator("td").nth(3).inner_text() == "1"
    assert (
        "1 of the 1 benchmarks have sentences in the corpus school"
        in page.locator("#corpus-check").inner_text()
    )
    page.screenshot(path=artifact("training-form.png"), full_page=True)
