"""A series' page in a real browser: the learning curves draw against the words seen of
BabyLM-named revisions (log axis); a series registered and evaluated through the site's
forms, the API's messages shown at their fields; no Content Security Policy violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluations.models import Evaluation, LanguageModel, ModelSeries
from evaluations.training import series as series_services
from suites.syntaxgym import services as suite_services
from tests.browser import login
from tests.conftest import small_suite, suite_evaluation
from tests.series.conftest import TRAINER_STEPS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_series_page_draws_its_curves(hub_standin: Path, page) -> None:
    suite = suite_services.suite_import(source=small_suite("agree"), owner=None).suite
    made = series_services.series_register(
        name="babylm", source=str(hub_standin), revisions=["chck_1M", "chck_10M", "chck_100M"]
    )
    made.suites.add(suite)
    for member, accuracy in zip(made.members.order_by("position"), (0.4, 0.85, 0.9), strict=True):
        suite_evaluation(member.model, suite, status="done", accuracy=accuracy)
    page.goto("/series/babylm/")
    chart = page.locator("#learning-plot")
    drawn = chart.evaluate("c => window.Chart.getChart(c).data.datasets.map(d => d.data.length)")
    assert drawn[0] == 3
    assert chart.evaluate("c => window.Chart.getChart(c).scales.x.type") == "logarithmic"
    title = chart.evaluate("c => window.Chart.getChart(c).options.scales.x.title.text")
    assert title == "Words seen (log scale)"
    assert page.locator("td[data-age]").inner_text() == "10000000"


def test_seeds_draw_as_a_mean_with_a_band(hub_standin: Path, page) -> None:
    suite = suite_services.suite_import(source=small_suite("agree"), owner=None).suite
    for seed, accuracies in (("seed-1", (0.5, 0.9)), ("seed-2", (0.7, 0.8))):
        made = series_services.series_register(
            name=seed, source=str(hub_standin), pattern="step{N}", steps=[1000, 2000],
            tokens_per_step=10, group="seeds",
        )  # fmt: skip
        made.suites.add(suite)
        for member, accuracy in zip(made.members.order_by("position"), accuracies, strict=True):
            model = LanguageModel.objects.create(
                name=f"{seed}-{member.step}", display_name=seed, source=f"{seed}/{member.step}"
            )
            member.model = model
            member.save()
            suite_evaluation(model, suite, status="done", accuracy=accuracy)
    page.goto("/series/seed-1/")
    shown = page.locator("#learning-plot").evaluate(
        "c => window.Chart.getChart(c).data.datasets.map(d => [d.label, d.data.map(p => p.y)])"
    )
    by_label = dict(shown)
    assert by_label["agree (mean of 2 seeds)"] == pytest.approx([0.6, 0.85])
    assert by_label["agree: lowest seed"] == [0.5, 0.8]
    assert by_label["agree: highest seed"] == [0.7, 0.9]
    assert page.locator("td[data-seed-age]").inner_text() == "20000 [20000, 20000]"


def test_register_and_evaluate_a_series_from_the_forms(
    alice, trainer_folder: Path, page, _private_broker
) -> None:
    suite = suite_services.suite_import(source=small_suite("agree"), owner=alice).suite
    login(page, "alice", "alice-pass-1234", next_url="/series/")
    page.get_by_role("link", name="Register a series").click()
    page.get_by_label("Name", exact=True).fill("trainer")
    page.get_by_label("Folder").fill("no-such-run")
    page.get_by_role("button", name="Register").click()
    assert (
        "no folder 'no-such-run' under the model folders"
        in page.locator("#series-register").inner_text()
    )
    assert not ModelSeries.objects.exists()

    page.get_by_label("Folder").fill(str(trainer_folder))
    page.get_by_role("button", name="Register").click()
    page.wait_for_url("**/series/trainer/")
    assert "Registered the series trainer: 3 checkpoints." in page.locator("body").inner_text()
    assert page.locator("table.checkpoints tbody tr").count() == len(TRAINER_STEPS)

    page.get_by_role("button", name="Evaluate the series").click()  # nothing chosen
    assert (
        "give suites, tags, pair_sets or probing_tasks"
        in page.locator("#series-evaluate").inner_text()
    )
    page.get_by_label("Suites").select_option(suite.name)
    page.get_by_role("button", name="Evaluate the series").click()
    page.wait_for_url("**/series/trainer/")
    assert "Asked for the runs of 3 checkpoints" in page.locator("body").inner_text()
    assert Evaluation.objects.filter(suite=suite).count() == len(TRAINER_STEPS)
