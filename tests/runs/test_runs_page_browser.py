"""The Runs page in a browser: long model and benchmark names wrap inside their cells (the
page never gets wider than a narrow window), the filters narrow the list through the
query string, and the empty state says what to do. Screenshots go to artifacts/."""

from __future__ import annotations

import pytest

from evaluations.models import LanguageModel, PairEvaluation, ProbingRun
from suites.minimal_pairs import sets as pair_sets
from suites.probing.services import probing_task_import
from suites.syntaxgym import services as suite_services
from tests.browser import artifact, login, overflow
from tests.conftest import small_suite
from tests.runs.test_runs_page import PAIRS, PROBING, done_suite_run, running_pair_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_SUITE = "Subject-verb agreement across an object relative clause " * 3 + "end"
LONG_MODEL = "EleutherAI/pythia-1.4b-deduped-" + "checkpoint-" * 8 + "143000"


def test_runs_page_with_long_names_and_filters(page, alice, bob) -> None:
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/runs/")
    assert page.locator(".empty").inner_text().startswith("No runs yet.")
    page.screenshot(path=artifact("runs-empty.png"), full_page=True)

    suite = suite_services.suite_import(source=small_suite(LONG_SUITE), owner=alice).suite
    pair_set = pair_sets.minimal_pair_set_import(
        data=PAIRS, name="blimp-" + "anaphor_gender_agreement_" * 3, owner=alice
    ).pair_set
    task = probing_task_import(source=PROBING, name="toy_number_probe", owner=alice)
    long = LanguageModel.objects.create(
        name="pythia-long", display_name=LONG_MODEL, source="org/long"
    )
    gpt2 = LanguageModel.objects.create(name="gpt2", display_name="GPT-2", source="gpt2")
    done_suite_run(long, suite, alice, items=8)
    pair_run = running_pair_run(long, pair_set, bob)
    ProbingRun.objects.create(
        model=gpt2, task=task, content_hash="old", status="failed", requested_by=alice
    )
    ProbingRun.objects.create(
        model=long, task=task, content_hash=task.content_hash, requested_by=alice
    )

    login(page, "alice", "alice-pass-1234")
    page.goto("/")
    page.get_by_role("link", name="Runs", exact=True).click()
    page.wait_for_url("**/runs/")
    assert page.locator("table.runs tbody tr").count() == 4
    for width in (1280, 720):
        page.set_viewport_size({"width": width, "height": 900})
        assert overflow(page) <= 0, f"/runs/ is {overflow(page)} px too wide at {width}"
        page.screenshot(path=artifact(f"runs-{width}.png"), full_page=True)

    page.set_viewport_size({"width": 1280, "height": 900})
    # Unfinished rows follow their runs without a reload.
    PairEvaluation.objects.filter(pk=pair_run.pk).update(status="done", progress_done=2)
    row = page.locator(f'tr[data-api="/api/pairs/evaluations/{pair_run.pk}/"]')
    row.locator('[data-status]:text("Done")').wait_for()
    assert "2 / 2" in row.inner_text()
    page.select_option("#run-kind", "probing")
    page.check("input[name=mine]")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**/runs/?kind=probing*mine=1*")
    assert page.locator("table.runs tbody tr").count() == 2
    page.select_option("#run-status", "failed")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**status=failed*")
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 1 and "GPT-2" in rows.first.inner_text()
    rows.first.get_by_role("link", name="Details").click()
    page.wait_for_url("**/probing-runs/*/")
    assert page.locator("h1").first.is_visible()
