"""The evaluation page in a real browser: progress and status change without a reload, and
the results link appears only when there are results."""

from __future__ import annotations

import re

import pytest

from evaluations.language_models import registry as model_registry
from evaluations.scoring import worker
from evaluations.syntaxgym import services
from suites.syntaxgym import services as suite_services
from tests.browser import artifact, login
from tests.conftest import small_suite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# progress.js polls every 1.5 s.
POLL_WAIT_MS = 8_000


def test_progress_status_and_results_link_update_live(page, tiny_gpt2, alice) -> None:
    from playwright.sync_api import expect

    suite = suite_services.suite_import(source=small_suite("live page"), owner=alice).suite
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    evaluation = services.evaluation_request(model=model, suites=[suite], user=alice).evaluations[0]
    results = worker.run_scoring(services.scoring_payload(evaluation))

    page.goto(f"/evaluations/{evaluation.pk}/")
    status = page.locator("[data-status]")
    link = page.get_by_role("link", name="See the results")
    expect(status).to_have_text("Queued")
    expect(page.locator("[data-progress-text]")).to_have_text("0 / 4")
    expect(link).to_be_hidden()

    # A worker reports progress: the page follows without a reload.
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=2, total=4)
    expect(status).to_have_text("Running", timeout=POLL_WAIT_MS)
    expect(page.locator("[data-progress-text]")).to_have_text("2 / 4", timeout=POLL_WAIT_MS)
    expect(link).to_be_hidden()

    services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results)
    expect(status).to_have_text("Done", timeout=POLL_WAIT_MS)
    expect(page.locator("[data-progress-text]")).to_have_text("4 / 4")
    expect(page.locator("[data-accuracy]")).to_have_text(re.compile(r"^[01]\.\d{3}$"))
    expect(link).to_be_visible()
    page.screenshot(path=artifact("evaluation-done.png"))
    link.click()
    expect(page.get_by_role("heading", name="Accuracy per prediction")).to_be_visible()


def test_a_failed_run_shows_its_reason_and_a_retry_button(page, alice) -> None:
    from playwright.sync_api import expect

    from evaluations.models import LanguageModel

    suite = suite_services.suite_import(source=small_suite("fails"), owner=alice).suite
    ghost = LanguageModel.objects.create(name="ghost", display_name="Ghost", source="/no/model")
    evaluation = services.evaluation_request(model=ghost, suites=[suite], user=alice).evaluations[0]
    login(page, "alice", "alice-pass-1234", next_url=f"/evaluations/{evaluation.pk}/")
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)

    services.evaluation_fail(
        evaluation_id=evaluation.pk, attempt=1, reason="The model could not be loaded: gone"
    )
    expect(page.locator("[data-status]")).to_have_text("Failed", timeout=POLL_WAIT_MS)
    expect(page.locator("[data-error-text]")).to_have_text("The model could not be loaded: gone")
    expect(page.get_by_role("button", name="Retry")).to_be_visible(timeout=POLL_WAIT_MS)
    expect(page.get_by_role("link", name="See the results")).to_be_hidden()
