"""The fast subset for sweeps: a fixed, seeded sample of each benchmark, the same
whatever order its items were uploaded in; runs on it are separate from the runs on the
whole benchmark, never on a board, and a series evaluated on it draws curves marked so.
Hostile subsets are answered 400 where they are wrong, and change nothing."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from evaluations import subsets
from evaluations.minimal_pairs import results as pair_results
from evaluations.minimal_pairs import services as pair_services
from evaluations.minimal_pairs.selectors import pair_leaderboard
from evaluations.models import Evaluation, ModelSeries, PairEvaluation, ProbingRun
from evaluations.probing import services as probing_services
from evaluations.probing.selectors import probing_board
from evaluations.syntaxgym import services as eval_services
from evaluations.syntaxgym.selectors import leaderboard
from evaluations.training import series as series_services
from suites.probing.services import probing_task_import
from suites.syntaxgym import services as suite_services
from tests.conftest import agreement_item, suite_document, token_client

pytestmark = pytest.mark.django_db

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOUNS = ["dog", "cat", "pilot", "senator", "author", "farmer", "doctor", "child", "bird",
         "lawyer", "cook", "poet"]  # fmt: skip


def big_suite(name: str, order: list[int]) -> dict[str, Any]:
    """A 12-item agreement suite, its items numbered and laid out in `order`."""
    items = {n + 1: agreement_item(f"The {NOUNS[i]}") for n, i in enumerate(order)}
    return suite_document(name, items, ["(2;%mismatch%) > (2;%match%)"])


def item_subjects(snapshot: dict[str, Any]) -> set[str]:
    return {item["conditions"][0]["regions"][0]["content"] for item in snapshot["items"]}


def post(client: Any, url: str, body: Any) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.fixture
def trainer_series(trainer_folder: Path) -> ModelSeries:
    return series_services.series_register(name="trainer", folder=str(trainer_folder))


def test_the_sample_is_fixed_nested_and_blind_to_order() -> None:
    keys = [f"item {n}" for n in range(100)]
    first = subsets.sample_indices(keys, subsets.Subset(10, 0))
    assert first is not None and len(first) == 10
    assert subsets.sample_indices(keys, subsets.Subset(10, 0)) == first
    # The same items in another order: the same items are kept.
    shuffled = keys[:]
    random.Random(4).shuffle(shuffled)
    again = subsets.sample_indices(shuffled, subsets.Subset(10, 0))
    assert again is not None
    assert {shuffled[i] for i in again} == {keys[i] for i in first}
    # Another seed draws another sample; a larger size holds the smaller one.
    other = subsets.sample_indices(keys, subsets.Subset(10, 1))
    assert other is not None and set(other) != set(first)
    larger = subsets.sample_indices(keys, subsets.Subset(30, 0))
    assert larger is not None and set(first) <= set(larger)
    # A size at or above the count is the whole benchmark.
    assert subsets.sample_indices(keys, subsets.Subset(100, 0)) is None
    assert subsets.subset_key(subsets.Subset(100, 3), 100) == {"subset_size": 0, "subset_seed": 0}


def test_a_suite_subset_is_a_run_of_its_own_on_the_sampled_items(
    alice, trainer_series: ModelSeries, _private_broker
) -> None:
    model = trainer_series.members.order_by("position")[0].model
    suite = suite_services.suite_import(
        source=big_suite("twelve", list(range(12))), owner=alice
    ).suite
    # The same items uploaded in the opposite order (and numbered otherwise).
    reversed_suite = suite_services.suite_import(
        source=big_suite("twelve reversed", list(range(11, -1, -1))), owner=alice
    ).suite
    whole = eval_services.evaluation_request(model=model, suites=[suite]).evaluations[0]
    sample = subsets.Subset(4, 7)
    asked = eval_services.evaluation_request(model=model, suites=[suite], subset=sample)
    sampled = asked.evaluations[0]
    assert sampled.pk != whole.pk and asked.created == [sampled]
    assert (sampled.subset_size, sampled.subset_seed, sampled.subset_total) == (4, 7, 12)
    assert sampled.subset_label == "subset: 4 of 12 items, seed 7"
    assert whole.subset_label == "" and len(whole.snapshot["items"]) == 12
    # Its snapshot, and so its payload, hold the sampled items only.
    assert len(sampled.snapshot["items"]) == 4
    assert len(eval_services.scoring_payload(sampled)["sentences"]) == 8
    # Asking again returns it.
    again = eval_services.evaluation_request(model=model, suites=[suite], subset=sample)
    assert again.existing == [sampled] and not again.created
    # The reversed upload samples the same items.
    other = eval_services.evaluation_request(
        model=model, suites=[reversed_suite], subset=sample
    ).evaluations[0]
    assert item_subjects(other.snapshot) == item_subjects(sampled.snapshot)
    # A size at or above the suite's is the whole suite: the run already asked for.
    full = eval_services.evaluation_request(
        model=model, suites=[suite], subset=subsets.Subset(50, 1)
    )
    assert full.evaluations == [whole]
    assert Evaluation.objects.count() == 3
    # The run's page says what it is.
    page = token_client(alice).get(f"/evaluations/{sampled.pk}/")
    assert "subset: 4 of 12 items, seed 7" in page.content.decode()


def test_a_pair_subset_keeps_each_pairs_sentences_together(
    trainer_series: ModelSeries, example_pairs, _private_broker
) -> None:
    model = trainer_series.members.order_by("position")[0].model
    total = pair_results.sample_units(example_pairs)
    assert total > 3
    outcome = pair_services.pair_evaluation_request(
        user=None, models=[model], pair_sets=[example_pairs], subset=subsets.Subset(3, 0)
    )
    run = outcome.evaluations[0]
    assert (run.subset_size, run.subset_total) == (3, total)
    data = pair_results.run_set_data(run)
    pairs = data.pairs()
    assert len(pairs) == 3 and all(len(sentences) == 2 for sentences in pairs.values())
    assert pair_services.pair_payload(run)["sentences"] == [s.sentence for s in data.sentences]
    whole = pair_services.pair_evaluation_request(
        user=None, models=[model], pair_sets=[example_pairs]
    ).evaluations[0]
    assert whole.pk != run.pk and PairEvaluation.objects.count() == 2


def test_a_probing_subset_samples_te_and_trains_on_as_much_less(
    alice, trainer_series: ModelSeries, _private_broker
) -> None:
    model = trainer_series.members.order_by("position")[0].model
    task = probing_task_import(
        source=EXAMPLES / "probing" / "subject_number_attractors.txt",
        name="attractors",
        owner=alice,
        task_type="custom",
    )
    counts = {part: sum(task.counts[part].values()) for part in ("tr", "va", "te")}
    size = counts["te"] // 3
    run = probing_services.probing_run_request(
        models=[model], task=task, subset=subsets.Subset(size, 0)
    ).runs[0]
    assert run.subset_label == f"subset: {size} of {counts['te']} te sentences, seed 0"
    payload = probing_services.probing_payload(run)
    kept = {part: payload["partition"].count(part) for part in ("tr", "va", "te")}
    assert kept["te"] == size
    # tr and va at about the same share, every label still there.
    for part in ("tr", "va"):
        assert 0 < kept[part] < counts[part]
        assert abs(kept[part] / counts[part] - size / counts["te"]) < 0.1
        labels = {payload["label"][i] for i, p in enumerate(payload["partition"]) if p == part}
        assert len(labels) == len(task.labels)
    assert probing_services.probing_payload(run) == payload  # fixed
    assert ProbingRun.objects.count() == 1


def test_boards_leave_subset_results_out(
    alice, trainer_series: ModelSeries, example_pairs, _private_broker
) -> None:
    first, second = [m.model for m in trainer_series.members.order_by("position")][:2]
    suite = suite_services.suite_import(
        source=big_suite("twelve", list(range(12))), owner=alice
    ).suite
    full = eval_services.evaluation_request(model=first, suites=[suite]).evaluations[0]
    part = eval_services.evaluation_request(
        model=second, suites=[suite], subset=subsets.Subset(4, 0)
    ).evaluations[0]
    Evaluation.objects.filter(pk=full.pk).update(status="done", accuracy=0.5)
    Evaluation.objects.filter(pk=part.pk).update(status="done", accuracy=0.9)
    board = leaderboard()
    assert [row.model.name for row in board.rows] == [first.name]
    pairs_full, pairs_part = (
        pair_services.pair_evaluation_request(
            user=None, models=[model], pair_sets=[example_pairs], subset=subset
        ).evaluations[0]
        for model, subset in ((first, None), (second, subsets.Subset(2, 0)))
    )
    PairEvaluation.objects.filter(pk__in=[pairs_full.pk, pairs_part.pk]).update(
        status="done", accuracy=0.75
    )
    assert [row.model.name for row in pair_leaderboard().rows] == [first.name]
    task = probing_task_import(
        source=EXAMPLES / "probing" / "subject_number_attractors.txt",
        name="attractors",
        owner=alice,
        task_type="custom",
    )
    probe_run = probing_services.probing_run_request(
        models=[second], task=task, subset=subsets.Subset(5, 0)
    ).runs[0]
    ProbingRun.objects.filter(pk=probe_run.pk).update(status="done", best_te=0.9, best_layer=0)
    assert probing_board().rows == []
    # The model's page lists its subset run, marked, but counts it in no mean.
    page = token_client(alice).get(second.get_absolute_url()).content.decode()
    assert "subset: 4 of 12 items, seed 0" in page


def test_a_series_evaluated_on_a_subset_draws_curves_marked_so(
    alice, trainer_series: ModelSeries, example_pairs, _private_broker
) -> None:
    suite = suite_services.suite_import(
        source=big_suite("twelve", list(range(12))), owner=alice
    ).suite
    client = token_client(alice)
    url = "/api/model-series/trainer/evaluate/"
    asked = post(
        client, url, {"suites": ["twelve"], "pair_sets": ["agreement"], "subset": {"size": 4}}
    )
    assert asked.status_code == 202, asked.content
    assert asked.json()["subset"] == {"size": 4, "seed": 0}
    runs = Evaluation.objects.filter(suite=suite)
    assert runs.count() == 3 and {r.subset_size for r in runs} == {4}
    for n, run in enumerate(runs.order_by("pk")):
        Evaluation.objects.filter(pk=run.pk).update(status="done", accuracy=0.25 * (n + 1))
    body = client.get("/api/model-series/trainer/curves/").json()
    by_kind = {c["kind"]: c for c in body["curves"]}
    assert set(by_kind) == {"suite", "pairs"}  # no curve of the whole benchmarks
    curve = by_kind["suite"]
    assert curve["subset"] == {"size": 4, "seed": 0, "of": 12}
    assert curve["label"] == "twelve (subset: 4 of 12 items, seed 0)"
    assert [p["accuracy"] for p in curve["points"]] == [0.25, 0.5, 0.75]
    # The whole suite asked too: its curve beside the subset's, with none of its points.
    assert post(client, url, {"suites": ["twelve"]}).status_code == 202
    body = client.get("/api/model-series/trainer/curves/").json()
    suites_curves = [c for c in body["curves"] if c["kind"] == "suite"]
    assert [c["subset"] is None for c in suites_curves] == [True, False]
    assert all(p["accuracy"] is None for p in suites_curves[0]["points"])
    page = client.get("/series/trainer/").content.decode()
    assert "subset: 4 of 12, seed 0" in page
    csv = client.get("/series/trainer/curves.csv").content.decode().splitlines()
    assert csv[0].endswith("subset_size,subset_seed,subset_of")
    assert any(line.endswith(",4,0,12") for line in csv[1:])


@pytest.mark.parametrize(
    ("subset", "where"),
    [
        (-1, "$.subset"),
        (0, "$.subset"),
        (10**12, "$.subset"),
        (2.5, "$.subset"),
        ("200", "$.subset"),
        (True, "$.subset"),
        ([200], "$.subset"),
        ({"size": -3}, "$.subset.size"),
        ({"size": "ten"}, "$.subset.size"),
        ({"seed": 1}, "$.subset.size"),
        ({"size": 4, "seed": -1}, "$.subset.seed"),
        ({"size": 4, "seed": 2**40}, "$.subset.seed"),
        ({"size": 4, "seed": 1.5}, "$.subset.seed"),
        ({"size": 4, "sample": 1}, "$.subset.sample"),
    ],
)
def test_hostile_subsets_are_refused_where_they_are_wrong(
    alice, trainer_series: ModelSeries, subset: Any, where: str
) -> None:
    suite_services.suite_import(source=big_suite("twelve", list(range(12))), owner=alice)
    response = post(
        token_client(alice),
        "/api/model-series/trainer/evaluate/",
        {"suites": ["twelve"], "subset": subset},
    )
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [e["path"] for e in errors] == [where], errors
    assert errors[0]["message"]
    assert Evaluation.objects.count() == 0
    assert ModelSeries.objects.get(name="trainer").samples == []


def test_the_series_evaluate_form_takes_a_subset_size_and_seed(
    alice, alice_client, trainer_series: ModelSeries, _private_broker
) -> None:
    suite = suite_services.suite_import(
        source=big_suite("twelve", list(range(12))), owner=alice
    ).suite
    page = alice_client.get("/series/trainer/").content.decode()
    assert 'name="subset_size"' in page and 'name="subset_seed"' in page
    url = "/series/trainer/evaluate/"
    for fields, where in [
        ({"subset_size": "0"}, "subset_size"),
        ({"subset_size": "ten"}, "subset_size"),
        ({"subset_size": "4", "subset_seed": "-1"}, "subset_seed"),
        ({"subset_seed": "3"}, "subset_size"),
    ]:
        refused = alice_client.post_form(url, {"suites": ["twelve"], **fields})
        assert refused.status_code == 400, fields
        assert refused.context["form"].errors.get(where), (fields, refused.context["form"].errors)
    assert not Evaluation.objects.exists()
    assert ModelSeries.objects.get(name="trainer").samples == []

    done = alice_client.post_form(
        url, {"suites": ["twelve"], "subset_size": "4", "subset_seed": "7"}
    )
    assert done.status_code == 302, done.content
    runs = Evaluation.objects.filter(suite=suite)
    assert runs.count() == 3
    assert {(r.subset_size, r.subset_seed, r.subset_total) for r in runs} == {(4, 7, 12)}
    assert ModelSeries.objects.get(name="trainer").samples == [{"size": 4, "seed": 7}]
    followed = alice_client.get("/series/trainer/").content.decode()
    assert "each on a subset of 4 (seed 7)" in followed
    assert "subset: 4 of 12, seed 7" in followed

    whole = alice_client.post_form(url, {"suites": ["twelve"]})
    assert whole.status_code == 302
    assert Evaluation.objects.filter(suite=suite, subset_size=0).count() == 3
