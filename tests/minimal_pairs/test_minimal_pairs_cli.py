"""The command line without a database: `minimal_pairs evaluate|analyze` and
`nlpscholar CONFIG.yaml`, writing the files NLPScholar writes, with NLPScholar's own
sample config reproducing its own results files."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import SHARED_DATA

NLPSCHOLAR = SHARED_DATA / "nlpscholar"


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text()), delimiter="\t"))


def _assert_matches(ours: Path, theirs: Path) -> None:
    mine, ref = _rows(ours), _rows(theirs)
    assert len(mine) == len(ref)
    for a, b in zip(mine, ref, strict=True):
        for column, value in b.items():
            try:
                assert float(a[column]) == pytest.approx(float(value), abs=1e-9)
            except ValueError:
                assert a[column] == value


@pytest.fixture
def nlpscholar_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for folder in ("data", "predictions", "sample_configs"):
        shutil.copytree(NLPSCHOLAR / folder, tmp_path / folder)
    (tmp_path / "results").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_nlpscholar_sample_config_writes_nlpscholars_results(nlpscholar_copy: Path) -> None:
    err = io.StringIO()
    call_command("nlpscholar", "sample_configs/minimal_pair_analyze.yaml", stderr=err)
    results = nlpscholar_copy / "results"
    _assert_matches(
        results / "minimal_pairs_bad.tsv", NLPSCHOLAR / "results" / "minimal_pairs_bad.tsv"
    )
    _assert_matches(
        results / "minimal_pairs_bad_bypair.tsv",
        NLPSCHOLAR / "results" / "minimal_pairs_bad_bypair.tsv",
    )
    by_word = _rows(results / "minimal_pairs_bad_byword.tsv")
    assert len(by_word) == 8 * 6 + 8 * 4  # punctuation folded: 6 words (sing), 4 (plu)
    assert "WARNING: blah not in data file. Ignoring." in err.getvalue()
    assert "7, 8, 9, 10" in err.getvalue()


def test_analyze_command_names_files_like_nlpscholar(nlpscholar_copy: Path) -> None:
    with pytest.raises(CommandError, match="pair '7' has no `unexpected` sentence"):
        call_command(
            "minimal_pairs", "analyze", "--pred", "predictions/minimal_pairs_bad.tsv",
            "--data", "data/minimal_pairs_bad.tsv", "--out", "out/R.tsv",
        )  # fmt: skip
    call_command(
        "minimal_pairs", "analyze", "--pred", "predictions/minimal_pairs_bad.tsv",
        "--data", "data/minimal_pairs_bad.tsv", "--out", "out/R.tsv", "--drop-incomplete-pairs",
        "--save", "by_pair,by_cond", "--pred-measure", "prob", "--punctuation", "separate",
        "--conditions", "condition,lemma", "--as-model", "gpt2 (NLPScholar)",
        stderr=io.StringIO(),
    )  # fmt: skip
    out = nlpscholar_copy / "out"
    assert sorted(p.name for p in out.iterdir()) == ["R.tsv", "R_bypair.tsv"]
    header = (out / "R.tsv").read_text().splitlines()[0].split("\t")
    assert header == ["", "model", "condition", "lemma", "acc", "diff", "expected", "unexpected",
                      "macrodiff", "pairs", "ties"]  # fmt: skip
    pairs = _rows(out / "R_bypair.tsv")
    assert {p["model"] for p in pairs} == {"gpt2 (NLPScholar)"}
    assert [(p["condition"], p["lemma"], p["pairid"]) for p in pairs] == [
        ("plu", "BE", "5"), ("plu", "LIKE", "6"), ("sing", "BE", "1"), ("sing", "BE", "3"),
        ("sing", "LIKE", "2"), ("sing", "LIKE", "4"),
    ]  # fmt: skip
    with pytest.raises(CommandError, match="'nope' is not a condition column"):
        call_command(
            "minimal_pairs", "analyze", "--pred", "predictions/minimal_pairs_bad.tsv",
            "--data", "data/minimal_pairs.tsv", "--out", "out/R.tsv", "--conditions", "nope",
        )  # fmt: skip


def test_evaluate_then_analyze_and_a_config_with_both_modes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tiny_gpt2: Path,  # noqa: F811
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(NLPSCHOLAR / "data" / "minimal_pairs.tsv", tmp_path / "data.tsv")
    call_command(
        "minimal_pairs", "evaluate", "--model", str(tiny_gpt2), "--model-name", "tiny",
        "--data", "data.tsv", "--out", "pred.tsv", stderr=io.StringIO(),
    )  # fmt: skip
    tokens = _rows(tmp_path / "pred.tsv")
    assert list(tokens[0]) == ["token", "sentid", "word", "wordpos", "model", "tokenizer",
                               "punctuation", "prob", "surp"]  # fmt: skip
    assert {t["model"] for t in tokens} == {"tiny"}
    assert float(tokens[0]["surp"]) > 0  # conditioned on BOS, not a free 0
    call_command(
        "minimal_pairs", "analyze", "--pred", "pred.tsv", "--data", "data.tsv",
        "--out", "res.tsv", "--conditions", "condition", stderr=io.StringIO(),
    )  # fmt: skip
    by_cond = _rows(tmp_path / "res.tsv")
    assert [(r["model"], r["condition"], r["pairs"]) for r in by_cond] == [
        ("tiny", "plu", "4"),
        ("tiny", "sing", "4"),
    ]
    assert (tmp_path / "res_byword.tsv").is_file() and (tmp_path / "res_bypair.tsv").is_file()

    (tmp_path / "both.yaml").write_text(
        "exp: MinimalPair\nmode:\n  - evaluate\n  - analyze\nmodels:\n  hf_causal_model:\n"
        f"    - {tiny_gpt2}\ndatafpath: data.tsv\npredfpath: p2/preds.tsv\n"
        "resultsfpath: r2/results.tsv\nsave: by_cond\nconditions: condition\nstride: 64\n"
    )
    err = io.StringIO()
    call_command("nlpscholar", "both.yaml", stderr=err)
    assert "stride is not needed" in err.getvalue()
    assert sorted(p.name for p in (tmp_path / "r2").iterdir()) == ["results.tsv"]
    again = _rows(tmp_path / "r2" / "results.tsv")
    assert [r["acc"] for r in again] == [r["acc"] for r in by_cond]
    assert {t["model"] for t in _rows(tmp_path / "p2" / "preds.tsv")} == {str(tiny_gpt2)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("exp: TSE\nmode: [analyze]\n", "this command runs exp: MinimalPair"),
        ("exp: MinimalPair\nmode: [train]\n", "mode must list evaluate and/or analyze"),
        ("exp: MinimalPair\nmode: [analyze]\npredfpath: p.tsv\n", "the config needs datafpath"),
        ("exp: [unclosed\n", "not a readable YAML file"),
        ("- a list\n", "must be a YAML mapping"),
        (
            "exp: MinimalPair\nmode: [evaluate]\ndatafpath: d.tsv\npredfpath: p.tsv\n"
            "models:\n  hf_text_classification_model: [x]\n",
            "model class 'hf_text_classification_model' is not supported",
        ),
    ],
)
def test_bad_configs_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(NLPSCHOLAR / "data" / "minimal_pairs.tsv", tmp_path / "d.tsv")
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(CommandError, match=message):
        call_command("nlpscholar", "c.yaml")


def test_evaluate_with_corrected_word_probabilities(
    tiny_gpt2: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    from evaluations.minimal_pairs.evaluate import sentence_words
    from evaluations.scoring import load_model, score_sentences

    data = NLPSCHOLAR / "data" / "minimal_pairs_bad.tsv"
    plain_path, corrected_path = tmp_path / "plain.tsv", tmp_path / "corrected.tsv"
    call_command(
        "minimal_pairs", "evaluate", "--model", str(tiny_gpt2), "--data", str(data),
        "--out", str(plain_path),
    )  # fmt: skip
    call_command(
        "minimal_pairs", "evaluate", "--model", str(tiny_gpt2), "--data", str(data),
        "--out", str(corrected_path), "--word-probability", "corrected",
    )  # fmt: skip
    plain, corrected = _rows(plain_path), _rows(corrected_path)
    # Off: the file is NLPScholar's columns only; on: a last column names it.
    assert "word_probability" not in plain[0]
    assert {row["word_probability"] for row in corrected} == {"corrected"}
    assert [r["token"] for r in plain] == [r["token"] for r in corrected]

    # Each word's summed surp is its token sum corrected by the engine's log2 B.
    model = load_model(str(tiny_gpt2))
    by_sentence: dict[str, list[int]] = {}
    for index, row in enumerate(plain):
        by_sentence.setdefault(row["sentid"], []).append(index)
    changed = 0
    for rows in by_sentence.values():
        words = [plain[i]["wordpos"] for i in rows]
        sentence = _sentence_of(data, plain[rows[0]]["sentid"])
        score = score_sentences(
            model, [[sentence]], word_ids=sentence_words, word_probability="corrected"
        )[0]
        assert score.log_boundary is not None and len(score.tokens) == len(rows)
        marks = score.log_boundary
        for word in dict.fromkeys(words):
            positions = [p for p, w in enumerate(words) if w == word]
            plain_sum = sum(float(plain[rows[p]]["surp"]) for p in positions)
            ours = sum(float(corrected[rows[p]]["surp"]) for p in positions)
            before, after = marks[positions[0]], marks[positions[-1] + 1]
            assert before is not None and after is not None
            assert ours == pytest.approx(plain_sum + before - after, abs=1e-3)
            changed += abs(ours - plain_sum) > 1e-3
    assert changed > 0


def _sentence_of(data: Path, sentid: str) -> str:
    rows = list(csv.DictReader(io.StringIO(data.read_text()), delimiter="\t"))
    return next(row["sentence"] for row in rows if row["sentid"] == sentid)
