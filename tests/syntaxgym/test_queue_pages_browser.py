"""The upload page's rename offer and the re-run-outdated button in a real browser: one
click saves a clashing upload under the free name; one click re-queues what is
outdated, and the answer page marks what this request queued."""

from __future__ import annotations

import json

import pytest

from evaluations.models import Evaluation, LanguageModel
from evaluations.syntaxgym import services
from suites.models import Suite
from suites.syntaxgym import services as suite_services
from tests.browser import artifact, login
from tests.conftest import small_suite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_one_click_saves_a_clashing_upload_under_the_free_name(page, alice, bob) -> None:
    suite_services.suite_import(source=small_suite("agreement"), owner=alice)
    login(page, "bob", "bob-pass-1234", next_url="/upload/")
    page.get_by_label("…or paste the JSON").fill(json.dumps(small_suite("agreement")))
    page.get_by_label("Tags").fill("mine, agreement")
    page.get_by_role("button", name="Upload").click()
    offer = page.locator("[data-rename-offer]")
    assert "A suite named “agreement” exists already" in offer.inner_text()
    assert page.get_by_label("If the name is taken, save it under the next free name").is_checked()
    page.screenshot(path=artifact("upload-rename-offer.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    offer.get_by_role("button", name="Save it as “agreement (2)”").click()
    page.wait_for_url("**/suites/agreement%20(2)/")
    assert "so this one was saved as “agreement (2)”" in page.locator(".messages").inner_text()
    saved = Suite.objects.get(name="agreement (2)")
    assert saved.owner == bob and sorted(t.name for t in saved.tags.all()) == [
        "agreement",
        "mine",
    ]


def test_rerun_outdated_from_the_suite_page(page, alice) -> None:
    suite = suite_services.suite_import(source=small_suite("s1"), owner=alice).suite
    models = [
        LanguageModel.objects.create(name=n, display_name=n.upper(), source=f"org/{n}")
        for n in ("lm-a", "lm-b", "lm-c")
    ]
    services.evaluations_request(models=models[:2], suites=[suite])
    Evaluation.objects.update(status="done", accuracy=0.5)
    changed = small_suite("s1")
    changed["items"][1]["conditions"][1]["regions"][1]["content"] = "were"
    suite = suite_services.suite_replace(suite=suite, user=alice, source=changed).suite
    # lm-c is already queued on the new content: it is not asked for again.
    services.evaluation_request(model=models[2], suites=[suite])
    login(page, "alice", "alice-pass-1234", next_url="/suites/s1/")
    button = page.get_by_role("button", name="Re-run 2 outdated")
    assert button.get_attribute("title") == "LM-A, LM-B"
    page.locator("#h-results").scroll_into_view_if_needed()
    page.screenshot(path=artifact("rerun-outdated-suite.png"))
    button.click()
    page.wait_for_url("**/evaluations/?ids=*")
    summary = page.locator("[data-request-summary]").inner_text()
    assert summary.startswith("2 queued by this request")
    outcomes = page.locator("[data-request-outcome]").all_inner_texts()
    assert sorted(outcomes) == ["queued now", "queued now"]
    page.screenshot(path=artifact("rerun-outdated-answer.png"), full_page=True)
    current = Evaluation.objects.filter(content_hash=suite.content_hash)
    assert sorted(current.values_list("model__name", flat=True)) == ["lm-a", "lm-b", "lm-c"]
