"""Evaluate (evaluations/minimal_pairs/evaluate.py): a minimal-pair set through the real
scoring engine with tiny local models -> NLPScholar's evaluate table, first tokens
conditioned on BOS, model-independent words, masked LMs by PLL-word-l2r over them."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluations.minimal_pairs.analysis import AnalysisOptions, analyze_minimal_pairs
from evaluations.minimal_pairs.evaluate import evaluate_minimal_pairs
from evaluations.minimal_pairs.tokens import parse_predictions_tsv, predictions_to_tsv
from evaluations.scoring import load_model, score_sentences
from suites.formats import minimal_pairs as mp
from tests.conftest import neural_model, word_l2r_by_hand

DATA = (
    "sentid\tpairid\tcomparison\tsentence\tROI\tkind\n"
    "1\t1\texpected\tThe author's dog didn't sleep.\t3\tneg\n"
    "2\t1\tunexpected\tThe author's dog didn't slept.\t3\tneg\n"
    '3\t2\texpected\t"The pilot laughed," she said.\t\tquote\n'
    '4\t2\tunexpected\t"The pilot laughs," she said.\t\tquote\n'
)


def test_causal_table_has_nlpscholar_columns_and_bos_conditioned_first_tokens(
    tiny_gpt2: Path,  # noqa: F811
) -> None:
    model = load_model(str(tiny_gpt2))
    pair_set = mp.parse_minimal_pairs(DATA)
    table = evaluate_minimal_pairs(model, pair_set, model_name="tiny-gpt2")
    text = predictions_to_tsv(table)
    assert text.splitlines()[0].split("\t") == [
        "token", "sentid", "word", "wordpos", "model", "tokenizer", "punctuation", "prob", "surp"
    ]  # fmt: skip
    reference = score_sentences(model, [[s.sentence] for s in pair_set.sentences])
    rows = [i for i, sid in enumerate(table.sentid) if sid == "1"]
    # The same tokens and surprisals as the engine; the first token is not a free 0.
    assert [table.token[i] for i in rows] == [t.text for t in reference[0].tokens]
    assert [table.surp[i] for i in rows] == pytest.approx(
        [t.surprisal for t in reference[0].tokens]
    )
    assert table.surp[rows[0]] > 0.1
    for i in range(len(table)):
        assert table.prob[i] == pytest.approx(2 ** -table.surp[i])
    # Words are the model-independent words: every token of a word carries its position.
    words = mp.split_words(pair_set.sentences[2].sentence)
    rows3 = [i for i, sid in enumerate(table.sentid) if sid == "3"]
    seen = sorted({int(table.wordpos[i]) for i in rows3})
    assert seen == list(range(len(words)))
    for i in rows3:
        word = words[int(table.wordpos[i])]
        assert table.word[i] == word.text and bool(table.punctuation[i]) == word.punctuation
    # The table reads back and analyses.
    again = parse_predictions_tsv(text)
    result = analyze_minimal_pairs(again, pair_set, AnalysisOptions(conditions=("kind",)))
    assert result.by_cond is not None and [r["kind"] for r in result.by_cond.as_dicts()] == [
        "neg",
        "quote",
    ]


def test_masked_lm_masks_the_set_words_not_the_tokenizers(tiny_bert: Path) -> None:  # noqa: F811
    model = neural_model(str(tiny_bert))
    pair_set = mp.parse_minimal_pairs(
        "sentid\tpairid\tcomparison\tsentence\n1\t1\texpected\tdidn't sleep.\n"
        "2\t1\tunexpected\tdid sleep.\n"
    )
    table = evaluate_minimal_pairs(model, pair_set, model_name="tiny-bert")
    text = pair_set.sentences[0].sentence
    encoding = model.tokenizer(text, return_offsets_mapping=True)
    ids = encoding["input_ids"]
    # BERT's own words split "didn't" into did ' t; the set's words keep it whole.
    tokenizer_words = encoding.word_ids()
    assert len({tokenizer_words[p] for p in range(1, 4)}) > 1
    ours = mp.word_of_tokens(mp.split_words(text), encoding["offset_mapping"][1:-1], text)
    owners: list[int | None] = [None, *ours, None]
    expected = word_l2r_by_hand(model.model, ids, owners, model.mask_token_id)
    rows = [i for i, sid in enumerate(table.sentid) if sid == "1"]
    assert [table.surp[i] for i in rows] == pytest.approx(expected, abs=1e-4)
    assert [int(table.wordpos[i]) for i in rows] == owners[1:-1]
