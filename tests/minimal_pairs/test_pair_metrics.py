"""Metrics by format (issue 45): each set's runs compare pairs by its format's metric
unless asked otherwise, every accuracy names its metric, boards rank like with like; the
lm-eval task folder out (command, API zip) and in (command, refusals located)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluations.minimal_pairs import selectors as pair_selectors
from evaluations.minimal_pairs import services as pair_services
from evaluations.models import LanguageModel, PairEvaluation
from suites.formats import minimal_pairs as mp
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet
from tests.conftest import signed_in_client, token_client
from tests.minimal_pairs.test_pair_evaluations import post_json, word_tokens

pytestmark = pytest.mark.django_db(transaction=True)

# Pair 1: ROI "are" 3 bits < "is" 5 (NLPScholar: passes), but 14 > 8 bits over the whole
# sentence (fails). Pair 2: 9 > 3 bits either way (fails). So 0.5 against 0.0.
SURPRISALS = {"1": [1.0, 1.0, 3.0, 9.0], "2": [1.0, 1.0, 5.0, 1.0], "3": [2.0, 1.0, 6.0],
              "4": [1.0, 1.0, 1.0]}  # fmt: skip
BLIMP = (
    '{"sentence_good": "the keys are here", "sentence_bad": "the keys is here", "pairID": "1"}\n'
    '{"sentence_good": "no dog barks", "sentence_bad": "a dog barks", "pairID": "2"}\n'
)


def _store(run: PairEvaluation, pair_set: MinimalPairSet) -> PairEvaluation:
    rows = pair_set.sentences.order_by("position").values_list("sentid", "sentence")
    results = {
        "sentences": [word_tokens(text, SURPRISALS[sentid]) for sentid, text in rows],
        "diagnostics": {},
        "model_info": {"tokenizer": "tok"},
    }
    assert pair_services.pair_results_store(run_id=run.pk, attempt=1, results=results)
    run.refresh_from_db()
    return run


def _run(user, pair_set, model, metric: str | None = None) -> PairEvaluation:
    (run,) = pair_services.pair_evaluation_request(
        user=user, models=[model], pair_sets=[pair_set], metric=metric
    ).evaluations
    return _store(run, pair_set)


@pytest.fixture
def blimp_set(alice) -> MinimalPairSet:
    return pair_sets.minimal_pair_set_import(
        data=BLIMP, filename="small.jsonl", name="blimpish", owner=alice
    ).pair_set


def test_each_format_has_its_publishers_metric(pair_set, blimp_set) -> None:
    assert (pair_set.source_format, pair_set.metric) == ("nlpscholar-tsv", "nlpscholar")
    assert (blimp_set.source_format, blimp_set.metric) == ("blimp-jsonl", "sentence")
    for source_format in ("jblimp-jsonl", "multiblimp-parquet", "lm-syneval-tsv", "zorro-txt",
                          "clams-tsv"):  # fmt: skip
        assert mp.format_metric(source_format) == "sentence", source_format
    assert mp.format_metric("lm-eval-task") == "lm_eval"


def test_a_run_takes_its_sets_metric_unless_asked(alice, pair_set, blimp_set, model) -> None:
    # The same sentences and surprisals: the metric alone decides.
    nlp = _run(alice, pair_set, model)
    whole = _run(alice, blimp_set, model)
    assert (nlp.metric, nlp.accuracy) == ("nlpscholar", 0.5)
    assert (whole.metric, whole.accuracy) == ("sentence", 0.0)
    asked = _run(alice, pair_set, model, metric="sentence")
    assert (asked.metric, asked.accuracy) == ("sentence", 0.0) and asked.pk != nlp.pk
    assert "metric" not in pair_services.pair_payload(asked)  # the same tokens
    (harness,) = pair_services.pair_evaluation_request(
        user=alice, models=[model], pair_sets=[pair_set], metric="lm_eval"
    ).evaluations
    assert pair_services.pair_payload(harness)["metric"] == "lm_eval"


def test_the_api_asks_answers_and_analyses_by_metric(alice, pair_set, model) -> None:
    client = token_client(alice)
    bad = post_json(client, "/api/pairs/evaluations/", {"models": ["tiny"], "sets": ["small"],
                                                         "metric": "mean"})  # fmt: skip
    assert bad.status_code == 400 and "metric" in bad.content.decode()
    run = _run(alice, pair_set, model)
    answer = client.get(f"/api/pairs/evaluations/{run.pk}/").json()
    assert (answer["metric"], answer["accuracy"]) == ("nlpscholar", 0.5)
    by_cond = client.get(f"/api/pairs/evaluations/{run.pk}/by_cond/").json()
    assert by_cond["metric"] == "nlpscholar"
    # Per analysis: the same run's tokens under the whole-sentence metric.
    whole = client.get(f"/api/pairs/evaluations/{run.pk}/by_cond/?metric=sentence").json()
    assert whole["metric"] == "sentence"
    assert {row[whole["columns"].index("acc")] for row in whole["rows"]} == {0.0}
    tsv = client.get(f"/api/pairs/evaluations/{run.pk}/by_cond/?metric=sentence&format=tsv")
    header, first = tsv.content.decode().splitlines()[:2]
    assert header.endswith("\tmetric") and first.endswith("\tsentence")
    plain = client.get(f"/api/pairs/evaluations/{run.pk}/by_cond/?format=tsv").content.decode()
    assert "metric" not in plain.splitlines()[0]  # NLPScholar's own columns
    # lm_eval needs a run scored on the harness's string: a located 400.
    refused = client.get(f"/api/pairs/evaluations/{run.pk}/by_cond/?metric=lm_eval")
    assert refused.status_code == 400 and "$.metric" in refused.content.decode()
    listed = client.get("/api/pairs/evaluations/?metric=sentence").json()
    assert listed["count"] == 0
    page = client.get(f"/pairs/evaluations/{run.pk}/?metric=sentence").content.decode()
    assert 'data-metric="sentence"' in page and "accuracy (metric sentence)" in page
    listed = client.get("/minimal-pairs/small/").content.decode()
    assert 'title="the metric this accuracy compares pairs by">nlpscholar</span>' in listed


def test_analyze_takes_the_sets_metric_unless_asked_and_names_it(alice, blimp_set, model) -> None:
    """POST /api/minimal-pairs/<name>/analyze/ analyses as a pair run does: under the
    set's own metric (a BLiMP file's: sentence), or the one asked; a bad one is a 400 at
    `$.metric`."""
    client = token_client(alice)
    run = _run(alice, blimp_set, model)
    assert run.metric == "sentence"
    predictions = client.get(f"/api/pairs/evaluations/{run.pk}/tokens/?format=tsv").content
    url = "/api/minimal-pairs/blimpish/analyze/"

    def analyze(query: str = "") -> Any:
        return client.post(f"{url}{query}", predictions, content_type="text/plain")

    own = analyze().json()
    assert own["metric"] == "sentence"
    # Both pairs fail over the whole sentence (14 > 8 and 9 > 3 bits), as the run's accuracy.
    assert {row[own["columns"].index("acc")] for row in own["rows"]} == {0.0} == {run.accuracy}
    assert analyze("?metric=nlpscholar").json()["metric"] == "nlpscholar"
    assert analyze("?metric=lm_eval").json()["metric"] == "lm_eval"
    header, first = analyze("?as=tsv").content.decode().splitlines()[:2]
    assert header.endswith("\tmetric") and first.endswith("\tsentence")
    assert "metric" not in analyze("?as=tsv&metric=nlpscholar").content.decode().splitlines()[0]
    for bad in ("mean", "SENTENCE", "%20nlp"):
        refused = analyze(f"?metric={bad}")
        assert refused.status_code == 400, refused.content
        (error,) = refused.json()["errors"]
        assert error["path"] == "$.metric" and "choose one of sentence" in error["message"]
    assert analyze("?metric=%00").status_code == 400  # the site refuses a NUL anywhere


def test_boards_rank_only_runs_of_the_sets_metric(alice, pair_set, model) -> None:
    other = LanguageModel.objects.create(name="other", display_name="Other", source="o/m")
    own = _run(alice, pair_set, model)
    _run(alice, pair_set, other, metric="sentence")
    board = pair_selectors.pair_leaderboard()
    (column,) = board.suites
    assert column.metric == "nlpscholar"
    cells = {row.model.name: row.cells.get(pair_set.pk) for row in board.rows}
    assert cells["tiny"] == (0.5, own.pk) and cells.get("other") in (None, (None, 0))
    page = token_client(alice).get("/leaderboard/").content.decode()
    assert '<small class="lb-metric">nlpscholar</small>' in page
    data = token_client(alice).get("/api/leaderboard/minimal-pairs/").json()
    assert [(s["name"], s["metric"]) for s in data["sets"]] == [("small", "nlpscholar")]
    table = token_client(alice).get("/leaderboard/minimal-pairs.csv").content.decode()
    header, *lines = table.splitlines()
    assert header.endswith(",metric:small") and all(x.endswith(",nlpscholar") for x in lines)


def test_export_command_and_api_zip_write_the_task(alice, blimp_set, tmp_path) -> None:
    out = tmp_path / "task"
    call_command("export_lm_eval", set="blimpish", out=str(out), stdout=io.StringIO())
    config = yaml.safe_load((out / "gym_blimpish.yaml").read_text())
    assert config["dataset_kwargs"]["data_files"]["test"] == str(out / "gym_blimpish.jsonl")
    assert (config["doc_to_text"], config["doc_to_target"], config["target_delimiter"]) == (
        "", 0, " ")  # fmt: skip
    assert config["metadata"]["gym_metric"] == "lm_eval"
    records = [json.loads(x) for x in (out / "gym_blimpish.jsonl").read_text().splitlines()]
    assert records[1] == {"sentence_good": "no dog barks", "sentence_bad": "a dog barks",
                          "pairID": "2", "paradigm": "small"}  # fmt: skip
    client = token_client(alice)
    answer = client.get("/api/minimal-pairs/blimpish/export/?as=lm-eval&metric=sentence")
    assert answer.status_code == 200 and answer["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(answer.content))
    assert sorted(archive.namelist()) == ["gym_blimpish/gym_blimpish.jsonl",
                                          "gym_blimpish/gym_blimpish.yaml"]  # fmt: skip
    zipped = yaml.safe_load(archive.read("gym_blimpish/gym_blimpish.yaml"))
    assert zipped["target_delimiter"] == "" and zipped["metadata"]["gym_metric"] == "sentence"
    assert zipped["dataset_kwargs"]["data_files"]["test"] == "gym_blimpish/gym_blimpish.jsonl"
    for query in ("as=pdf", "as=lm-eval&metric=nlpscholar"):
        refused = client.get(f"/api/minimal-pairs/blimpish/export/?{query}")
        assert refused.status_code == 400, query


def test_an_exported_task_imports_back_as_the_same_pairs(alice, blimp_set, tmp_path) -> None:
    out = tmp_path / "task"
    call_command("export_lm_eval", set="blimpish", out=str(out), stdout=io.StringIO())
    text = io.StringIO()
    call_command("import_lm_eval", str(out), name="again", owner="alice", stdout=text)
    again = MinimalPairSet.objects.get(name="again")
    assert (again.source_format, again.metric, again.pair_count) == ("lm-eval-task", "lm_eval", 2)
    sentences = list(again.sentences.order_by("position").values_list("sentence", "comparison"))
    original = list(blimp_set.sentences.order_by("position").values_list("sentence", "comparison"))
    assert sentences == original


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"doc_to_text": "{{sentence_good}}"}, "doc_to_text"),
        ({"doc_to_choice": "{{choices}}"}, "doc_to_choice"),
        ({"num_fewshot": 5}, "num_fewshot"),
        ({"dataset_path": "nyu-mll/blimp"}, "dataset_path"),
        ({"target_delimiter": "\n"}, "target_delimiter"),
        ({"output_type": "loglikelihood"}, "output_type"),
        # Values of the wrong type: a refusal at the setting, never a plain Python error.
        ({"num_fewshot": "five"}, "yaml num_fewshot: num_fewshot must be 0"),
        ({"num_fewshot": [1]}, "yaml num_fewshot: num_fewshot must be 0"),
        ({"dataset_kwargs": ["gym_blimpish.jsonl"]}, "yaml dataset_kwargs: dataset_kwargs must"),
        ({"dataset_kwargs": "gym_blimpish.jsonl"}, "yaml dataset_kwargs: dataset_kwargs must"),
        ({"test_split": ["test"]}, "yaml test_split: test_split must be a split's name"),
        ({"doc_to_target": True}, "yaml doc_to_target: doc_to_target must be 0 or 1"),
        ({"doc_to_choice": ["a", "b"]}, "yaml doc_to_choice"),
        ({"target_delimiter": 1}, "yaml target_delimiter"),
        ({"task": ["gym"]}, "yaml task: task must be the task's name as text"),
        ({"description": "Which is right?"}, "yaml description: description must be empty"),
        # Metrics the pair set's accuracy is not.
        ({"metric_list": [{"metric": "acc_norm"}]}, "yaml metric_list.0: metric \"acc_norm\""),
        ({"metric_list": [{"metric": "acc"}, {"metric": "acc_mutual_info"}]}, "metric_list.1"),
        ({"metric_list": [{"metric": "acc", "aggregation": "median"}]},
         "metric_list.0.aggregation"),
        ({"metric_list": None}, "yaml metric_list: metric_list must be a list"),
        ({"metric_list": []}, "yaml metric_list: metric_list must be a list"),
        ({"metric_list": ["acc"]}, "yaml metric_list.0: each metric is a mapping"),
    ],
)  # fmt: skip
def test_a_task_a_pair_set_cannot_represent_is_refused_with_the_place(
    alice, blimp_set, tmp_path, change, where
) -> None:
    out = tmp_path / "task"
    call_command("export_lm_eval", set="blimpish", out=str(out), stdout=io.StringIO())
    path = out / "gym_blimpish.yaml"
    config = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump(config | change))
    with pytest.raises(CommandError) as refused:
        call_command("import_lm_eval", str(out), stdout=io.StringIO())
    assert "gym_blimpish.yaml" in str(refused.value) and where in str(refused.value)
    assert not MinimalPairSet.objects.filter(name="gym_blimpish").exists()


def test_a_task_without_a_metric_list_is_its_acc(alice, blimp_set, tmp_path) -> None:
    """Without metric_list the harness reports acc and acc_norm: the set is its acc."""
    out = tmp_path / "task"
    call_command("export_lm_eval", set="blimpish", out=str(out), stdout=io.StringIO())
    path = out / "gym_blimpish.yaml"
    config = yaml.safe_load(path.read_text())
    del config["metric_list"]
    path.write_text(yaml.safe_dump(config))
    call_command("import_lm_eval", str(out), stdout=io.StringIO())
    assert MinimalPairSet.objects.get(name="gym_blimpish").metric == "lm_eval"  # delimiter " "


def test_a_metric_the_import_cannot_represent_says_why_and_how(alice, blimp_set, tmp_path) -> None:
    out = tmp_path / "task"
    call_command("export_lm_eval", set="blimpish", out=str(out), stdout=io.StringIO())
    path = out / "gym_blimpish.yaml"
    config = yaml.safe_load(path.read_text())
    assert config["metric_list"] == [{"metric": "acc", "aggregation": "mean",
                                      "higher_is_better": True}]  # fmt: skip
    path.write_text(yaml.safe_dump(config | {"metric_list": [{"metric": "acc_norm"}]}))
    with pytest.raises(CommandError) as refused:
        call_command("import_lm_eval", str(out), stdout=io.StringIO())
    message = str(refused.value)
    assert "divided by each choice's length" in message  # why
    assert "give metric_list: [{metric: acc" in message  # how to fix


def test_data_outside_the_folder_is_refused(alice, blimp_set, tmp_path: Path) -> None:
    out = tmp_path / "task"
    call_command("export_lm_eval", set="blimpish", out=str(out), stdout=io.StringIO())
    path = out / "gym_blimpish.yaml"
    config = yaml.safe_load(path.read_text())
    config["dataset_kwargs"]["data_files"]["test"] = "../../etc/passwd"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(CommandError, match="not a file inside the task folder"):
        call_command("import_lm_eval", str(out), stdout=io.StringIO())


def _zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def test_a_zipped_task_uploads_as_a_set_and_a_bad_one_is_a_located_400(alice, blimp_set) -> None:
    client = token_client(alice)
    exported = client.get("/api/minimal-pairs/blimpish/export/?as=lm-eval&metric=sentence")
    created = client.post(
        "/api/minimal-pairs/?name=uploaded", exported.content, content_type="application/zip"
    )
    assert created.status_code == 201, created.content
    answer = created.json()
    assert (answer["source_format"], answer["metric"], answer["pair_count"]) == (
        "lm-eval-task", "sentence", 2)  # fmt: skip
    files = dict(
        (name, zipfile.ZipFile(io.BytesIO(exported.content)).read(name))
        for name in zipfile.ZipFile(io.BytesIO(exported.content)).namelist()
    )
    config = yaml.safe_load(files["gym_blimpish/gym_blimpish.yaml"])
    config["doc_to_text"] = "Which is right?"
    files["gym_blimpish/gym_blimpish.yaml"] = yaml.safe_dump(config).encode()
    hostile = {}
    for setting, value in (("num_fewshot", "five"), ("num_fewshot", [1]),
                           ("dataset_kwargs", ["x.jsonl"]), ("metric_list", [{"metric": "acc_norm"}])):  # fmt: skip
        changed = dict(files)
        changed["gym_blimpish/gym_blimpish.yaml"] = yaml.safe_dump(config | {
            "doc_to_text": "", setting: value}).encode()  # fmt: skip
        hostile[f"gym_blimpish.yaml {setting}"] = _zipped(changed)
    for body, where in (
        *((body, where) for where, body in hostile.items()),
        (_zipped(files), "gym_blimpish.yaml doc_to_text"),
        (b"PK\x03\x04 not really a zip", "zip"),
        (_zipped({"a.txt": b"x"}), "folder"),
    ):
        refused = client.post(
            "/api/minimal-pairs/?name=bad", body, content_type="application/octet-stream"
        )
        assert refused.status_code == 400, refused.content
        (error,) = refused.json()["errors"]
        assert where in error["path"] + error["message"], error
    assert not MinimalPairSet.objects.filter(name="bad").exists()


def test_the_request_form_asks_for_a_metric(bob, pair_set, model) -> None:
    client = signed_in_client(bob)
    assert 'name="metric"' in client.get("/pairs/evaluations/new/").content.decode()
    sent = client.post_form(
        "/pairs/evaluations/new/", {"models": ["tiny"], "pair_sets": ["small"], "metric": "lm_eval"}
    )
    assert sent.status_code == 302
    default = client.post_form(
        "/pairs/evaluations/new/", {"models": ["tiny"], "pair_sets": ["small"]}
    )
    assert default.status_code == 302
    assert sorted(PairEvaluation.objects.values_list("metric", flat=True)) == [
        "lm_eval",
        "nlpscholar",
    ]
    run = PairEvaluation.objects.get(metric="lm_eval")
    page = client.get(f"/pairs/evaluations/{run.pk}/").content.decode()
    assert "<span data-run-metric>lm_eval</span>" in page
    listed = client.get("/minimal-pairs/small/").content.decode()
    assert listed.count("data-metric") == 0  # neither run is done: no accuracy to name
    bad = client.post_form(
        "/pairs/evaluations/new/", {"models": ["tiny"], "pair_sets": ["small"], "metric": "mean"}
    )
    assert bad.status_code == 400 and PairEvaluation.objects.count() == 2


def _split_into_template(out: Path, **task_keys: object) -> dict[str, object]:
    """The exported task as BLiMP's lm-eval tasks are laid out: the settings in
    `_template_yaml`, the task file only its name, data and `include` of it."""
    path = out / "gym_blimpish.yaml"
    config = yaml.safe_load(path.read_text())
    own = {"include": "_template_yaml", "task": config.pop("task")}
    own["dataset_kwargs"] = config.pop("dataset_kwargs")
    (out / "_template_yaml").write_text(yaml.safe_dump(config))
    path.write_text(yaml.safe_dump(own | task_keys))
    return config


def test_a_task_including_its_template_imports_as_the_flat_one(alice, blimp_set, tmp_path) -> None:
    out = tmp_path / "task"
    call_command("export_lm_eval", set="blimpish", out=str(out), stdout=io.StringIO())
    _split_into_template(out)
    call_command("import_lm_eval", str(out), name="included", owner="alice", stdout=io.StringIO())
    included = MinimalPairSet.objects.get(name="included")
    assert (included.metric, included.pair_count) == ("lm_eval", 2)
    sentences = list(included.sentences.order_by("position").values_list("sentence", "comparison"))
    original = list(blimp_set.sentences.order_by("position").values_list("sentence", "comparison"))
    assert sentences == original
    # The task file's own keys win over the template's, as in lm-eval.
    again = tmp_path / "again"
    call_command("export_lm_eval", set="blimpish", out=str(again), stdout=io.StringIO())
    _split_into_template(again, target_delimiter="")
    call_command("import_lm_eval", str(again), name="own", owner="alice", stdout=io.StringIO())
    assert MinimalPairSet.objects.get(name="own").metric == "sentence"


@pytest.mark.parametrize(
    ("include", "where"),
    [
        ("../_template_yaml", "no absolute path, no '..'"),
        ("/etc/passwd", "no absolute path, no '..'"),
        ("missing_yaml", "is not a file inside the task folder"),
        ("LINK", "is not a file inside the task folder"),
        ("CYCLE", "includes itself"),
        ("DEEP", "nest at most"),
        (["_template_yaml"], "include must name a template file"),
    ],
)
def test_hostile_includes_are_refused_with_the_place(
    alice, blimp_set, tmp_path, include, where
) -> None:
    out = tmp_path / "task"
    call_command("export_lm_eval", set="blimpish", out=str(out), stdout=io.StringIO())
    template = _split_into_template(out)
    (tmp_path / "outside_yaml").write_text(yaml.safe_dump(template))
    if include == "LINK":
        (out / "linked_yaml").symlink_to(tmp_path / "outside_yaml")
        include = "linked_yaml"
    elif include == "CYCLE":
        (out / "_template_yaml").write_text(yaml.safe_dump(template | {"include": "_other"}))
        (out / "_other").write_text(yaml.safe_dump({"include": "_template_yaml"}))
        include = "_template_yaml"
    elif include == "DEEP":
        for level in range(6):
            (out / f"_level{level}").write_text(yaml.safe_dump({"include": f"_level{level + 1}"}))
        (out / "_level6").write_text(yaml.safe_dump(template))
        include = "_level0"
    path = out / "gym_blimpish.yaml"
    path.write_text(yaml.safe_dump(yaml.safe_load(path.read_text()) | {"include": include}))
    with pytest.raises(CommandError) as refused:
        call_command("import_lm_eval", str(out), stdout=io.StringIO())
    assert "include" in str(refused.value) and where in str(refused.value), refused.value
    assert not MinimalPairSet.objects.filter(name="gym_blimpish").exists()
