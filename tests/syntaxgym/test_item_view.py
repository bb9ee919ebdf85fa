"""One item of one evaluation: token surprisals stored with the results (per item and
condition, packed by evaluations.token_data), the item page (regions, values, outcomes
with the values compared, tokens) and the item API. Results go through the real store
service; the worker test runs a tiny model on a real Celery worker."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import pytest

from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, ItemResult, LanguageModel
from evaluations.scoring.alignment import align_tokens, build_sentence
from evaluations.scoring.metrics import region_metrics
from evaluations.syntaxgym import services
from evaluations.token_data import unpack_tokens
from suites import formats
from suites.formats import predictions
from suites.syntaxgym import selectors as suite_selectors
from suites.syntaxgym import services as suite_services
from tests.celery_harness import wait_finished
from tests.conftest import (
    known,
    known_int,
    running_evaluation,
    search,
    store_sentences,
    suite_document,
)
from tests.runs.test_run_packing import received

pytestmark = pytest.mark.django_db

# Per item and condition, per region: (word, surprisal in bits) tokens. None: missing.
#   P1 (verb): mismatch > match   P2 (whole sentence): mismatch > match
WORDS: dict[int, dict[str, list[list[tuple[str, float | None]]]]] = {
    1: {  # P1 yes, P2 yes: passes
        "match": [[("The", 2.0), ("dog", 3.0)], [("is", 1.0)], [("here", 4.0), (".", 0.5)]],
        "mismatch": [[("The", 2.0), ("dog", 3.0)], [("are", 7.0)], [("here", 4.0), (".", 0.5)]],
    },
    2: {  # P1 no, P2 yes: fails
        "match": [[("The", 2.0), ("cat", 3.0)], [("is", 6.0)], [("here", 4.0), (".", 0.5)]],
        "mismatch": [[("The", 2.0), ("cat", 3.0)], [("are", 5.0)], [("here", 6.0), (".", 0.5)]],
    },
    3: {  # the mismatch verb has no value: not evaluable
        "match": [[("The", 2.0), ("cow", 3.0)], [("is", 1.0)], [("here", 4.0), (".", 0.5)]],
        "mismatch": [[("The", 2.0), ("cow", 3.0)], [("are", None)], [("here", 4.0), (".", 0.5)]],
    },
}


def suite_data(name: str = "items with tokens", words: dict | None = None) -> dict[str, Any]:
    """A suite whose regions are the words of `words` (WORDS) joined."""
    items = {
        n: {
            condition: [" ".join(w for w, _s in r).replace(" .", ".") for r in regions]
            for condition, regions in conditions.items()
        }
        for n, conditions in (words or WORDS).items()
    }
    formulas = ["(2;%mismatch%) > (2;%match%)", "(*;%mismatch%) > (*;%match%)"]
    return suite_document(name, items, formulas)


def worker_result(regions: list[str], words: list[list[tuple[str, float | None]]]) -> dict:
    """What a GPU worker sends for one sentence whose tokens are `words` (GPT-2 style:
    a word after a space is spelled with "Ġ" and its offsets hold the space)."""
    text, spans = build_sentence(regions)
    packed: dict[str, list[Any]] = {"text": [], "start": [], "end": [], "surp": []}
    for (start, end), region_words in zip(spans, words, strict=True):
        position = start
        for word, surprisal in region_words:
            found = text.index(word, position)
            spaced = found > 0 and text[found - 1] == " "
            packed["text"].append(("Ġ" if spaced else "") + word)
            packed["start"].append(found - 1 if spaced else found)
            packed["end"].append(found + len(word))
            packed["surp"].append(surprisal)
            position = found + len(word)
        assert position <= end
    return {
        "regions": [region_metrics([s for _w, s in r]) for r in words],
        "sentence": region_metrics([s for r in words for _w, s in r]),
        "tokens": packed,
    }


def store(
    suite_dict: dict[str, Any], *, tokens: bool = True, words: dict | None = None
) -> Evaluation:
    """A suite evaluated by a fake model whose tokens are `words` (WORDS), stored by the real store
    service (as the store task does). tokens=False: as an older worker sent results."""
    suite = suite_services.suite_import(source=suite_dict, owner=None).suite
    model, _ = LanguageModel.objects.get_or_create(
        name="tiny-lm", defaults={"display_name": "Tiny LM", "source": "hub/tiny"}
    )
    evaluation = running_evaluation(model, suite)
    sentences = []
    for item_number, condition, regions in formats.sentences(evaluation.snapshot):
        result = worker_result(regions, (words or WORDS)[item_number][condition])
        if not tokens:
            del result["tokens"]
        sentences.append(result)
    return store_sentences(evaluation, sentences)


@pytest.fixture
def evaluation() -> Evaluation:
    return store(suite_data())


def test_store_keeps_each_conditions_packed_tokens(evaluation) -> None:
    row = ItemResult.objects.get(evaluation=evaluation, item_number=1)
    assert row.tokens is not None
    assert set(row.tokens) == {"match", "mismatch"}
    assert row.tokens["mismatch"] == {
        "text": ["The", "Ġdog", "Ġare", "Ġhere", "."],
        "start": [0, 3, 7, 11, 16],
        "end": [3, 7, 11, 16, 17],
        "surp": [2.0, 3.0, 7.0, 4.0, 0.5],
    }
    missing = ItemResult.objects.get(evaluation=evaluation, item_number=3)
    assert missing.tokens is not None and missing.tokens["mismatch"]["surp"][2] is None


def test_store_refuses_tokens_that_are_not_packed_tokens() -> None:
    suite = suite_services.suite_import(source=suite_data("bad tokens"), owner=None).suite
    model = LanguageModel.objects.create(name="m", display_name="M", source="hub/m")
    snapshot = suite_selectors.suite_canonical(suite)
    evaluation = services.evaluation_create(
        model=model, suite=suite, content_hash=suite.content_hash, snapshot=snapshot
    )
    sentences = [
        worker_result(regions, WORDS[n][c]) for n, c, regions in formats.sentences(snapshot)
    ]
    sentences[3]["tokens"]["surp"].pop()
    stored = services.results_store(
        evaluation_id=evaluation.pk, attempt=1, results={"sentences": sentences}
    )
    evaluation.refresh_from_db()
    assert stored is False
    assert evaluation.status == "failed"
    assert "condition 'mismatch'" in evaluation.error and "differ in length" in evaluation.error
    assert not ItemResult.objects.filter(evaluation=evaluation).exists()


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", "", html)).split())


def test_item_page_shows_regions_values_outcomes_and_tokens(client, evaluation) -> None:
    response = client.get(f"/evaluations/{evaluation.pk}/items/2/")
    assert response.status_code == 200
    html = response.content.decode()
    text = _text(html)
    assert "Item 2 ✗ fail" in text
    # Regions with their numbers, names and values, per condition.
    mismatch = html.split('data-condition="mismatch"')[1]
    boxes = re.findall(r'data-region="(\d)">(.*?)</div>', mismatch, re.S)
    assert [(n, _text(box)) for n, box in boxes] == [
        ("1", "1 Subject The cat 5.00"),
        ("2", "2 Verb are 5.00"),
        ("3", "3 End here. 6.50"),
    ]
    # Each prediction's outcome and the two values it compared.
    rows = re.findall(r'<tr data-prediction="(\d)">(.*?)</tr>', html, re.S)
    first, second = (_text(row) for _n, row in rows)
    assert "✗ fail" in first and first.endswith("5.00 > 6.00")
    assert "✓ pass" in second and second.endswith("16.50 > 15.50")
    # Tokens: their characters (no Ġ mark), offsets and bits on hover and in the table.
    assert 'title="“ are” · characters 7–11 · 5.00 bits"' in html and "Ġ" not in html
    # In the region strip, the joining space before a region is no region's own.
    assert re.search(r'<span class="tok( share-[0-9]+)?"[^>]*>are</span>', mismatch)
    table = mismatch.split('class="table token-table"')[1].split("</table>")[0]
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", table)]
    assert [_text(cell) for cell in rows[3]] == ["3", "are", "7–11", "2 Verb", "5.000"]
    assert '<span class="tok-text"> are</span>' in rows[3][1]
    assert "not stored" not in text


def test_missing_values_show_as_missing_and_the_prediction_as_not_evaluable(
    client, evaluation
) -> None:
    html = client.get(f"/evaluations/{evaluation.pk}/items/3/").content.decode()
    mismatch = html.split('data-condition="mismatch"')[1]
    verb = search(r'data-region="2">(.*?)</div>', mismatch, re.S).group(1)
    assert _text(verb) == "2 Verb are — missing its token 'are' has no surprisal"
    first = _text(search(r'<tr data-prediction="0">(.*?)</tr>', html, re.S).group(1))
    assert "– n/a" in first and first.endswith("missing > 1.00")


def test_previous_next_and_next_failing_links(client, evaluation) -> None:
    html = client.get(f"/evaluations/{evaluation.pk}/items/1/").content.decode()
    base = f"/evaluations/{evaluation.pk}/items"
    assert f'rel="next" href="{base}/2/"' in html and 'rel="prev"' not in html
    assert f'href="{base}/2/" data-next-failing' in html
    last = client.get(f"{base}/3/").content.decode()
    assert f'rel="prev" href="{base}/2/"' in last and 'rel="next"' not in last


def test_result_page_links_every_item_and_failing_items_say_why(client, evaluation) -> None:
    html = client.get(f"/evaluations/{evaluation.pk}/results/?items=failed").content.decode()
    base = f"/evaluations/{evaluation.pk}/items"
    assert re.findall(r'<a class="why small" href="([^"]+)" data-why>', html) == [f"{base}/2/"]
    everything = client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    for n in (1, 2, 3):
        assert f'href="{base}/{n}/" title="Item {n}: regions, tokens and outcomes"' in everything


def test_an_evaluation_stored_without_tokens_still_shows_its_items(client) -> None:
    old = store(suite_data("stored before tokens"), tokens=False)
    assert ItemResult.objects.filter(evaluation=old, tokens__isnull=True).count() == 3
    response = client.get(f"/evaluations/{old.pk}/items/1/")
    assert response.status_code == 200
    text = _text(response.content.decode())
    assert "Token surprisals were not stored for this evaluation: it was scored before Gym" in text
    assert "scored before Gym kept them. Region values are below." in text
    assert "1 Subject The dog 5.00" in text and "token-table" not in response.content.decode()
    data = client.get(f"/api/evaluations/{old.pk}/items/1/").json()
    assert data["tokens_stored"] is False
    assert [c["tokens"] for c in data["conditions"]] == [None, None]


def test_item_api_gives_token_arrays_per_condition(client, evaluation) -> None:
    data = client.get(f"/api/evaluations/{evaluation.pk}/items/1/").json()
    assert data["item_number"] == 1 and data["units"] == "bits" and data["passed"] is True
    assert [p["outcome"] for p in data["predictions"]] == [True, True]
    assert data["predictions"][0]["comparisons"] == [
        {
            "left": "(2;%mismatch%)",
            "op": ">",
            "right": "(2;%match%)",
            "left_value": 7.0,
            "right_value": 1.0,
        }
    ]
    match = data["conditions"][0]
    assert match["condition_name"] == "match" and match["sentence"] == "The dog is here."
    assert match["tokens"] == {
        "text": ["The", "Ġdog", "Ġis", "Ġhere", "."],
        "start": [0, 3, 7, 10, 15],
        "end": [3, 7, 10, 15, 16],
        "surp": [2.0, 3.0, 1.0, 4.0, 0.5],
        "region": [1, 1, 2, 3, 3],
    }
    assert match["regions"][1]["metric_value"]["sum"] == 1.0
    assert (data["previous"], data["next"]) == (None, 2)
    # The whole-results JSON stays as it was: no tokens in it.
    whole = client.get(f"/api/evaluations/{evaluation.pk}/results/").content.decode()
    assert "Ġdog" not in whole and '"tokens"' not in whole


@pytest.mark.parametrize(
    ("item", "status"),
    [
        *[(item, 404) for item in ["4", "0", "-1", "99999999999999999999", "1.0", "x"]],
        ("-99999999999999999999", 404),
        ("%00", 400),  # the request guard refuses a NUL anywhere in the address
    ],
)
def test_items_an_evaluation_does_not_have_are_not_found(client, evaluation, item, status) -> None:
    for prefix in ("", "/api"):
        response = client.get(f"{prefix}/evaluations/{evaluation.pk}/items/{item}/")
        assert response.status_code == status, (prefix, item, response.status_code)
    api = client.get(f"/api/evaluations/{evaluation.pk}/items/4/")
    assert api.status_code == 404 and api.json()["errors"][0]["message"]


def test_items_of_an_unfinished_or_unknown_evaluation_are_not_found(client, evaluation) -> None:
    Evaluation.objects.filter(pk=evaluation.pk).update(status="failed")
    assert client.get(f"/evaluations/{evaluation.pk}/items/1/").status_code == 404
    assert client.get(f"/api/evaluations/{evaluation.pk}/items/1/").status_code == 404
    assert client.get("/evaluations/99999999999999999999/items/1/").status_code == 404


def test_negative_item_numbers_have_pages(client) -> None:
    data = suite_data("negative items")
    data["items"][0]["item_number"] = -7
    negative = store(data, words={-7: WORDS[1], 2: WORDS[2], 3: WORDS[3]})
    response = client.get(f"/evaluations/{negative.pk}/items/-7/")
    assert response.status_code == 200 and "Item -7" in response.content.decode()
    assert f'rel="next" href="/evaluations/{negative.pk}/items/2/"' in response.content.decode()


def test_comparison_sides_give_each_comparisons_two_values() -> None:
    values: dict[tuple[int | None, str], float | None] = {
        (2, "a"): 5.0,
        (2, "b"): 3.0,
        (1, "a"): None,
    }
    node = predictions.parse("(2;%a%) > (2;%b%) & (1;%a%) + 1 < (2;%b%) / 0 + 1")
    sides = predictions.comparison_sides(node, lambda r, c: values[(r, c)])
    assert [(s.left_text, s.op, s.right_text, s.left, s.right) for s in sides] == [
        ("(2;%a%)", ">", "(2;%b%)", 5.0, 3.0),
        ("(1;%a%) + 1", "<", "(2;%b%) / 0 + 1", None, None),
    ]


# --- a real worker and a tiny model ----------------------------------------------------


def _region_sums_from_tokens(text: str, spans: list[tuple[int, int]], packed: dict) -> list:
    tokens = unpack_tokens(packed)
    offsets = [(known_int(t.start), known_int(t.end)) for t in tokens]
    owners, _ = align_tokens(text, spans, offsets)
    sums = [0.0] * len(spans)
    for token, owner in zip(tokens, owners, strict=True):
        assert owner is not None
        sums[owner] += known(token.surprisal)
    return sums


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_stores_tokens_that_add_up_to_the_region_sums(
    redis_broker, workers, tiny_gpt2, settings
) -> None:
    data = suite_data("scored by a real worker")
    # Stray spaces and a long word the tiny tokenizer cuts into pieces.
    data["items"][0]["conditions"][0]["regions"][0]["content"] = "  The dog "
    data["items"][1]["conditions"][1]["regions"][2]["content"] = "here antidisestablishment."
    suite = suite_services.suite_import(source=data, owner=None).suite
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    worker = workers()
    # A small token budget splits the suite into parts, each stored apart until the last
    # arrives: tokens must come through that path too.
    settings.GYM_PACK_TOKEN_BUDGET = 12
    evaluation = services.evaluation_request(model=model, suites=[suite]).evaluations[0]
    evaluation = wait_finished(Evaluation, evaluation.pk, what="the packed run", timeout=240)
    assert evaluation.status == "done", evaluation.error
    assert received(worker, "runs.work_pack") > 1
    rows = {r.item_number: r for r in ItemResult.objects.filter(evaluation=evaluation)}
    checked = 0
    for item_number, condition, regions in formats.sentences(evaluation.snapshot):
        text, spans = build_sentence(regions)
        kept = rows[item_number].tokens
        assert kept is not None
        packed = kept[condition]
        for token in unpack_tokens(packed):
            # Offsets slice the sentence to the token's characters (Ġ is the space).
            assert text[token.start : token.end] == token.text.replace("Ġ", " ")
            assert token.surprisal is not None and token.surprisal > 0
            assert round(token.surprisal, 4) == token.surprisal  # stored to 1e-4 bits
        sums = _region_sums_from_tokens(text, spans, packed)
        stored = rows[item_number].values[condition]["sum"]
        assert sums == pytest.approx(stored, abs=1e-3)
        checked += 1
    assert checked == 6
    long_word = rows[2].tokens
    assert long_word is not None
    assert len(json.dumps(long_word["mismatch"]["text"])) > 40  # the long word's pieces


def test_the_item_is_found_even_where_its_row_position_is_not_its_place_in_the_suite(
    client, evaluation
) -> None:
    """The page reads one item of the snapshot by the row's position; a row whose
    position points elsewhere still gets its own item."""
    ItemResult.objects.filter(evaluation=evaluation, item_number=1).update(position=7)
    html = client.get(f"/evaluations/{evaluation.pk}/items/1/").content.decode()
    boxes = re.findall(r'data-region="1">(.*?)</div>', html, re.S)
    assert _text(boxes[0]) == "1 Subject The dog 5.00"


def test_a_split_straddling_rule_is_explained_next_to_the_tokens(client, evaluation) -> None:
    assert (
        "data-split-rule"
        not in client.get(f"/evaluations/{evaluation.pk}/items/1/").content.decode()
    )
    Evaluation.objects.filter(pk=evaluation.pk).update(diagnostics={"straddling_rule": "split"})
    html = client.get(f"/evaluations/{evaluation.pk}/items/1/").content.decode()
    assert "data-split-rule" in html and "not the plain sum" in html
