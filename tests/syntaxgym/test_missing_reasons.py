"""Why a region value is missing, said where it is shown (issue 29): the item page beside
the value, the item API, and the result page's counts per reason. Derived from the stored
token offsets, so results stored before this existed get their reasons too."""

from __future__ import annotations

import io
import re
from html import unescape
from typing import Any

import pytest
from django.core.management import call_command

from evaluations import baseline
from evaluations.models import LanguageModel
from evaluations.scoring import worker
from evaluations.syntaxgym.missing import MissingReason, sentence_reasons
from suites import formats
from suites.models import Suite
from tests.conftest import EXAMPLES, running_evaluation, store_sentences
from tests.syntaxgym.test_item_text import _evaluation, _packed, stored_with

pytestmark = pytest.mark.django_db

CMU_TRIGRAM = baseline.cmu_trigram_path()
needs_trigram = pytest.mark.skipif(CMU_TRIGRAM is None, reason="pocketsphinx is not installed")

UNCOVERED_COMMA = (
    "no token of this model covers this region: the n-gram model drops ',' (it scores words, "
    "not punctuation inside a sentence)"
)


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _boxes(html: str, condition: str) -> list[str]:
    part = html.split(f'data-condition="{condition}"')[1].split("</article>")[0]
    return [_text(box) for box in re.findall(r'data-region="\d+">(.*?)</div>', part, re.S)]


def _reasons_list(html: str) -> list[str]:
    found = re.search(
        r"<div class=\"tokenization-note small\" data-missing-reasons>(.*?)</div>", html, re.S
    )
    assert found, "no missing reasons on the page"
    return [_text(li) for li in re.findall(r"<li[^>]*>(.*?)</li>", found.group(1), re.S)]


# --- the reasons, from stored offsets ----------------------------------------------------


def test_reasons_from_offsets() -> None:
    regions = ["As the chef", "stirred", ",", "the soup"]
    numbers = [1, 2, 3, 4]
    packed = {
        "text": ["as", "the", "chef", "stirred", "the", "soup"],
        "start": [0, 3, 7, 12, 22, 26],
        "end": [2, 6, 11, 19, 25, 30],
        "surp": [None, 1.0, 2.0, 3.0, 4.0, 5.0],
    }
    values = [None, 3.0, None, 9.0]
    assert sentence_reasons(regions, numbers, values, packed, "ngram") == [
        MissingReason(
            "no_surprisal",
            "its token 'As' has no surprisal: it is the sentence's first token and the model "
            "has no beginning-of-sentence token to condition it on",
        ),
        None,
        MissingReason("uncovered", UNCOVERED_COMMA, ","),
        None,
    ]
    # Another tokenizer that dropped characters: said without claiming a vocabulary.
    assert sentence_reasons(regions, numbers, values, packed, "causal")[2] == MissingReason(
        "uncovered", "no token of this model covers this region: its tokenizer dropped ','", ","
    )
    # Stored before tokens were kept.
    assert sentence_reasons(regions, numbers, values, None, "causal") == [
        MissingReason(
            "unknown", "reason unknown: this evaluation was scored before Gym kept tokens"
        ),
        None,
        MissingReason(
            "unknown", "reason unknown: this evaluation was scored before Gym kept tokens"
        ),
        None,
    ]
    # Several runs of characters no token covers, named each.
    assert sentence_reasons(
        ["Yes", "; -- !", "no"], [1, 2, 3], [1.0, None, 2.0],
        {"text": ["yes", "no"], "start": [0, 11], "end": [3, 13], "surp": [1.0, 1.0]},
        "ngram",
    )[1] == MissingReason(
        "uncovered",
        "no token of this model covers this region: the n-gram model drops ';', '--' and '!' "
        "(it scores words, not punctuation inside a sentence)",
        "; -- !",
    )  # fmt: skip


def test_a_region_swallowed_by_a_piece_names_the_piece_and_its_regions() -> None:
    regions = ["As the chef", "stirred", ",", "the soup"]
    packed = {
        "text": ["▁As", "▁the", "▁chef", "▁stirred▁,", "▁the", "▁soup"],
        "start": [0, 3, 7, 11, 21, 25],
        "end": [2, 6, 11, 21, 25, 30],
        "surp": [1.0] * 6,
    }
    assert sentence_reasons(regions, [1, 2, 3, 4], [2.0, 1.0, None, 2.0], packed, "causal") == [
        None,
        None,
        MissingReason(
            "straddled",
            "absorbed by a token that straddles regions 2-3: 'stirred ,' begins in region 2",
            "2-3",
        ),
        None,
    ]


# --- pages ----------------------------------------------------------------------------------


@needs_trigram
def test_the_trigram_says_why_the_comma_has_no_value(client) -> None:
    """The example NP-Z suite scored by the real trigram: every comma region is missing,
    because the trigram has no comma; the item page, the API and the result page say so."""
    call_command("import_suites", str(EXAMPLES / "garden_path_npz.json"), stdout=io.StringIO())
    suite = Suite.objects.get()
    model = LanguageModel.objects.create(
        name="cmu", display_name="CMU", source=str(CMU_TRIGRAM), kind="ngram"
    )
    evaluation = running_evaluation(model, suite)
    payload = {
        "model": {"source": str(CMU_TRIGRAM)},
        "sentences": [r for _i, _c, r in formats.sentences(evaluation.snapshot)],
    }
    store_sentences(evaluation, worker.run_scoring(payload)["sentences"])

    html = client.get(f"/evaluations/{evaluation.pk}/items/1/").content.decode()
    comma = _boxes(html, "ambig_comma")[2]
    assert comma == f"3 Comma , — missing {UNCOVERED_COMMA}"
    assert 'data-missing="uncovered"' in html
    # The no-comma condition's empty region is not missing: nothing to say.
    assert _boxes(html, "ambig_nocomma")[2] == "3 Comma (empty) 0.00"

    data = client.get(f"/api/evaluations/{evaluation.pk}/items/1/").json()
    regions = {c["condition_name"]: c["regions"] for c in data["conditions"]}
    assert regions["ambig_comma"][2]["missing"] == {"reason": "uncovered", "text": UNCOVERED_COMMA}
    assert regions["ambig_nocomma"][2]["missing"] is None
    assert regions["ambig_comma"][0]["missing"] is None

    page = client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert "Missing region values: 20 , by reason" in _text(page)
    assert _reasons_list(page) == ["20 regions: no token of the model covers them — ',' (20)"]
    assert f'title="missing: {UNCOVERED_COMMA.replace(chr(39), "&#x27;")}"' in page


def test_a_swallowed_region_is_counted_apart(client) -> None:
    texts = ["▁As", "▁the", "▁chef", "▁stirred▁,", "▁the", "▁soup", "▁boiled", "▁over", "▁onto",
             "▁the", "▁stove", "."]  # fmt: skip
    offsets = [(0, 2), (3, 6), (7, 11), (12, 21), (22, 25), (26, 30), (31, 37), (38, 42),
               (43, 47), (48, 51), (52, 57), (57, 58)]  # fmt: skip
    tokens = {
        "comma": _packed(texts, offsets),
        "nocomma": _packed(
            ["▁As", "▁the", "▁chef", "▁stirred", *texts[4:]],
            [*offsets[:3], (12, 19), *offsets[4:]],
            shift=2,
        ),
    }
    evaluation = stored_with("swallowed", "causal", tokens)
    html = client.get(f"/evaluations/{evaluation.pk}/items/1/").content.decode()
    assert _boxes(html, "comma")[1:3] == [
        "2 Verb stirred , 1.00",
        "3 Comma , — missing absorbed by a token that straddles regions 2-3: "
        "'stirred ,' begins in region 2",
    ]
    page = client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert _reasons_list(page) == [
        "1 region: absorbed by a token that straddles a region boundary — regions 2-3 (1)"
    ]


def test_results_stored_before_tokens_were_kept_say_the_reason_is_unknown(client) -> None:
    evaluation = _evaluation("before tokens", "causal")
    sentences: list[dict[str, Any]] = []
    for _n, _condition, regions in formats.sentences(evaluation.snapshot):
        values: list[dict[str, float | None]] = [
            {"sum": None, "mean": None} if r == "," else {"sum": 1.0, "mean": 1.0} for r in regions
        ]
        sentences.append({"regions": values, "sentence": {"sum": 5.0, "mean": 1.0}})
    store_sentences(evaluation, sentences)
    assert evaluation.item_results.get().tokens is None
    html = client.get(f"/evaluations/{evaluation.pk}/items/1/").content.decode()
    assert _boxes(html, "comma")[2] == (
        "3 Comma , — missing reason unknown: this evaluation was scored before Gym kept tokens"
    )
    page = client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert _reasons_list(page) == ["1 region: reason unknown: scored before Gym kept tokens"]


def test_a_result_page_without_missing_values_says_nothing_about_them(client) -> None:
    texts = ["▁As", "▁the", "▁chef", "▁stirred", "▁,", "▁the", "▁soup", "▁boiled", "▁over",
             "▁onto", "▁the", "▁stove", "."]  # fmt: skip
    offsets = [(0, 2), (3, 6), (7, 11), (12, 19), (20, 21), (22, 25), (26, 30), (31, 37),
               (38, 42), (43, 47), (48, 51), (52, 57), (57, 58)]  # fmt: skip
    tokens = {
        "comma": _packed(texts, offsets),
        "nocomma": _packed(texts[:4] + texts[5:], offsets[:4] + offsets[5:], shift=2),
    }
    evaluation = stored_with("complete", "causal", tokens)
    page = client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert "data-missing-reasons" not in page
    html = client.get(f"/evaluations/{evaluation.pk}/items/1/").content.decode()
    assert "data-missing=" not in html and "— missing" not in html
    assert _boxes(html, "comma")[2] == "3 Comma , 1.00"
