"""The item page shows each region's text as it was written, whatever the tokenizer:
the sentence's own characters, token by token, with the spaces between tokens taken from
the sentence (issue 29: the trigram's words ran together, "Asthechef").

Each tokenizer style is scored for real (the tiny models of tests/tiny_models.py and the
CMU trigram), and some hand-built token arrays cover the cases a tiny tokenizer may not
produce (a lone "▁", bytes of one character sharing offsets, a piece across regions)."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from evaluations import baseline
from evaluations.models import Evaluation, LanguageModel
from evaluations.scoring import worker
from evaluations.scoring.alignment import align_tokens, build_sentence
from evaluations.scoring.metrics import region_metrics
from suites import formats
from suites.syntaxgym import services as suite_services
from tests.conftest import running_evaluation, store_sentences

pytestmark = pytest.mark.django_db

REGIONS = ["As the chef", "stirred", ",", "the soup", "boiled", "over onto the stove."]


def npz_suite(name: str) -> dict[str, Any]:
    def condition(condition_name: str, contents: list[str]) -> dict[str, Any]:
        return {
            "condition_name": condition_name,
            "regions": [{"region_number": i + 1, "content": c} for i, c in enumerate(contents)],
        }

    return {
        "meta": {"name": name, "metric": "sum"},
        "region_meta": {
            str(i + 1): n for i, n in enumerate(["Start", "Verb", "Comma", "NP", "Main", "End"])
        },
        "predictions": [{"type": "formula", "formula": "(5;%nocomma%) > (5;%comma%)"}],
        "items": [
            {
                "item_number": 1,
                "conditions": [
                    condition("comma", REGIONS),
                    condition("nocomma", [c if c != "," else "" for c in REGIONS]),
                ],
            }
        ],
    }


def _evaluation(name: str, kind: str, source: str = "hub/x") -> Evaluation:
    suite = suite_services.suite_import(source=npz_suite(name), owner=None).suite
    model, _ = LanguageModel.objects.get_or_create(
        name=name.replace(" ", "-"), defaults={"display_name": name, "source": source, "kind": kind}
    )
    return running_evaluation(model, suite)


def scored_by(name: str, kind: str, source: str) -> Evaluation:
    """The NP-Z item scored by the real model at `source` through the worker."""
    evaluation = _evaluation(name, kind, source)
    payload = {
        "model": {"source": source},
        "sentences": [r for _i, _c, r in formats.sentences(evaluation.snapshot)],
    }
    return store_sentences(evaluation, worker.run_scoring(payload)["sentences"])


def stored_with(name: str, kind: str, tokens: dict[str, dict[str, list[Any]]]) -> Evaluation:
    """The NP-Z item stored with hand-built packed tokens per condition; region values
    as the engine sums them (each token in the region of its first non-space character)."""
    evaluation = _evaluation(name, kind)
    sentences = []
    for _n, condition, regions in formats.sentences(evaluation.snapshot):
        packed = tokens[condition]
        text, spans = build_sentence(regions)
        owners, _ = align_tokens(
            text, spans, list(zip(packed["start"], packed["end"], strict=True))
        )
        by_region: list[list[float | None]] = [[] for _ in spans]
        for owner, surprisal in zip(owners, packed["surp"], strict=True):
            if owner is not None:
                by_region[owner].append(surprisal)
        sentences.append(
            {
                "regions": [
                    region_metrics(values)
                    if values or end == start
                    else dict.fromkeys(region_metrics([1.0]))
                    for values, (start, end) in zip(by_region, spans, strict=True)
                ],
                "sentence": region_metrics(list(packed["surp"])),
                "tokens": packed,
            }
        )
    return store_sentences(evaluation, sentences)


def region_texts(html: str, condition: str) -> list[str]:
    """Each region box's words exactly as the browser gets their characters (tags
    removed, nothing collapsed)."""
    part = html.split(f'data-condition="{condition}"')[1].split("</article>")[0]
    texts = []
    for chunk in part.split('class="region-words">')[1:]:
        words = chunk.split('<span class="region-val">')[0].rstrip()
        assert words.endswith("</span>")
        texts.append(unescape(re.sub(r"<[^>]+>", "", words[: -len("</span>")])))
    return texts


def _page(client, evaluation: Evaluation) -> str:
    response = client.get(f"/evaluations/{evaluation.pk}/items/1/")
    assert response.status_code == 200
    return response.content.decode()


CMU_TRIGRAM = baseline.cmu_trigram_path()


@pytest.mark.skipif(CMU_TRIGRAM is None, reason="pocketsphinx is not installed")
def test_word_level_tokens_of_the_trigram_read_as_written(client) -> None:
    evaluation = scored_by("trigram", "ngram", str(CMU_TRIGRAM))
    html = _page(client, evaluation)
    # The trigram drops the comma: its region shows its content, with no token.
    assert region_texts(html, "comma") == REGIONS
    assert region_texts(html, "nocomma") == [*REGIONS[:2], "(empty)", *REGIONS[3:]]
    assert "Asthechef" not in html and "overontothestove" not in html
    # The words are lowercase to the model; the page shows the sentence's own letters.
    assert re.search(r'<span class="tok( share-[0-9]+)?"[^>]*>As</span>', html)


def test_byte_level_bpe_reads_as_written(client, tiny_gpt2: Path) -> None:  # noqa: F811
    html = _page(client, scored_by("gpt2", "causal", str(tiny_gpt2)))
    assert region_texts(html, "comma") == REGIONS
    assert "Ġ" not in html


def test_sentencepiece_reads_as_written(client, tiny_llama: Path) -> None:  # noqa: F811
    html = _page(client, scored_by("llama", "causal", str(tiny_llama)))
    assert region_texts(html, "comma") == REGIONS
    assert "▁" not in html.split('class="token-details"')[0]


def test_wordpiece_reads_as_written(client, tiny_bert: Path) -> None:  # noqa: F811
    html = _page(client, scored_by("bert", "masked", str(tiny_bert)))
    # A lower-casing tokenizer: the page still shows the sentence's capital letters.
    assert region_texts(html, "comma") == REGIONS
    assert "##" not in html.split('class="token-details"')[0]


# Hand-built arrays, as each tokenizer writes them, for the sentence
# "As the chef stirred , the soup boiled over onto the stove." (comma condition).
#  0         1         2         3         4         5
#  0123456789012345678901234567890123456789012345678901234567
STYLES: dict[str, tuple[list[str], list[tuple[int, int]]]] = {
    # GPT-2: offsets keep the space before a word; "stove" in two pieces.
    "bpe": (
        ["As", "Ġthe", "Ġchef", "Ġstirred", "Ġ,", "Ġthe", "Ġsoup", "Ġboiled", "Ġover", "Ġonto",
         "Ġthe", "Ġst", "ove", "."],
        [(0, 2), (2, 6), (6, 11), (11, 19), (19, 21), (21, 25), (25, 30), (30, 37), (37, 42),
         (42, 47), (47, 51), (51, 54), (54, 57), (57, 58)],
    ),
    # SentencePiece: a lone "▁" before a piece it could not merge with, "▁the" without
    # its space in the offsets.
    "sentencepiece": (
        ["▁As", "▁the", "▁chef", "▁stir", "red", "▁", ",", "▁the", "▁soup", "▁boil", "ed",
         "▁over", "▁onto", "▁the", "▁stove", "."],
        [(0, 2), (3, 6), (7, 11), (12, 16), (16, 19), (19, 20), (20, 21), (22, 25), (26, 30),
         (31, 35), (35, 37), (38, 42), (43, 47), (48, 51), (52, 57), (57, 58)],
    ),
    # WordPiece: lowercase pieces, "##" continuations, offsets without spaces.
    "wordpiece": (
        ["as", "the", "chef", "stir", "##red", ",", "the", "soup", "boil", "##ed", "over",
         "onto", "the", "st", "##ove", "."],
        [(0, 2), (3, 6), (7, 11), (12, 16), (16, 19), (20, 21), (22, 25), (26, 30), (31, 35),
         (35, 37), (38, 42), (43, 47), (48, 51), (52, 54), (54, 57), (57, 58)],
    ),
    # Word level (the n-gram model): lowercase words, no comma, "</s>" on the period.
    "words": (
        ["as", "the", "chef", "stirred", "the", "soup", "boiled", "over", "onto", "the",
         "stove", "</s>"],
        [(0, 2), (3, 6), (7, 11), (12, 19), (22, 25), (26, 30), (31, 37), (38, 42), (43, 47),
         (48, 51), (52, 57), (57, 58)],
    ),
}  # fmt: skip


def _packed(texts: list[str], offsets: list[tuple[int, int]], shift: int = 0) -> dict:
    """Packed arrays; `shift` moves offsets from the comma on (the nocomma sentence is
    two characters shorter: no " ,")."""
    starts = [s if s < 19 else s - shift for s, _e in offsets]
    ends = [e if e <= 19 else e - shift for _s, e in offsets]
    return {"text": texts, "start": starts, "end": ends, "surp": [1.0] * len(texts)}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_tokenizer_style_reads_as_written(client, style: str) -> None:
    texts, offsets = STYLES[style]
    sentence = " ".join(REGIONS)
    assert len(sentence) == 58
    comma = [i for i, t in enumerate(texts) if t.strip("Ġ▁") == ","]
    no_comma = [
        (t, o) for i, (t, o) in enumerate(zip(texts, offsets, strict=True)) if i not in comma
    ]
    if style == "sentencepiece":
        no_comma = [(t, o) for t, o in no_comma if t != "▁"]
    tokens = {
        "comma": _packed(texts, offsets),
        "nocomma": _packed([t for t, _o in no_comma], [o for _t, o in no_comma], shift=2),
    }
    kind = "ngram" if style == "words" else "causal"
    html = _page(client, stored_with(f"style {style}", kind, tokens))
    assert region_texts(html, "comma") == REGIONS
    assert region_texts(html, "nocomma") == [*REGIONS[:2], "(empty)", *REGIONS[3:]]


def test_a_piece_across_regions_is_shown_once_with_its_region(client) -> None:
    """A SentencePiece model trained without splitting at spaces: "the▁soup" covers two
    words of one region, "boiled▁over" the last word of region 5 and the first of region
    6. The piece shows in the region of its first character, and only there."""
    texts = ["▁As", "▁the", "▁chef", "▁stirred", "▁,", "▁the▁soup", "▁boiled▁over", "▁onto",
             "▁the", "▁stove", "."]  # fmt: skip
    offsets = [(0, 2), (3, 6), (7, 11), (12, 19), (20, 21), (22, 30), (31, 42), (43, 47),
               (48, 51), (52, 57), (57, 58)]  # fmt: skip
    tokens = {"comma": _packed(texts, offsets)}
    tokens["nocomma"] = _packed(
        [t for t in texts if t != "▁,"], [o for o in offsets if o != (20, 21)], shift=2
    )
    html = _page(client, stored_with("pieces across regions", "causal", tokens))
    assert region_texts(html, "comma") == [
        "As the chef",
        "stirred",
        ",",
        "the soup",
        "boiled over",
        "onto the stove.",
    ]


def test_bytes_of_one_character_show_it_once(client) -> None:
    """Byte-level BPE splits a character it has no token for into byte tokens that share
    its offsets: the page shows the character once, not once per byte."""
    regions = ["Zoë", "sang", "."]
    data = npz_suite("bytes")
    data["region_meta"] = {"1": "Subject", "2": "Verb", "3": "End"}
    data["predictions"] = []
    data["items"][0]["conditions"] = [
        {
            "condition_name": "only",
            "regions": [{"region_number": i + 1, "content": c} for i, c in enumerate(regions)],
        }
    ]
    suite = suite_services.suite_import(source=data, owner=None).suite
    model = LanguageModel.objects.create(name="bytes", display_name="Bytes", source="hub/b")
    evaluation = running_evaluation(model, suite)
    packed = {
        "text": ["Zo", "Ã", "«", "Ġsang", "."],
        "start": [0, 2, 2, 3, 8],
        "end": [2, 3, 3, 8, 9],
        "surp": [1.0, 2.0, 3.0, 4.0, 5.0],
    }
    sentence = {
        "regions": [region_metrics([1.0, 2.0, 3.0]), region_metrics([4.0]), region_metrics([5.0])],
        "sentence": region_metrics([1.0, 2.0, 3.0, 4.0, 5.0]),
        "tokens": packed,
    }
    store_sentences(evaluation, [sentence])
    html = _page(client, evaluation)
    assert region_texts(html, "only") == ["Zoë", "sang", "."]
