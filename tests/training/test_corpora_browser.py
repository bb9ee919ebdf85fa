"""A corpus page in a real browser: the length histogram draws; screenshot in artifacts."""

from __future__ import annotations

import pytest

from suites.corpora.services import corpus_import
from tests.browser import artifact
from tests.training.conftest import sentences_file

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_corpus_page_draws_the_histogram(page, settings, tmp_path) -> None:
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"
    # The sentences alone (the third field), as plain text.
    plain = sentences_file(tmp_path / "bookcorpus-sample.txt", "tree_depth")
    corpus_import(source=plain, name="bookcorpus-sample", owner=None, description="BookCorpus")
    page.goto("/corpora/bookcorpus-sample/")
    counts = page.locator("#length-plot").evaluate(
        "c => window.Chart.getChart(c).data.datasets[0].data"
    )
    assert sum(counts) == 710
    page.screenshot(path=artifact("corpus-page.png"), full_page=True)
    page.goto("/corpora/")
    assert page.get_by_role("link", name="bookcorpus-sample").count() == 1
