"""The queue form's suite picker in a real browser: typing filters by name or tag, ticked
suites show as chips and are what the form posts, with several models at once."""

from __future__ import annotations

import pytest

from evaluations.models import Evaluation, LanguageModel
from suites.syntaxgym import services as suite_services
from tests.browser import artifact, login
from tests.conftest import small_suite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_picker_filters_by_name_and_tag_and_posts_the_chips(page, alice) -> None:
    for name, tags in [
        ("agreement across a prepositional phrase", ["agreement"]),
        ("agreement in a relative clause", ["agreement"]),
        ("npi licensing", ["licensing"]),
        ("garden path (main verb, reduced relative)", ["garden-path"]),
        ("what? #1 100%", []),
    ]:
        suite_services.suite_import(source=small_suite(name, tags=tags), owner=alice)
    for name in ("lm-a", "lm-b"):
        LanguageModel.objects.create(name=name, display_name=name.upper(), source=f"org/{name}")
    login(page, "alice", "alice-pass-1234", next_url="/evaluations/new/?model=lm-a")
    picker = page.locator(".suite-picker")
    assert page.locator("select#id_suites").is_hidden()
    search = page.get_by_role("searchbox", name="Filter suites by name or tag")
    search.fill("licens")  # a tag
    assert picker.locator(".picker-row").all_inner_texts() == ["npi licensing\nlicensing"]
    search.press("Enter")  # the only match is picked; the form is not sent
    assert page.url.endswith("/evaluations/new/?model=lm-a")
    search.fill("agreement clause")  # every word, in name or tags
    assert picker.locator(".picker-name").all_inner_texts() == ["agreement in a relative clause"]
    search.fill("#1")
    picker.locator('.picker-row input[data-suite="what? #1 100%"]').check()
    search.fill("agreement")
    picker.get_by_role("button", name="Select all shown").click()
    chips = picker.locator(".chip .chip-name").all_inner_texts()
    assert sorted(chips) == [
        "agreement across a prepositional phrase",
        "agreement in a relative clause",
        "npi licensing",
        "what? #1 100%",
    ]
    picker.get_by_role("button", name="Remove agreement in a relative clause").click()
    assert "4 shown" not in picker.locator(".picker-count").inner_text()
    assert "3 chosen" in picker.locator(".picker-count").inner_text()
    page.get_by_label("LM-B").check()
    search.fill("")
    page.screenshot(path=artifact("suite-picker.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    page.get_by_role("button", name="Queue", exact=True).click()
    page.wait_for_url("**/evaluations/?ids=*")
    assert page.locator("[data-request-outcome]").count() == 6
    got = set(Evaluation.objects.values_list("model__name", "suite__name"))
    suites = {"agreement across a prepositional phrase", "npi licensing", "what? #1 100%"}
    assert got == {(m, s) for m in ("lm-a", "lm-b") for s in suites}


def test_without_javascript_the_plain_multi_select_works(browser, live_server, alice) -> None:
    suite_services.suite_import(source=small_suite("s1"), owner=alice)
    suite_services.suite_import(source=small_suite("s2"), owner=alice)
    LanguageModel.objects.create(name="lm-a", display_name="LM-A", source="org/lm-a")
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        page = context.new_page()
        login(page, "alice", "alice-pass-1234", next_url="/evaluations/new/")
        assert page.locator(".suite-picker").count() == 0
        page.get_by_label("LM-A").check()
        page.locator("select#id_suites").select_option(["s1", "s2"])
        page.get_by_role("button", name="Queue", exact=True).click()
        page.wait_for_url("**/evaluations/?ids=*")
    finally:
        context.close()
    assert set(Evaluation.objects.values_list("suite__name", flat=True)) == {"s1", "s2"}
