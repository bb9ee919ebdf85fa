"""A test suite as lm-eval tasks: which predictions are a choice between whole sentences,
the refusals (command and API, with the prediction and the reason), the folder and zip
written, and how many of the real SyntaxGym suites qualify (none: they compare regions)."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command

from suites import formats
from suites.formats.lm_eval_tasks import LmEvalTaskInvalid
from suites.syntaxgym import lm_eval
from suites.syntaxgym import services as suite_services
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.django_db

WHOLE = "(1;%{c}%) + (2;%{c}%) + (3;%{c}%)"


def suite_dict(predictions: list[str], *, metric: str = "sum", name: str = "agree") -> dict:
    conditions = {
        "good": ["The keys", "are", "here ."],
        "bad": ["The keys", "is", "here ."],
        "odd": ["The keys", "am", "here ."],
    }
    return {
        "meta": {"name": name, "metric": metric},
        "region_meta": {"1": "subject", "2": "verb", "3": "rest"},
        "predictions": [{"type": "formula", "formula": p} for p in predictions],
        "items": [
            {
                "item_number": n,
                "conditions": [
                    {
                        "condition_name": c,
                        "regions": [
                            {"region_number": i + 1, "content": r.replace("keys", noun)}
                            for i, r in enumerate(regions)
                        ],
                    }
                    for c, regions in conditions.items()
                ],
            }
            for n, noun in ((1, "keys"), (2, "dogs"))
        ],
    }


def export(predictions: list[str], **kwargs: Any) -> Any:
    return lm_eval.export_suite(
        suite_dict(predictions), suite_name="agree", content_hash="h", **kwargs
    )


def test_a_whole_sentence_comparison_is_one_task_with_the_preferred_sentence_first() -> None:
    folder = export(["(*;%bad%) > (*;%good%)"])
    assert folder.tasks == ("gym_agree",)
    config = yaml.safe_load(folder.files["gym_agree.yaml"])
    assert config["doc_to_choice"] == "choices" and config["doc_to_target"] == 0
    assert config["target_delimiter"] == ""  # default: Gym's suite scoring, no leading space
    assert config["metadata"]["gym_metric"] == "sentence"
    assert "equals Gym's suite evaluation" in config["metadata"]["convention"]
    records = [json.loads(line) for line in folder.files["gym_agree.jsonl"].splitlines()]
    assert records[0] == {
        "item_number": 1,
        "conditions": ["good", "bad"],
        "choices": ["The keys are here .", "The keys is here ."],
    }
    assert records[1]["choices"][0] == "The dogs are here ."


def test_region_sums_and_a_conjunction_with_one_preferred_condition_are_choices() -> None:
    folder = export(
        [
            f"({WHOLE.format(c='good')}) < ({WHOLE.format(c='bad')}) & ((*;%good%) < (*;%odd%))",
            "(*;%odd%) > (*;%bad%)",
        ],
        metric="lm_eval",
    )
    assert folder.tasks == ("gym_agree_p1", "gym_agree_p2")
    first = [json.loads(line) for line in folder.files["gym_agree_p1.jsonl"].splitlines()]
    assert first[0]["conditions"] == ["good", "bad", "odd"]
    second = [json.loads(line) for line in folder.files["gym_agree_p2.jsonl"].splitlines()]
    assert second[0]["conditions"] == ["bad", "odd"]
    text = folder.files["gym_agree_p2.yaml"].decode()
    assert yaml.safe_load(text)["target_delimiter"] == " "
    assert "not a harness metric" in text  # several predictions: the suite's accuracy is not


@pytest.mark.parametrize(
    ("formula", "reason"),
    [
        ("(2;%good%) < (2;%bad%)", "(2;%good%) is one region, not the whole sentence"),
        ("(1;%good%) + (2;%good%) < (1;%bad%) + (2;%bad%)", "not a whole sentence"),
        ("(*;%good%) - (*;%bad%) < 0", "not a whole sentence"),
        ("(*;%good%) = (*;%bad%)", "'=' (about equal)"),
        ("~((*;%good%) > (*;%bad%))", "'~' (not)"),
        ("((*;%good%) < (*;%bad%)) | ((*;%good%) < (*;%odd%))", "'|' (or)"),
        ("((*;%good%) < (*;%bad%)) & ((*;%bad%) < (*;%odd%))", "prefer different conditions"),
        ("(*;%good%) < (*;%good%)", "with itself"),
    ],
)
def test_predictions_that_are_no_choice_are_refused_with_the_reason(
    formula: str, reason: str
) -> None:
    with pytest.raises(LmEvalTaskInvalid) as refused:
        export(["(*;%good%) < (*;%bad%)", formula])
    assert "prediction 2" in str(refused.value) and reason in str(refused.value)
    assert refused.value.where == "predictions[1]"


def test_a_suite_comparing_means_and_an_unknown_metric_are_refused() -> None:
    with pytest.raises(LmEvalTaskInvalid, match="metric sum"):
        lm_eval.export_suite(
            suite_dict(["(*;%good%) < (*;%bad%)"], metric="mean"), suite_name="a", content_hash=""
        )
    with pytest.raises(LmEvalTaskInvalid, match="no lm-eval convention"):
        export(["(*;%good%) < (*;%bad%)"], metric="nlpscholar")


def test_the_command_writes_the_folder_and_refuses_with_the_prediction(alice, tmp_path) -> None:
    suite_services.suite_import(source=suite_dict(["(*;%good%) < (*;%bad%)"]), owner=alice)
    out = io.StringIO()
    call_command("export_lm_eval", suite="agree", out=str(tmp_path / "t"), stdout=out)
    assert "lm_eval --include_path" in out.getvalue() and "--tasks gym_agree " in out.getvalue()
    config = yaml.safe_load((tmp_path / "t" / "gym_agree.yaml").read_text())
    assert config["dataset_kwargs"]["data_files"]["test"] == str(tmp_path / "t/gym_agree.jsonl")

    suite_services.suite_import(
        source=suite_dict(["(2;%good%) < (2;%bad%)"], name="regional"), owner=alice
    )
    with pytest.raises(CommandError, match=r"prediction 1 .* one region"):
        call_command("export_lm_eval", suite="regional", out=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()
    with pytest.raises(CommandError, match="no test suite named 'ghost'"):
        call_command("export_lm_eval", suite="ghost", out=str(tmp_path / "g"))
    with pytest.raises(CommandError):
        call_command("export_lm_eval", suite="agree", set="x", out=str(tmp_path / "g"))


def test_the_api_zips_the_tasks_and_refuses_with_a_clear_400(alice, client) -> None:
    suite_services.suite_import(
        source=suite_dict(["(*;%good%) < (*;%bad%)", "(*;%good%) < (*;%odd%)"]), owner=alice
    )
    response = client.get("/api/suites/agree/export/?as=lm-eval&metric=lm_eval")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert response["X-Lm-Eval-Tasks"] == "gym_agree_p1,gym_agree_p2"
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert sorted(archive.namelist()) == [
        f"gym_agree/gym_agree_p{n}.{ext}" for n in (1, 2) for ext in ("jsonl", "yaml")
    ]
    config = yaml.safe_load(archive.read("gym_agree/gym_agree_p1.yaml"))
    assert config["dataset_kwargs"]["data_files"]["test"] == "gym_agree/gym_agree_p1.jsonl"
    assert config["target_delimiter"] == " "

    suite_services.suite_import(
        source=suite_dict(["(2;%good%) < (2;%bad%)"], name="regional"), owner=alice
    )
    refused = client.get("/api/suites/regional/export/?as=lm-eval")
    assert refused.status_code == 400
    assert "one region, not the whole sentence" in json.dumps(refused.json())
    assert client.get("/api/suites/agree/export/?as=yaml").status_code == 400
    assert client.get("/api/suites/agree/export/?as=lm-eval&metric=x").status_code == 400
    assert client.get("/api/suites/agree/export/?as=csv").status_code == 200


def test_none_of_the_real_syntaxgym_suites_compares_whole_sentences() -> None:
    folder = SHARED_DATA / "syntaxgym-2020"
    if not folder.is_dir():
        pytest.skip("shared data not found")
    files = sorted(folder.glob("*/*.json"))
    assert len(files) == 68
    qualified, reasons = [], []
    for path in files:
        suite = formats.parse_suite_text(path.read_bytes()).suite
        assert suite is not None, path
        try:
            lm_eval.suite_choices(suite)
        except LmEvalTaskInvalid as refused:
            reasons.append(str(refused))
        else:
            qualified.append(path.name)
    # They compare critical regions (the verb, the gap), never the whole sentence.
    assert qualified == []
    assert sum("is one region, not the whole sentence" in r for r in reasons) == 60
