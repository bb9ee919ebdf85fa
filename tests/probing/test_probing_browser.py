"""Probing pages in a real browser: a run's layer plot (with a control run overlaid),
its confusion heatmap, the leaderboard section, a model's small multiples and the task
page's request form; screenshots go to the artifacts folder."""

from __future__ import annotations

import pytest

from evaluations.language_models import registry as model_registry
from evaluations.models import ProbingRun
from evaluations.probing import services as probing_services
from evaluations.probing.worker import run_probing
from suites.probing.services import probing_task_import
from tests.browser import artifact, login
from tests.conftest import SHARED_DATA, single_torch_thread, tsv_lines
from tests.probing.conftest import sample

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
LONG = "A control model with random weights and a display name long enough to wrap twice"


def _probe(model, task) -> ProbingRun:
    run = probing_services.probing_run_request(models=[model], task=task).runs[0]
    with single_torch_thread():
        results = run_probing(probing_services.probing_payload(run))
    probing_services.probing_results_store(run_id=run.pk, attempt=1, results=results)
    run.refresh_from_db()
    return run


def _chart_lines(page, selector: str) -> list[str]:
    return page.locator(selector).first.evaluate(
        "c => window.Chart.getChart(c).data.datasets.map(d => d.label)"
    )


def test_run_page_leaderboard_model_page_and_task_form(
    page,
    alice,
    tiny_gpt2,  # noqa: F811
    tiny_bert,  # noqa: F811
) -> None:
    source = sample("top_constituents")
    task = probing_task_import(source=source, name="top_constituents", owner=alice)
    probing_task_import(
        source=SHARED_DATA / "senteval-probing" / "past_present.txt",
        name="past_present with a rather long task name for the column header",
        owner=alice,
    )
    gpt2 = model_registry.model_register(source=str(tiny_gpt2), name="tiny-gpt2")
    control = model_registry.model_register(
        source=str(tiny_bert), name="control", display_name=LONG
    )
    run = _probe(gpt2, task)
    other = _probe(control, task)

    page.goto(f"/probing-runs/{run.pk}/?control={other.pk}")
    page.wait_for_function(
        "() => window.Chart && document.querySelector('canvas[data-probing-plot]')"
    )
    lines = _chart_lines(page, "canvas[data-probing-plot]")
    assert lines[:2] == [f"te ({gpt2.display_name})", "va"]
    assert "majority baseline" in lines and "length baseline" in lines
    assert f"te ({LONG})" in lines
    # Three seeds: the band's two edges; the control task's curve; no frequency baseline
    # (top_constituents has none).
    assert lines.count("te ± sd (seeds)") == 2 and "control task (te)" in lines
    assert "frequency baseline" not in lines
    legend = page.locator("canvas[data-probing-plot]").first.evaluate(
        "c => window.Chart.getChart(c).legend.legendItems.map(i => i.text)"
    )
    assert legend.count("te ± sd (seeds)") == 1
    assert "selectivity at layer" in page.locator(".summary").inner_text()
    cells = page.locator("table.confusion tbody tr").count()
    assert cells == len(task.labels)
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    page.screenshot(path=artifact("probing-run.png"), full_page=True)

    page.goto("/leaderboard/#probing")
    section = page.locator("#probing")
    # two models; majority, length and frequency baseline rows, and the human row
    assert section.locator("tbody tr").count() == 2 + 3 + 1
    assert "No one has labelled" in section.locator("tr.pb-human td span").last.get_attribute(
        "title"
    )
    row = section.locator("tbody tr", has_text=gpt2.display_name).inner_text()
    assert f"L{run.best_layer}" in row and "sel " in row
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    section.screenshot(path=artifact("probing-leaderboard.png"))

    page.goto(f"/models/{gpt2.name}/")
    page.wait_for_function("() => window.Chart && document.querySelector('.multiple canvas')")
    assert page.locator(".multiple").count() == 1
    assert _chart_lines(page, ".multiple canvas")[:2] == ["te", "va"]
    page.screenshot(path=artifact("probing-model.png"), full_page=True)

    login(page, "alice", "alice-pass-1234", next_url=f"/probing/{task.name}/")
    page.get_by_text("Probe models on this task").click()
    page.get_by_label("Models").select_option(["control"])
    page.get_by_label("Probe").select_option("mlp")
    page.locator("section[aria-labelledby=h-probing-runs]").screenshot(
        path=artifact("probing-task-runs.png")
    )
    page.get_by_role("button", name="Queue probing").click()
    page.wait_for_url("**/probing-runs/*/")
    queued = ProbingRun.objects.get(model=control, probe="mlp")
    assert page.url.endswith(f"/probing-runs/{queued.pk}/")
    assert "vectors: 0 of" in page.locator("[data-progress-text]").inner_text()


def test_empty_leaderboard_section_and_model_without_runs(page) -> None:
    page.goto("/leaderboard/")
    assert "There are no probing tasks yet" in page.locator("#probing").inner_text()
    page.locator("#probing").screenshot(path=artifact("probing-leaderboard-empty.png"))


def test_annotation_page_asks_one_sentence_at_a_time(page, alice) -> None:
    source = sample("odd_man_out")
    task = probing_task_import(source=source, name="odd_man_out", owner=alice)
    login(page, "alice", "alice-pass-1234", next_url=f"/probing/{task.name}/annotate/")
    assert "0 of 191 answered" in page.locator("main").inner_text()
    first = page.locator(".annotate-sentence").inner_text()
    page.get_by_label("C (one noun or verb replaced)").check()
    page.get_by_role("button", name="Save and next").click()
    page.wait_for_function("() => document.body.innerText.includes('1 of 191 answered')")
    assert page.locator(".annotate-sentence").inner_text() != first
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    page.screenshot(path=artifact("probing-annotate.png"), full_page=True)


FIVE = tsv_lines(
    [
        ("tr", "O", "the dog barks ."),
        ("tr", "C", "the dog sings the table ."),
        ("va", "O", "a cat sleeps ."),
        ("te", "O", "the bird flies ."),
        ("te", "C", "the bird eats a song ."),
        ("te", "O", "the horse runs ."),
        ("te", "C", "the horse reads the rain ."),
        ("te", "O", "a fish swims ."),
    ]
)


def test_five_sentences_labelled_by_keyboard_make_the_human_row(page, alice) -> None:
    task = probing_task_import(source=FIVE, name="five to label", owner=alice, task_type="custom")
    login(page, "alice", "alice-pass-1234", next_url=f"/probing/{task.name}/annotate/")
    for done in range(5):
        assert f"{done} of 5 answered" in page.locator("main").inner_text()
        # The first label has the focus: Space picks it, Enter saves and moves on.
        page.keyboard.press("Space")
        page.keyboard.press("Enter")
        page.wait_for_function(
            f"() => document.body.innerText.includes('{done + 1} of 5 answered')"
        )
    main = page.locator("main").inner_text()
    # Always the first label ("C": the labels are in sorted order): right on two of five.
    assert task.labels[0] == "C"
    assert "You have answered every sentence" in main and "0.40 (2 of 5)" in main
    assert "Everyone who has finished" in main
    assert "agreement: needs two people who finished" in main
    assert page.locator('table[aria-label="Each annotator\'s accuracy"] tbody tr').count() == 2
    page.screenshot(path=artifact("probing-annotate-done.png"), full_page=True)

    page.goto("/leaderboard/#probing")
    human = page.locator("tr.pb-human")
    assert human.locator("th").inner_text() == "human"
    assert "0.40" in human.inner_text() and "0.12–0.77" in human.inner_text()
    page.locator("#probing").screenshot(path=artifact("probing-leaderboard-human.png"))
