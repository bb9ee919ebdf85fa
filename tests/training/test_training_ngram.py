"""n-gram training: interpolated modified Kneser-Ney, exact against a hand computation,
every history's distribution sums to 1, chunked counting equals counting at once, the
vocabulary cutoff, and the `train` command whose ARPA file `score` reads as is."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from evaluations.scoring.ngram import ArpaModel, load_ngram, read_arpa
from evaluations.training import ngram
from tests.conftest import EXAMPLES
from tests.training.conftest import sample_sentences


def bookcorpus(lines: int) -> list[str]:
    return sample_sentences("tree_depth")[:lines]


def trained(tmp_path: Path, lines: list[str], **options: Any) -> tuple[ArpaModel, str]:
    ngram.train_ngram(lines, tmp_path, **options)
    text = (tmp_path / ngram.ARPA_NAME).read_text(encoding="utf-8")
    return read_arpa(text.splitlines()), text


def p(model: ArpaModel, word: str, *history: str) -> float:
    return 10 ** model.log10_prob(word, tuple(history))


def test_bigram_equals_the_hand_computation(tmp_path) -> None:
    # Sentences: <s> a b </s> twice, <s> b </s> once.
    model, _text = trained(tmp_path, ["a b", "A b.", "b"], order=2)
    # Bigrams (the top order: adjusted = raw): <s> a 2, a b 2, b </s> 3, <s> b 1.
    # Counts of counts n1..n4 = 1, 2, 1, 0: Y = 1/(1 + 2*2) = 0.2,
    # D1 = 1 - 2*0.2*2/1 = 0.2, D2 = 2 - 3*0.2*1/2 = 1.7, D3+ = 3 - 4*0.2*0/1 = 3.
    # Unigrams (distinct words before): a 1 (<s>), b 2 (<s>, a), </s> 1 (b), <unk> 0.
    # Counts of counts 2, 1, 0, 0: Y = 2/(2 + 2) = 0.5, D1 = 1 - 2*0.5*1/2 = 0.5,
    # D2 = 2 - 3*0.5*0/1 = 2, D3+ = D2 (no count of 3) = 2.
    # Sum 4, discounted mass 0.5 + 0.5 + 2 = 3: gamma() = 3/4; uniform over 4 words.
    uniform = 3 / 4 * 1 / 4
    assert p(model, "a") == pytest.approx((1 - 0.5) / 4 + uniform, abs=1e-7)  # 0.3125
    assert p(model, "</s>") == pytest.approx((1 - 0.5) / 4 + uniform, abs=1e-7)
    assert p(model, "b") == pytest.approx((2 - 2) / 4 + uniform, abs=1e-7)  # 0.1875
    assert p(model, "<unk>") == pytest.approx(uniform, abs=1e-7)
    # After <s>: sum 3, mass D2 + D1 = 1.9.
    assert p(model, "a", "<s>") == pytest.approx((2 - 1.7) / 3 + 1.9 / 3 * 0.3125, abs=1e-7)
    assert p(model, "b", "<s>") == pytest.approx((1 - 0.2) / 3 + 1.9 / 3 * 0.1875, abs=1e-7)
    assert p(model, "</s>", "<s>") == pytest.approx(1.9 / 3 * 0.3125, abs=1e-7)
    # After a: sum 2, mass 1.7; after b: sum 3, mass D3+ = 3 (all of it backs off).
    assert p(model, "b", "a") == pytest.approx((2 - 1.7) / 2 + 1.7 / 2 * 0.1875, abs=1e-7)
    assert p(model, "a", "a") == pytest.approx(1.7 / 2 * 0.3125, abs=1e-7)
    assert p(model, "</s>", "b") == pytest.approx(0.3125, abs=1e-7)
    info = json.loads((tmp_path / ngram.INFO_NAME).read_text())
    assert info["discounts"] == {"1": [0.5, 2.0, 2.0], "2": [0.2, 1.7, 3.0]}
    assert info["ngrams"] == {"1": 5, "2": 4}
    assert (info["sentences"], info["words"], info["vocabulary"]) == (3, 8, 5)
    # <s> is a context, never predicted.
    assert model.probs[("<s>",)] == -99.0


@pytest.mark.parametrize("order", [3, 4])
def test_every_history_sums_to_one(tmp_path, order) -> None:
    model, _text = trained(tmp_path, bookcorpus(60), order=order, min_count=2)
    vocabulary = [key[0] for key in model.probs if len(key) == 1 and key[0] != "<s>"]
    histories = [key for key in model.probs if len(key) < order] + [(), ("never-seen",)]
    assert len(histories) > 300
    for history in histories:
        total = sum(p(model, word, *history) for word in vocabulary)
        assert total == pytest.approx(1.0, abs=2e-6), history


def test_chunked_counting_equals_counting_at_once(tmp_path, monkeypatch) -> None:
    lines = bookcorpus(200)
    _model, whole = trained(tmp_path / "whole", lines, order=5)
    monkeypatch.setattr(ngram, "CHUNK_TOKENS", 97)
    monkeypatch.setattr(ngram, "MERGE_KEYS", 300)
    _model, chunked = trained(tmp_path / "chunked", lines, order=5)
    assert chunked == whole


def test_vocabulary_cutoff(tmp_path) -> None:
    model, _text = trained(
        tmp_path, ["the dog runs", "the cat runs", "the emu"], order=2, min_count=2
    )
    assert sorted(key[0] for key in model.probs if len(key) == 1) == [
        "</s>",
        "<s>",
        "<unk>",
        "runs",
        "the",
    ]
    info = json.loads((tmp_path / ngram.INFO_NAME).read_text())
    assert info["unknown_types"] == 3  # dog, cat, emu
    # <unk> was seen after "the" three times: a bigram of its own.
    assert ("the", "<unk>") in model.probs


def test_bad_options(tmp_path) -> None:
    with pytest.raises(ngram.NgramTrainingError, match="the order must be from 2 to 6; got 7"):
        ngram.train_ngram(["a"], tmp_path, order=7)
    with pytest.raises(ngram.NgramTrainingError, match="cutoff must be 1 or more; got 0"):
        ngram.train_ngram(["a"], tmp_path, order=2, min_count=0)
    with pytest.raises(ngram.NgramTrainingError, match="the corpus has no sentences"):
        ngram.train_ngram([], tmp_path, order=2)
    assert list(tmp_path.iterdir()) == []


def test_train_command_then_score(tmp_path) -> None:
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("id\ttext\n" + "".join(f"{n}\t{s}\n" for n, s in enumerate(bookcorpus(400))))
    out = tmp_path / "model"
    stdout = io.StringIO()
    call_command(
        "train",
        "--corpus",
        str(corpus),
        "--kind",
        "ngram",
        "--order",
        "3",
        "--out",
        str(out),
        stdout=stdout,
    )
    # 400 lines, 1%: 4 held out.
    assert "396 sentences" in stdout.getvalue() and "4 lines held out" in stdout.getvalue()
    loaded = load_ngram(str(out / ngram.ARPA_NAME))
    assert loaded.order == 3 and loaded.has_unk
    results = tmp_path / "results.json"
    call_command(
        "score",
        "--model",
        str(out / ngram.ARPA_NAME),
        "--suite",
        str(EXAMPLES / "agreement_local.json"),
        "--out",
        str(results),
        stderr=io.StringIO(),
    )
    document = json.loads(results.read_text())
    assert document["results"]["accuracy"] is not None
    with pytest.raises(CommandError, match="the order must be from 2 to 6; got 9"):
        call_command(
            "train", "--corpus", str(corpus), "--kind", "ngram", "--order", "9", "--out", str(out)
        )
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nnot \xff utf-8\n")
    with pytest.raises(CommandError, match=r"bad.txt, line 2: not UTF-8"):
        call_command("train", "--corpus", str(bad), "--kind", "ngram", "--out", str(out))


def test_words_are_the_scorers_words() -> None:
    from evaluations.scoring.ngram import segment

    lines = bookcorpus(710) + ["Don’t stop-it, O'Brien!", "“Quoted” (words) ... 3.5 ² x"]
    for line in lines:
        expected = [w.text for w in segment(line, lambda _w: True) if w.text != "</s>"]
        assert ngram.words_of(line) == expected, line


# --- held-out perplexity and the discounts' fallbacks (issue 46, defect 7) ----------------


def test_heldout_perplexity_of_the_hand_computed_bigram(tmp_path) -> None:
    """The bigram above, on the held-out line "a b" (and "zz b", whose zz is <unk>)."""
    summary = ngram.train_ngram(["a b", "A b.", "b"], tmp_path, order=2, heldout=["a b", "zz b"])
    a_s = (2 - 1.7) / 3 + 1.9 / 3 * 0.3125  # p(a | <s>)
    b_a = (2 - 1.7) / 2 + 1.7 / 2 * 0.1875  # p(b | a)
    unk_s = 1.9 / 3 * (3 / 4 * 1 / 4)  # p(<unk> | <s>): <s> <unk> unseen, <unk> unseen
    b_unk = 0.1875  # <unk> is no context: its weight is 1
    end_b = 0.3125  # p(</s> | b)
    bigram = (a_s * b_a * end_b * unk_s * b_unk * end_b) ** (-1 / 6)
    unigram = (0.3125 * 0.1875 * 0.3125 * (3 / 16) * 0.1875 * 0.3125) ** (-1 / 6)
    assert summary.heldout is not None
    assert summary.heldout["perplexity"] == pytest.approx(bigram, abs=1e-4)
    assert summary.heldout["by_order"] == {
        "1": pytest.approx(unigram, abs=1e-4),
        "2": pytest.approx(bigram, abs=1e-4),
    }
    assert (summary.heldout["sentences"], summary.heldout["words"], summary.heldout["oov"]) == (
        2,
        6,
        1,
    )
    info = json.loads((tmp_path / ngram.INFO_NAME).read_text())
    assert info["heldout"]["perplexity"] == summary.heldout["perplexity"]


@pytest.mark.parametrize("order", [2, 3, 5])
def test_heldout_perplexity_equals_the_arpa_files(tmp_path, order) -> None:
    """Against the scorer's own reading of the written ARPA file (back-off rule), cut to
    each order by shortening the history, on held-out lines with unseen words."""
    lines = bookcorpus(600)
    held = sample_sentences("past_present")[:60]
    summary = ngram.train_ngram(lines, tmp_path, order=order, min_count=2, heldout=held)
    model = read_arpa((tmp_path / ngram.ARPA_NAME).read_text(encoding="utf-8").splitlines())
    known = {w for (w,) in (key for key in model.probs if len(key) == 1)}
    assert summary.heldout is not None
    for k in range(1, order + 1):
        total, count = 0.0, 0
        for line in held:
            words = [w if w in known else "<unk>" for w in ngram.words_of(line)] + ["</s>"]
            history = ["<s>"]
            for word in words:
                total += model.log10_prob(word, tuple(history[-(k - 1) :] if k > 1 else ()))
                history.append(word)
                count += 1
        expected = 10 ** (-total / count)
        assert summary.heldout["by_order"][str(k)] == pytest.approx(expected, rel=1e-5), k
    assert summary.heldout["oov"] > 0
    # More context helps on this text.
    assert summary.heldout["by_order"]["1"] > summary.heldout["by_order"]["2"]


def test_discount_fallbacks_are_said(tmp_path) -> None:
    """The bigram above: no unigram has an adjusted count of 3, so its D3+ is D2."""
    summary = ngram.train_ngram(["a b", "A b.", "b"], tmp_path, order=2)
    info = json.loads((tmp_path / ngram.INFO_NAME).read_text())
    assert (
        info["discount_notes"]
        == summary.discount_notes
        == ["order 1: D3+: no n-gram has an adjusted count of 3 (n3 = 0), so D3+ = D2 (2)"]
    )
    ngram.train_ngram(bookcorpus(700), tmp_path, order=2)
    assert json.loads((tmp_path / ngram.INFO_NAME).read_text())["discount_notes"] == []


def test_the_command_reports_the_heldout_perplexity(tmp_path) -> None:
    corpus = tmp_path / "book.txt"
    corpus.write_text("\n".join(bookcorpus(700)) + "\n", encoding="utf-8")
    out = io.StringIO()
    call_command(
        "train", "--corpus", str(corpus), "--kind", "ngram", "--order", "3",
        "--out", str(tmp_path / "m"), stdout=out,
    )  # fmt: skip
    info = json.loads((tmp_path / "m" / ngram.INFO_NAME).read_text())
    assert info["heldout"]["sentences"] == 7
    assert f"held-out perplexity {info['heldout']['perplexity']:,} on" in out.getvalue()
