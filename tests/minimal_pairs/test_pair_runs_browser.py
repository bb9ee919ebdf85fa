"""Minimal-pair runs in a real browser: the set page's "Evaluate with model(s)" form
queues a run and lands on its page with a Cancel button; the owner's import form takes
an NLPScholar predictions file and shows the run's results. Screenshots go to the
artifacts folder."""

from __future__ import annotations

import pytest

from evaluations.models import LanguageModel, PairEvaluation
from suites.minimal_pairs import sets as pair_sets
from tests.browser import artifact, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DATA = (
    "sentid\tpairid\tcomparison\tsentence\tROI\tcond\n"
    "1\t1\texpected\tthe keys are here\t2\tagr\n"
    "2\t1\tunexpected\tthe keys is here\t2\tagr\n"
)
PREDICTIONS = "token\tsentid\tword\twordpos\tmodel\ttokenizer\tpunctuation\tprob\tsurp\n" + "".join(
    f"{w}\t{sid}\t{w}\t{i}\tbig\tbig\tFalse\t{2**-s}\t{s}\n"
    for sid, text, surps in (
        ("1", "the keys are here", (1, 2, 3, 4)),
        ("2", "the keys is here", (1, 2, 5, 4)),
    )  # fmt: skip
    for i, (w, s) in enumerate(zip(text.split(), surps, strict=True))
)


def test_queue_from_the_set_page_and_import_predictions(page, alice, tmp_path) -> None:
    pair_sets.minimal_pair_set_import(data=DATA, name="keys", owner=alice)
    LanguageModel.objects.create(name="tiny", display_name="Tiny LM", source="tiny/lm")
    login(page, "alice", "alice-pass-1234", next_url="/minimal-pairs/keys/")
    section = page.locator("section.pair-actions")
    section.get_by_label("Models").select_option(["tiny"])
    section.screenshot(path=artifact("pair-set-evaluate.png"))
    section.get_by_role("button", name="Queue evaluation").click()
    page.wait_for_url("**/pairs/evaluations/*/")
    run = PairEvaluation.objects.get()
    assert page.url.endswith(f"/pairs/evaluations/{run.pk}/")
    assert page.get_by_role("button", name="Cancel").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]

    predictions = tmp_path / "predictions.tsv"
    predictions.write_text(PREDICTIONS)
    page.goto("/minimal-pairs/keys/")
    page.get_by_role("link", name="Import NLPScholar predictions…").click()
    page.get_by_label("Predictions TSV").set_input_files(str(predictions))
    page.get_by_label("Model", exact=True).fill("big-lm")
    page.get_by_label("Register it by name if there is no such model").check()
    page.screenshot(path=artifact("pair-import.png"), full_page=True)
    page.get_by_role("button", name="Import").click()
    page.wait_for_url("**/pairs/evaluations/*/")
    imported = PairEvaluation.objects.get(origin="imported")
    assert page.url.endswith(f"/pairs/evaluations/{imported.pk}/")
    assert imported.accuracy == 1.0 and imported.model.source == "imported:big-lm"
    page.screenshot(path=artifact("pair-imported-result.png"), full_page=True)
