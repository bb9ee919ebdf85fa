"""`minimal_pairs evaluate|analyze --metric`: sentence, nlpscholar or lm_eval, as the API's
`metric`; without it the set's format decides (sentence for BLiMP JSONL, nlpscholar for an
NLPScholar TSV). lm_eval scores another string (the harness's leading space), which the
predictions file names, and such predictions are read only under lm_eval."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import SHARED_DATA

PAIRS = [
    ("The keys to the cabinet are here.", "The keys to the cabinet is here."),
    ("No dog has ever barked.", "A dog has ever barked."),
    ("The cats sleep.", "The cats sleeps."),
    ("Many people were fixing the car.", "Many people was fixing the car."),
]


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text()), delimiter="\t"))


def _run(*args: str) -> str:
    err = io.StringIO()
    call_command("minimal_pairs", *args, stderr=err)
    return err.getvalue()


@pytest.fixture
def blimp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    lines = [
        json.dumps({"sentence_good": g, "sentence_bad": b, "pairID": str(i)})
        for i, (g, b) in enumerate(PAIRS, start=1)
    ]
    (tmp_path / "agr.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def _sentence_sums(pred: Path) -> dict[str, float]:
    sums: dict[str, float] = {}
    for row in _rows(pred):
        sums[row["sentid"]] = sums.get(row["sentid"], 0.0) + float(row["surp"])
    return sums


def test_a_blimp_set_defaults_to_the_whole_sentence_and_names_it(blimp, tiny_gpt2) -> None:
    err = _run("evaluate", "--model", str(tiny_gpt2), "--data", "agr.jsonl", "--out", "p.tsv")
    assert "(metric sentence)" in err
    assert "metric" not in _rows(blimp / "p.tsv")[0]  # the sentence itself: NLPScholar's file
    assert "metric sentence" in _run(
        "analyze", "--pred", "p.tsv", "--data", "agr.jsonl", "--out", "r.tsv"
    )
    by_pair = _rows(blimp / "r_bypair.tsv")
    assert {r["metric"] for r in by_pair} == {"sentence"}
    sums = _sentence_sums(blimp / "p.tsv")
    # Each pair's values are its two sentences' summed surprisals (bits): sentences
    # 2k-1 and 2k are pair k's expected and unexpected ones.
    for k, row in enumerate(by_pair, start=1):
        expected, unexpected = sums[str(2 * k - 1)], sums[str(2 * k)]
        assert float(row["expected"]) == pytest.approx(expected, abs=1e-9)
        assert float(row["unexpected"]) == pytest.approx(unexpected, abs=1e-9)
        assert row["acc"] == str(expected < unexpected)
    (by_cond,) = _rows(blimp / "r.tsv")
    assert by_cond["metric"] == "sentence"
    assert float(by_cond["acc"]) == pytest.approx(
        sum(r["acc"] == "True" for r in by_pair) / len(by_pair)
    )

    # NLPScholar's analysis on the same tokens: its word means, and no metric column.
    assert "metric nlpscholar" in _run(
        "analyze", "--pred", "p.tsv", "--data", "agr.jsonl", "--out", "n.tsv",
        "--metric", "nlpscholar",
    )  # fmt: skip
    nlpscholar = _rows(blimp / "n_bypair.tsv")
    assert "metric" not in nlpscholar[0]
    assert all(
        float(a["expected"]) != pytest.approx(float(b["expected"]))
        for a, b in zip(nlpscholar, by_pair, strict=True)
    )


def test_lm_eval_scores_the_harness_string_and_is_read_only_so(blimp, tiny_gpt2) -> None:
    _run("evaluate", "--model", str(tiny_gpt2), "--data", "agr.jsonl", "--out", "p.tsv")
    err = _run(
        "evaluate", "--model", str(tiny_gpt2), "--data", "agr.jsonl", "--out", "h.tsv",
        "--metric", "lm_eval",
    )  # fmt: skip
    assert "(metric lm_eval)" in err
    harness = _rows(blimp / "h.tsv")
    assert {r["metric"] for r in harness} == {"lm_eval"}
    plain_sums, harness_sums = _sentence_sums(blimp / "p.tsv"), _sentence_sums(blimp / "h.tsv")
    assert all(plain_sums[s] != pytest.approx(harness_sums[s]) for s in plain_sums)

    assert "metric lm_eval" in _run(  # the file's metric is the default
        "analyze", "--pred", "h.tsv", "--data", "agr.jsonl", "--out", "r.tsv"
    )
    by_pair = _rows(blimp / "r_bypair.tsv")
    assert {r["metric"] for r in by_pair} == {"lm_eval"}
    assert float(by_pair[0]["expected"]) == pytest.approx(harness_sums["1"], abs=1e-9)

    for pred, metric in (("h.tsv", "sentence"), ("h.tsv", "nlpscholar"), ("p.tsv", "lm_eval")):
        with pytest.raises(CommandError, match=f"--metric {metric} does not fit"):
            _run("analyze", "--pred", pred, "--data", "agr.jsonl", "--out", "x.tsv",
                 "--metric", metric)  # fmt: skip
    assert not (blimp / "x.tsv").exists()
    with pytest.raises(CommandError, match="invalid choice"):
        _run("analyze", "--pred", "p.tsv", "--data", "agr.jsonl", "--out", "x.tsv",
             "--metric", "mean")  # fmt: skip


def test_an_nlpscholar_tsv_defaults_to_nlpscholars_analysis(tmp_path, monkeypatch) -> None:
    folder = SHARED_DATA / "nlpscholar"
    if not folder.is_dir():
        pytest.skip("shared data not found")
    monkeypatch.chdir(tmp_path)
    shutil.copy(folder / "data" / "minimal_pairs_bad.tsv", "d.tsv")
    pred = folder / "predictions" / "minimal_pairs_bad.tsv"
    common = ("--pred", str(pred), "--data", "d.tsv", "--drop-incomplete-pairs")
    assert "metric nlpscholar" in _run("analyze", *common, "--out", "r.tsv")
    assert "metric" not in _rows(tmp_path / "r.tsv")[0]
    assert "metric sentence" in _run("analyze", *common, "--out", "s.tsv", "--metric", "sentence")
    assert {r["metric"] for r in _rows(tmp_path / "s.tsv")} == {"sentence"}
