"""Word probabilities done right: region sums corrected for the word boundary.

Checked against the full softmax computed here by hand with the tiny models, for a
tokenizer that marks word starts without marking the first word (GPT-2 "Ġ"), one that
marks every word (SentencePiece "▁"), and one that marks none (WordPiece).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from evaluations.scoring import applied_word_probability, score_sentences
from evaluations.scoring.alignment import align_tokens, build_sentence
from evaluations.scoring.boundary import word_boundary
from evaluations.scoring.worker import run_scoring
from tests.conftest import known, neural_model

LN2 = math.log(2.0)
TOL = 1e-3  # bits: float32 on both sides, different batch shapes

SENTENCES = [
    ["The author", "that the senators", "admired", "laughed", "."],
    ["The captain", "feared", "the storm"],
    ["Antidisestablishmentarianism", "is", "unusually long"],
    ["The author", "", "laughed", "."],  # an empty region
]


def hand_region_sums(source: Path, regions: list[str]) -> tuple[list[float], list[float]]:
    """(plain sums, corrected sums) of the regions, from the full softmax over the
    vocabulary at every position, written out here without the engine."""
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source).eval()
    text, spans = build_sentence(regions)
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = encoding["input_ids"]
    bos = tokenizer.bos_token_id
    with torch.no_grad():
        logits = model(torch.tensor([[bos, *ids]])).logits[0].double()
    log_p = torch.log_softmax(logits, dim=-1)  # row t predicts content token t
    names = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    marker = "Ġ" if any(name.startswith("Ġ") for name in names) else "▁"
    begins = [i for i, name in enumerate(names) if name.startswith(marker)]
    begins.append(tokenizer.eos_token_id)
    log_b = [float(torch.logsumexp(log_p[t, begins], dim=0)) / LN2 for t in range(len(ids) + 1)]
    first_marked = tokenizer.convert_ids_to_tokens(ids[:1])[0].startswith(marker)
    if not first_marked:
        log_b[0] = 0.0
    surprisal = [-float(log_p[t, token]) / LN2 for t, token in enumerate(ids)]
    owners, _ = align_tokens(text, spans, [tuple(pair) for pair in encoding["offset_mapping"]])
    plain: list[float] = []
    corrected: list[float] = []
    for region in range(len(regions)):
        positions = [t for t, owner in enumerate(owners) if owner == region]
        total = math.fsum(surprisal[t] for t in positions)
        plain.append(total)
        if positions:
            total += log_b[positions[0]] - log_b[positions[-1] + 1]
        corrected.append(total)
    return plain, corrected


@pytest.mark.parametrize("fixture", ["tiny_gpt2", "tiny_llama"])
@pytest.mark.parametrize("prefix_sharing", [True, False])
def test_corrected_sums_match_the_hand_computation(
    fixture: str, prefix_sharing: bool, request: pytest.FixtureRequest
) -> None:
    source = request.getfixturevalue(fixture)
    model = neural_model(str(source))
    scored = score_sentences(
        model, SENTENCES, word_probability="corrected", prefix_sharing=prefix_sharing
    )
    changed = 0
    for regions, sentence in zip(SENTENCES, scored, strict=True):
        plain, corrected = hand_region_sums(source, regions)
        assert sentence.log_boundary is not None
        assert len(sentence.log_boundary) == len(sentence.tokens) + 1
        for region, want, unchanged in zip(sentence.regions, corrected, plain, strict=True):
            assert abs(known(region.metrics["sum"]) - want) <= TOL
            assert type(region.metrics["sum"]) is float  # JSON-ready, not numpy
            changed += abs(want - unchanged) > TOL
    assert changed > 0  # the correction does something on these sentences


def test_first_word_convention_follows_the_tokenizer(
    tiny_gpt2: Path,  # noqa: F811
    tiny_llama: Path,  # noqa: F811
) -> None:
    gpt2 = word_boundary(AutoTokenizer.from_pretrained(tiny_gpt2))
    llama = word_boundary(AutoTokenizer.from_pretrained(tiny_llama))
    assert (gpt2.marker, gpt2.first_word_marked) == ("Ġ", False)
    assert (llama.marker, llama.first_word_marked) == ("▁", True)
    # The end-of-sequence token counts as a boundary (the sentence may end there).
    assert gpt2.eos_token_id in gpt2.ids and llama.eos_token_id in llama.ids
    scored = score_sentences(
        neural_model(str(tiny_gpt2)), [["The captain", "feared"]], word_probability="corrected"
    )
    assert scored[0].log_boundary is not None and scored[0].log_boundary[0] == 0.0


@pytest.mark.parametrize("fixture", ["tiny_gpt2", "tiny_llama", "tiny_bert"])
def test_off_by_default_and_only_sum_changes(fixture: str, request: pytest.FixtureRequest) -> None:
    model = neural_model(str(request.getfixturevalue(fixture)))
    default = score_sentences(model, SENTENCES)
    tokens = score_sentences(model, SENTENCES, word_probability="tokens")
    corrected = score_sentences(model, SENTENCES, word_probability="corrected")
    for a, b, c in zip(default, tokens, corrected, strict=True):
        # Off is the old computation exactly, with nothing extra in the result.
        assert a == b and a.log_boundary is None
        assert [t.surprisal for t in c.tokens] == pytest.approx(
            [t.surprisal for t in a.tokens], abs=1e-4
        )
        for old, new in zip(a.regions, c.regions, strict=True):
            for metric, value in old.metrics.items():
                if metric != "sum" and value is not None:
                    assert new.metrics[metric] == pytest.approx(value, abs=1e-4)
    if fixture == "tiny_bert":
        # A masked LM (WordPiece marks continuations, not starts): values unchanged.
        assert applied_word_probability(model)[0] == "tokens"
        assert all(c.log_boundary is None for c in corrected)
        assert [r.metrics for s in corrected for r in s.regions] == [
            r.metrics for s in default for r in s.regions
        ]


def test_a_tokenizer_without_word_start_markers_is_left_alone(
    tiny_bert: Path,  # noqa: F811
) -> None:
    found = word_boundary(AutoTokenizer.from_pretrained(tiny_bert))
    assert not found.applies and found.marker is None
    assert "marks no word starts" in found.reason


def test_the_worker_names_the_option_only_when_asked(tiny_gpt2: Path) -> None:  # noqa: F811
    payload = {"model": {"source": str(tiny_gpt2)}, "sentences": SENTENCES}
    plain = run_scoring(payload)
    corrected = run_scoring({**payload, "word_probability": "corrected"})
    assert "word_probability" not in plain["diagnostics"]
    assert corrected["diagnostics"]["word_probability"] == "corrected"
    assert "word-initial tokens" in corrected["diagnostics"]["word_boundary"]
    # The sentence sum (what `(*;%cond%)` reads) telescopes: the regions' corrected sums
    # add up to it.
    for sentence in corrected["sentences"]:
        sums = [region["sum"] for region in sentence["regions"]]
        assert math.fsum(known(v) for v in sums) == pytest.approx(
            known(sentence["sentence"]["sum"]), abs=1e-6
        )
    first = plain["sentences"][0]["sentence"]["sum"]
    assert corrected["sentences"][0]["sentence"]["sum"] != pytest.approx(first, abs=TOL)


def test_texts_longer_than_the_context_get_every_boundary(tiny_gpt2: Path) -> None:  # noqa: F811
    model = neural_model(str(tiny_gpt2))
    words = "the author that the senators admired laughed and".split()
    regions = [" ".join(words[i % len(words)] for i in range(k, k + 4)) for k in range(0, 96, 4)]
    plain, corrected = (
        score_sentences(model, [regions], word_probability=mode)[0]
        for mode in ("tokens", "corrected")
    )
    assert plain.diagnostics["truncated"] and corrected.diagnostics == plain.diagnostics
    marks = corrected.log_boundary
    assert marks is not None and len(marks) == len(corrected.tokens) + 1
    assert all(mark is not None and mark <= 0.0 for mark in marks)
    # Every region has a value, and the corrections telescope over the sentence.
    sums = [known(region.metrics["sum"]) for region in corrected.regions]
    tokens = math.fsum(known(token.surprisal) for token in corrected.tokens)
    assert math.fsum(sums) == pytest.approx(tokens - known(marks[-1]) + known(marks[0]), abs=1e-6)
