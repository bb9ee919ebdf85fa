"""The prediction language page (/docs/predictions/): it renders for anyone, the editor
and the upload page link to it, every example formula on it is accepted by the importer's
parser in the page's example suite, and every "common mistake" is refused with the message
the page shows. So the page cannot drift from the parser. Writes
artifacts/prediction-docs.png."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from suites.formats import predictions
from suites.syntaxgym.authoring import DOC_CONDITIONS, DOC_MISTAKES, DOC_REGIONS, formula_problem

URL = "/docs/predictions/"
GOOD = re.compile(r'<code class="formula">(.*?)</code>', re.S)
MISTAKE_ROW = re.compile(
    r'<code class="formula-bad">(.*?)</code></td><td class="num">(\d*)</td>'
    r'<td class="doc-message">(.*?)</td>',
    re.S,
)


def _page() -> str:
    response = Client().get(URL)
    assert response.status_code == 200
    return response.content.decode()


def test_the_url_is_the_documented_one() -> None:
    assert reverse("suites:prediction_docs") == URL


@pytest.mark.django_db
def test_every_example_on_the_page_is_accepted_by_the_parser() -> None:
    examples = [unescape(text) for text in GOOD.findall(_page())]
    assert len(examples) >= 15
    for formula in examples:
        node = predictions.parse(formula)
        problems = predictions.check_references(
            node, region_numbers=set(DOC_REGIONS), condition_names=set(DOC_CONDITIONS)
        )
        assert problems == [], f"{formula}: {problems}"
    # The precedence examples say two spellings mean the same formula.
    assert predictions.parse("~ (1;%match%) > 0") == predictions.parse("~((1;%match%) > 0)")
    assert predictions.parse("-(3;%match%) * 2 < 0") == predictions.parse("(-(3;%match%)) * 2 < 0")


@pytest.mark.django_db
def test_every_mistake_is_refused_with_the_message_shown() -> None:
    rows = MISTAKE_ROW.findall(_page())
    assert [unescape(formula) for formula, _col, _message in rows] == list(DOC_MISTAKES)
    for formula, col, message in rows:
        problem = formula_problem(unescape(formula))
        assert problem is not None, f"{formula} is accepted"
        assert (str(problem[0]), problem[1]) == (col, unescape(message))
    shown = {unescape(message) for _formula, _col, message in rows}
    assert "'>=' is not an operator; write ~(a < b), or (a > b) | (a = b)" in shown
    assert any("did you mean 'match'?" in message for message in shown)


@pytest.mark.django_db
def test_the_editor_and_the_upload_page_link_to_it(alice_client) -> None:
    for page in ("/editor/", "/upload/"):
        response = alice_client.get(page)
        assert response.status_code == 200
        assert f'href="{URL}"' in response.content.decode(), page


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_page_in_a_browser(page) -> None:
    from playwright.sync_api import expect

    from tests.browser import artifact

    page.goto(URL)
    expect(page.get_by_role("heading", level=1)).to_have_text("The prediction language")
    expect(page.locator("table.doc-mistakes tbody tr")).to_have_count(len(DOC_MISTAKES))
    page.screenshot(path=artifact("prediction-docs.png"), full_page=True)
