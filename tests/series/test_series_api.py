"""Checkpoint series through the API and pages: registered from a folder of Trainer
checkpoints and from a hub-style source's revisions (a local stand-in: no hub is
reachable here), curves and ages of acquisition from their members' results, and
hostile input answered 400 with where it is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluations.models import Evaluation, LanguageModel, ModelSeries, PairEvaluation, ProbingRun
from evaluations.training import series as series_services
from suites.minimal_pairs import sets as pair_sets
from suites.models import Tag
from suites.probing.services import probing_task_import
from suites.syntaxgym import services as suite_services
from tests.conftest import small_suite, suite_evaluation, token_client
from tests.series.conftest import TOKENS_PER_STEP, TRAINER_STEPS

pytestmark = pytest.mark.django_db

PROBING_TASK = (
    Path(__file__).resolve().parents[2] / "examples" / "probing" / "subject_number_attractors.txt"
)


def post(client: Any, url: str, body: Any) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


def paths(response: Any) -> list[str]:
    return [e.get("path") for e in response.json()["errors"]]


def test_a_folder_of_trainer_checkpoints_is_a_series(alice, trainer_folder: Path) -> None:
    client = token_client(alice)
    # Named relative to the model folder that holds it.
    relative = f"{trainer_folder.parent.name}/{trainer_folder.name}"
    response = post(client, "/api/model-series/", {"name": "trainer", "folder": relative})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["unit"] == "tokens"
    assert [(m["step"], m["tokens"]) for m in body["members"]] == [
        (step, step * TOKENS_PER_STEP) for step in TRAINER_STEPS
    ]
    # Each member is a registered model of its checkpoint's folder.
    for member, step in zip(body["members"], TRAINER_STEPS, strict=True):
        model = LanguageModel.objects.get(name=member["model"])
        assert model.source == str((trainer_folder / f"checkpoint-{step}").resolve())
        assert model.kind == "causal"
    # The server's folders are not shown.
    assert str(trainer_folder.parent.parent) not in response.content.decode()


def test_revisions_of_a_hub_style_source(alice, hub_standin: Path) -> None:
    client = token_client(alice)
    listed = post(
        client,
        "/api/model-series/",
        {"name": "pythia-like", "source": str(hub_standin), "revisions": ["step2000", "step1000"]},
    )
    assert listed.status_code == 201, listed.content
    assert listed.json()["unit"] == "steps"
    assert [m["step"] for m in listed.json()["members"]] == [1000, 2000]
    patterned = post(
        client,
        "/api/model-series/",
        {
            "name": "patterned",
            "source": str(hub_standin),
            "pattern": "step{N}",
            "steps": [1000, 2000, 4000],
            "tokens_per_step": 100,
        },
    )
    assert patterned.status_code == 201, patterned.content
    assert [(m["step"], m["tokens"]) for m in patterned.json()["members"]] == [
        (1000, 100_000), (2000, 200_000), (4000, 400_000)]  # fmt: skip
    # The same checkpoint is one model, shared by both series.
    assert listed.json()["members"][0]["model"] == patterned.json()["members"][0]["model"]
    babylm = post(
        client,
        "/api/model-series/",
        {"name": "babylm", "source": str(hub_standin),
         "revisions": ["chck_1M", "chck_100M", "chck_10M"]},
    )  # fmt: skip
    assert babylm.status_code == 201, babylm.content
    assert babylm.json()["unit"] == "words"
    assert [m["tokens"] for m in babylm.json()["members"]] == [10**6, 10**7, 10**8]


def test_a_hub_id_registers_each_revision(alice) -> None:
    made = series_services.series_register(
        name="pythia", source="EleutherAI/pythia-70m", revisions=["step1000", "step3000"]
    )
    members = made.members.select_related("model").order_by("position")
    assert [(m.model.source, m.model.revision, m.step) for m in members] == [
        ("EleutherAI/pythia-70m", "step1000", 1000),
        ("EleutherAI/pythia-70m", "step3000", 3000),
    ]


def test_registered_models_with_their_steps_and_tokens_are_a_series(alice) -> None:
    """Models already registered (uploaded checkpoints, say) with the steps and tokens the
    user gives: each member is that model, ordered by tokens."""
    client = token_client(alice)
    for n in (1, 2, 3):
        LanguageModel.objects.create(name=f"up-{n}", display_name=f"Up {n}", source=f"me/up-{n}")
    body = {"name": "uploaded", "models": ["up-3", "up-1", "up-2"], "steps": [300, 100, 200],
            "tokens": [3_000_000, 1_000_000, 2_000_000]}  # fmt: skip
    response = post(client, "/api/model-series/", body)
    assert response.status_code == 201, response.content
    answer = response.json()
    assert answer["unit"] == "tokens"
    assert [(m["model"], m["step"], m["tokens"]) for m in answer["members"]] == [
        ("up-1", 100, 1_000_000), ("up-2", 200, 2_000_000), ("up-3", 300, 3_000_000)]  # fmt: skip
    assert LanguageModel.objects.count() == 3  # no model registered again
    # Without tokens: drawn against the steps.
    stepped = post(client, "/api/model-series/", {"name": "stepped", "models": ["up-2", "up-1"],
                                                   "steps": [20, 10]})  # fmt: skip
    assert stepped.status_code == 201, stepped.content
    assert stepped.json()["unit"] == "steps"
    assert [(m["model"], m["tokens"]) for m in stepped.json()["members"]] == [
        ("up-1", None), ("up-2", None)]  # fmt: skip
    for bad, where in (({"steps": [1, 2]}, "$.steps"), ({"tokens": [1]}, "$.tokens")):
        refused = post(client, "/api/model-series/", body | {"name": "bad"} | bad)
        assert refused.status_code == 400 and where in paths(refused), refused.content


def test_tokens_given_with_a_folder_or_a_source_are_the_members_tokens(
    alice, trainer_folder: Path, hub_standin: Path
) -> None:
    """`tokens` beside `folder` (one per checkpoint, by step) or `source` (one per
    revision, as listed) are used, over trainer_state.json or the name; null keeps those."""
    client = token_client(alice)
    folder = post(client, "/api/model-series/", {"name": "f", "folder": str(trainer_folder),
                                                  "tokens": [7, None, 9_000_000]})  # fmt: skip
    assert folder.status_code == 201, folder.content
    assert [(m["step"], m["tokens"]) for m in folder.json()["members"]] == [
        (500, 7), (1000, 1000 * TOKENS_PER_STEP), (1500, 9_000_000)]  # fmt: skip
    source = post(client, "/api/model-series/", {"name": "s", "source": str(hub_standin),
                  "revisions": ["step2000", "step1000"], "tokens": [20, 10]})  # fmt: skip
    assert source.status_code == 201, source.content
    assert source.json()["unit"] == "tokens"
    assert [(m["step"], m["tokens"]) for m in source.json()["members"]] == [(1000, 10), (2000, 20)]
    babylm = post(client, "/api/model-series/", {"name": "b", "source": str(hub_standin),
                  "revisions": ["chck_1M", "chck_10M"], "tokens": [5, 50]})  # fmt: skip
    assert babylm.status_code == 201, babylm.content
    assert babylm.json()["unit"] == "tokens"  # the user's tokens, not the name's words
    for body in (
        {"name": "x", "folder": str(trainer_folder), "tokens": [1, 2]},
        {"name": "x", "source": str(hub_standin), "revisions": ["step1000"], "tokens": [1, 2]},
        {"name": "x", "source": str(hub_standin), "revisions": ["chck_1M", "chck_10M"],
         "tokens": [5, None]},
    ):  # fmt: skip
        refused = post(client, "/api/model-series/", body)
        assert refused.status_code == 400, refused.content
        assert paths(refused) == ["$.tokens"], refused.json()
    assert not ModelSeries.objects.filter(name="x").exists()


def test_steps_beside_revisions_are_the_members_steps(alice) -> None:
    """Revisions whose names say no step ("early", "late") take the steps given."""
    client = token_client(alice)
    body = {"name": "named", "source": "owner/model", "revisions": ["late", "early"]}
    response = post(client, "/api/model-series/", {**body, "steps": [200, 100]})
    assert response.status_code == 201, response.content
    assert response.json()["unit"] == "steps"
    members = [(m["revision"], m["step"], m["tokens"]) for m in response.json()["members"]]
    assert members == [("early", 100, None), ("late", 200, None)]
    # Given steps win over a name's, and tokens_per_step counts from them.
    body = {"name": "renamed", "source": "owner/other", "revisions": ["step1", "step2"]}
    response = post(client, "/api/model-series/", {**body, "steps": [10, 30], "tokens_per_step": 4})
    assert response.status_code == 201, response.content
    assert [(m["step"], m["tokens"]) for m in response.json()["members"]] == [(10, 40), (30, 120)]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"name": "x", "source": "o/m", "revisions": ["a", "b"], "steps": [1]}, "$.steps"),
        ({"name": "x", "source": "o/m", "revisions": ["a", "b"], "steps": [1, 1]}, "$.steps"),
        ({"name": "x", "folder": "TRAINER", "steps": [1, 2, 3]}, "$.steps"),
        ({"name": "x", "folder": "/etc"}, "$.folder"),
        ({"name": "x", "folder": "../../../../etc"}, "$.folder"),
        ({"name": "x", "folder": "nothing-here"}, "$.folder"),
        ({"name": "x"}, "$.folder"),
        ({"name": "x", "source": "HUB", "revisions": ["../../etc"]}, "$.revisions.0"),
        ({"name": "x", "source": "owner/model", "revisions": ["-rf"]}, "$.revisions.0"),
        ({"name": "x", "source": "owner/model", "revisions": ["a", "a"]}, "$.revisions"),
        ({"name": "x", "source": "owner/model"}, "$.revisions"),
        ({"name": "x", "source": "owner/model", "pattern": "step"}, "$.pattern"),
        ({"name": "x", "source": "owner/model", "revisions": "step1"}, "$.revisions"),
        ({"name": "x", "source": "bad..id", "revisions": ["step1"]}, "$.source"),
        ({"name": "x", "source": "owner/model", "revisions": ["main"]}, "$.revisions"),
        ({"name": "x", "source": "HUB", "revisions": ["step9"]}, "$.revisions.0"),
        ({"name": "\x00", "folder": "x"}, None),  # refused as JSON: no path
        ({"name": "---", "folder": "x"}, "$.name"),
        ({"name": "x", "folder": "x", "colour": "red"}, "$.colour"),
        ({"name": "x", "models": ["no-such-model"], "steps": [1]}, "$.models.0"),
        ({"name": "x", "source": "owner/model", "revisions": ["step1"], "steps": ["a"]},
         "$.steps.0"),
        ({"name": "x", "source": "o/m", "revisions": ["step1"], "threshold": 2}, "$.threshold"),
    ],
)  # fmt: skip
def test_hostile_registrations_are_400_with_where(
    alice, hub_standin, trainer_folder, body, where
) -> None:
    named = {"HUB": str(hub_standin), "TRAINER": str(trainer_folder)}
    body = {k: named.get(v, v) if isinstance(v, str) else v for k, v in body.items()}
    response = post(token_client(alice), "/api/model-series/", body)
    assert response.status_code == 400, response.content
    assert where in paths(response), response.json()
    assert not ModelSeries.objects.exists()
    assert "/etc/" not in response.content.decode()


def test_a_name_taken_and_anonymous_requests(alice, client, trainer_folder: Path) -> None:
    body = {"name": "trainer", "folder": str(trainer_folder)}
    assert post(client, "/api/model-series/", body).status_code in (401, 403)
    assert post(token_client(alice), "/api/model-series/", body).status_code == 201
    again = post(token_client(alice), "/api/model-series/", body)
    assert again.status_code == 400 and paths(again) == ["$.name"]


@pytest.fixture
def trainer_series(trainer_folder: Path) -> ModelSeries:
    return series_services.series_register(name="trainer", folder=str(trainer_folder))


def test_evaluate_asks_for_every_kind_and_hostile_bodies(
    alice, trainer_series: ModelSeries, example_pairs, _private_broker
) -> None:
    suite_services.suite_import(source=small_suite("agree"), owner=alice)
    client = token_client(alice)
    url = "/api/model-series/trainer/evaluate/"
    for body, where in [
        ({"suites": ["no-such-suite"]}, "$.suites.0"),
        ({"pair_sets": "agreement"}, "$.pair_sets"),
        ({"tags": ["no-such-tag"]}, "$.tags"),
        ({}, "$.suites"),
        ({"suites": ["agree"], "members": ["99"]}, "$.members"),
        ({"suites": ["agree"], "models": ["x"]}, "$.models"),
    ]:
        response = post(client, url, body)
        assert response.status_code == 400, (body, response.content)
        assert where in paths(response), (body, response.json())
    assert (
        post(client, "/api/model-series/nothing/evaluate/", {"suites": ["agree"]}).status_code
        == 404
    )
    asked = post(
        client, url, {"suites": ["agree"], "pair_sets": ["agreement"], "members": ["500", "1500"]}
    )
    assert asked.status_code == 202, asked.content
    members = [m.model for m in trainer_series.members.order_by("position")]
    assert asked.json()["models"] == [members[0].name, members[2].name]
    assert set(Evaluation.objects.values_list("model__name", flat=True)) == {
        members[0].name, members[2].name}  # fmt: skip
    assert PairEvaluation.objects.count() == 2
    # Asking again makes no new run.
    assert post(client, url, {"suites": ["agree"], "members": ["500"]}).status_code == 202
    assert Evaluation.objects.count() == 2


def test_evaluate_asks_for_probing_tasks_and_tagged_suites(
    alice, trainer_series: ModelSeries, _private_broker
) -> None:
    """`tags` asks for the suites with the tag (and only those), `probing_tasks` for the
    probing runs the curves read (mean pooling, logistic regression), on every member."""
    tagged = suite_services.suite_import(source=small_suite("agree"), owner=alice).suite
    suite_services.suite_import(source=small_suite("untagged"), owner=alice)
    tagged.tags.add(Tag.objects.create(name="agreement"))
    probing_task_import(source=PROBING_TASK, name="attractors", owner=None, task_type="custom")
    client = token_client(alice)
    url = "/api/model-series/trainer/evaluate/"
    asked = post(client, url, {"tags": ["agreement"], "probing_tasks": ["attractors"]})
    assert asked.status_code == 202, asked.content
    members = [m.model.name for m in trainer_series.members.order_by("position")]
    answer = asked.json()
    assert (answer["models"], answer["suites"], answer["probing_tasks"], answer["pair_sets"]) == (
        members, ["agree"], ["attractors"], [])  # fmt: skip
    assert sorted(Evaluation.objects.values_list("model__name", "suite__name")) == sorted(
        (m, "agree") for m in members
    )
    probes = ProbingRun.objects.order_by("model__name")
    assert sorted(probes.values_list("model__name", "task__name", "pooling", "probe")) == sorted(
        (m, "attractors", "mean", "logreg") for m in members
    )
    assert PairEvaluation.objects.count() == 0
    # Both are on the series' curves now, each naming what it measures.
    curves = client.get("/api/model-series/trainer/curves/").json()["curves"]
    assert [(c["kind"], c["benchmark"], c["metric"]) for c in curves] == [
        ("suite", "agree", "predictions"), ("probing", "attractors", "probe")]  # fmt: skip
    # Asked again: no new run.
    again = post(client, url, {"tags": ["agreement"], "probing_tasks": ["attractors"]})
    assert again.status_code == 202
    assert (Evaluation.objects.count(), ProbingRun.objects.count()) == (3, 3)


def test_curves_and_age_of_acquisition_from_the_members_results(
    alice, client, trainer_series: ModelSeries
) -> None:
    suite = suite_services.suite_import(source=small_suite("agree"), owner=alice).suite
    trainer_series.suites.add(suite)
    members = [m.model for m in trainer_series.members.order_by("position")]
    for model, accuracy in zip(members, (0.5, 0.9, 0.95), strict=True):
        suite_evaluation(model, suite, status="done", accuracy=accuracy)
    body = client.get("/api/model-series/trainer/curves/").json()
    (curve,) = body["curves"]
    assert curve["benchmark"] == "agree"
    assert [(p["model"], p["tokens"], p["accuracy"]) for p in curve["points"]] == [
        (m.name, step * TOKENS_PER_STEP, a)
        for m, step, a in zip(members, TRAINER_STEPS, (0.5, 0.9, 0.95), strict=True)
    ]
    assert curve["age_of_acquisition"] == 1000 * TOKENS_PER_STEP
    page = client.get("/series/trainer/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="learning-plot"' in text and f">{1000 * TOKENS_PER_STEP}<" in text
    assert (
        client.get("/series/trainer/?threshold=0.95")
        .content.decode()
        .count(f">{1500 * TOKENS_PER_STEP}<")
        >= 2
    )  # the column head and the age
    csv = client.get("/series/trainer/curves.csv").content.decode()
    assert csv.splitlines()[1].startswith("suite,agree,")
    listed = client.get("/series/").content.decode()
    assert 'href="/series/trainer/"' in listed
    assert 'href="/series/"' in client.get("/training/").content.decode()
    assert client.get("/series/nothing/").status_code == 404
    assert client.get("/api/model-series/nothing/curves/").status_code == 404


BLIMP = (
    '{"sentence_good": "the keys are here", "sentence_bad": "the keys is here", "pairID": "1"}\n'
    '{"sentence_good": "no dog barks", "sentence_bad": "a dog barks", "pairID": "2"}\n'
)


def test_pair_curves_read_only_the_sets_metric_and_every_curve_names_its_own(
    alice, client, trainer_series: ModelSeries
) -> None:
    """A BLiMP-format set's metric is `sentence`: a member's later lm_eval or nlpscholar
    run on it (asked through /api/pairs/evaluations/) is no point of its curve, and the
    curve, its CSV lines and its table row say `sentence`."""
    blimp = pair_sets.minimal_pair_set_import(
        data=BLIMP, filename="small.jsonl", name="blimpish", owner=alice
    ).pair_set
    assert blimp.metric == "sentence"
    suite = suite_services.suite_import(source=small_suite("agree"), owner=alice).suite
    trainer_series.pair_sets.add(blimp)
    trainer_series.suites.add(suite)
    members = [m.model for m in trainer_series.members.order_by("position")]
    for model, accuracy in zip(members, (0.5, 0.9, 0.95), strict=True):
        suite_evaluation(model, suite, status="done", accuracy=0.5)
        for metric, value in (("sentence", accuracy), ("lm_eval", 0.0), ("nlpscholar", 0.1)):
            PairEvaluation.objects.create(
                model=model, pair_set=blimp, content_hash=blimp.content_hash,
                status="done", accuracy=value, metric=metric,
            )  # fmt: skip
    body = client.get("/api/model-series/trainer/curves/").json()
    by_kind = {c["kind"]: c for c in body["curves"]}
    pairs = by_kind["pairs"]
    assert (pairs["benchmark"], pairs["metric"]) == ("blimpish", "sentence")
    assert [(p["model"], p["accuracy"]) for p in pairs["points"]] == [
        (m.name, a) for m, a in zip(members, (0.5, 0.9, 0.95), strict=True)
    ]
    assert pairs["age_of_acquisition"] == 1000 * TOKENS_PER_STEP
    assert by_kind["suite"]["metric"] == "predictions"
    lines = client.get("/series/trainer/curves.csv").content.decode().splitlines()
    assert lines[0] == "kind,benchmark,tokens,step,model,accuracy,age_of_acquisition,metric"
    assert [line.rsplit(",", 1)[1] for line in lines[1:]] == ["predictions"] * 3 + ["sentence"] * 3
    page = client.get("/series/trainer/").content.decode()
    assert "data-metric" in page and ">sentence</span>" in page


def test_seeds_are_a_mean_with_a_band_and_a_spread_of_ages(
    alice, client, hub_standin: Path
) -> None:
    suite = suite_services.suite_import(source=small_suite("agree"), owner=alice).suite
    seeds = []
    for seed, accuracies in (("seed-1", (0.5, 0.9, 0.9)), ("seed-2", (0.9, 0.7, 0.95))):
        made = series_services.series_register(
            name=seed, source=str(hub_standin), pattern="step{N}", steps=[1000, 2000, 4000],
            group="pythia-seeds",
        )  # fmt: skip
        made.suites.add(suite)
        seeds.append(made)
        for member, accuracy in zip(made.members.order_by("position"), accuracies, strict=True):
            # Both seeds share the stand-in's checkpoints: each seed's run is told apart
            # by its model here, so each seed gets models of its own.
            model = LanguageModel.objects.create(
                name=f"{seed}-{member.step}", display_name=seed, source=f"{seed}/m{member.step}"
            )
            member.model = model
            member.save()
            suite_evaluation(model, suite, status="done", accuracy=accuracy)
    body = client.get("/api/model-series/seed-1/curves/").json()
    (row,) = body["seeds"]
    assert row["ages"] == {"seed-1": 2000, "seed-2": 4000}
    assert (row["age_mean"], row["age_low"], row["age_high"]) == (3000, 2000, 4000)
    first = row["points"][0]
    assert (first["tokens"], first["low"], first["high"]) == (1000, 0.5, 0.9)
    assert first["mean"] == pytest.approx(0.7)
    assert "Seeds of pythia-seeds" in client.get("/series/seed-2/").content.decode()
