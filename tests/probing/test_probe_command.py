"""`manage.py probe`: probing files in, one JSON per task and summary.csv out, no database."""

from __future__ import annotations

import csv
import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.probing.conftest import sample


def test_probe_writes_one_json_per_task_and_a_summary(
    tiny_gpt2: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    out = tmp_path / "results"
    err = StringIO()
    call_command(
        "probe",
        "--model",
        str(tiny_gpt2),
        "--task",
        str(sample("sentence_length")),
        "--task",
        str(sample("bigram_shift")),
        "--out",
        str(out),
        "--pooling",
        "last",
        stderr=err,
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "bigram_shift.json",
        "sentence_length.json",
        "summary.csv",
    ]
    doc = json.loads((out / "sentence_length.json").read_text())
    assert doc["task"]["type"] == "sentence_length" and doc["pooling"] == "last"
    assert len(doc["layers"]) == 3 and doc["probe"] == "logreg"
    assert doc["baselines"]["length"]["te_accuracy"] >= 0.9
    assert doc["best"] == doc["layers"][doc["best_layer"]]
    assert len(doc["confusion"]["matrix"]) == 6 and doc["confusion"]["labels"][0] == "0"
    assert len(doc["task"]["content_hash"]) == 64
    with (out / "summary.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["task"] for row in rows] == ["sentence_length", "bigram_shift"]
    assert float(rows[0]["te_accuracy"]) == pytest.approx(doc["best"]["te_accuracy"], abs=1e-4)
    assert rows[0]["best_layer"] == str(doc["best_layer"])
    assert "best on va" in err.getvalue()


def test_mlp_probe_on_a_masked_model(tiny_bert: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "mlp"
    call_command(
        "probe",
        "--model",
        str(tiny_bert),
        "--task",
        str(sample("odd_man_out")),
        "--out",
        str(out),
        "--probe",
        "mlp",
        "--memory-mb",
        "0",  # vectors through float16 files on disk
        # One MLP per layer (the defaults fit three seeds and the control task's three).
        "--seeds",
        "1",
        "--no-control",
        stderr=StringIO(),
    )
    doc = json.loads((out / "odd_man_out.json").read_text())
    assert doc["probe"] == "mlp" and doc["model"]["kind"] == "masked"
    assert len(doc["seeds"]) == 1 and "control" not in doc["best"]
    assert doc["diagnostics"]["vectors_on_disk"] is True
    assert all(layer["hyperparameters"]["hidden"] == 50 for layer in doc["layers"])


def test_bad_files_are_all_reported_before_any_model_is_loaded(tmp_path: Path) -> None:
    broken = tmp_path / "past_present.txt"
    broken.write_text("tr\tPAST\tone .\nva\tFUTURE\ttwo .\n")
    out = tmp_path / "never"
    with pytest.raises(CommandError) as caught:
        call_command(
            "probe",
            "--model",
            str(tmp_path / "no-such-model"),
            "--task",
            str(broken),
            "--task",
            str(sample("word_content")),
            "--task",
            str(tmp_path / "missing.txt"),
            "--out",
            str(out),
        )
    message = str(caught.value)
    assert "line 2, field 2: label 'FUTURE' is not one of past_present's labels" in message
    assert "no test instances" in message
    assert "word_content.txt (word_content): not a valid probing file" in message
    assert "never in 'tr'" in message
    assert "missing.txt: no such file" in message
    assert not out.exists()


def test_same_file_name_twice_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "tree_depth.txt"
    other.write_bytes(sample("tree_depth").read_bytes())
    with pytest.raises(CommandError, match="same name as"):
        call_command(
            "probe",
            "--model",
            "x",
            "--task",
            str(sample("tree_depth")),
            "--task",
            str(other),
            "--out",
            str(tmp_path / "o"),
        )


def test_custom_type_and_a_missing_model(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot be read"):
        call_command(
            "probe",
            "--model",
            str(tmp_path),  # a folder without a model
            "--task",
            str(sample("past_present")),
            "--type",
            "custom",
            "--out",
            str(tmp_path / "o"),
        )


def test_probe_seeds_control_and_mdl_options(
    tiny_gpt2: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    out = tmp_path / "results"
    call_command(
        "probe",
        "--model",
        str(tiny_gpt2),
        "--task",
        str(sample("past_present")),
        "--out",
        str(out),
        "--seeds",
        "2",
        "--mdl",
        stderr=StringIO(),
    )
    doc = json.loads((out / "past_present.json").read_text())
    assert doc["seeds"] == [1234, 1235] and doc["mdl"] is True
    # The public file has no field #3: a sentence control, and no frequency baseline.
    assert doc["control"] == {"kind": "sentence", "seed": 4321}
    assert doc["baselines"]["frequency"]["te_accuracy"] is None
    best = doc["layers"][doc["best_layer"]]
    assert doc["best_selectivity"] == best["selectivity"]
    assert best["mdl"]["uniform_bits"] == 228.0  # 228 tr sentences, two labels
    with (out / "summary.csv").open() as handle:
        row = next(csv.DictReader(handle))
    assert row["seeds"] == "2" and row["frequency_te_accuracy"] == ""
    assert float(row["selectivity"]) == pytest.approx(best["selectivity"], abs=5e-5)

    with pytest.raises(CommandError, match="--seeds must be from 1 to 10"):
        call_command(
            "probe", "--model", str(tiny_gpt2), "--task", str(sample("past_present")),
            "--out", str(out), "--seeds", "0", stderr=StringIO(),
        )  # fmt: skip
