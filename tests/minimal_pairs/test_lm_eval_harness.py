"""Integration: a pair set exported as an lm-eval task runs under the real harness
(lm-eval, the tiny local GPT-2, CPU, offline) and gives Gym's accuracy: under the
harness's convention (metric lm_eval: a leading space after the end-of-text token) the
same accuracy as Gym's run on a real worker, and without the leading space (metric
sentence) the same outcome pair by pair, with the same log-likelihoods."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from django.core.management import call_command

from evaluations.language_models import registry as model_registry
from evaluations.models import PairEvaluation
from suites.minimal_pairs import sets as pair_sets
from tests.celery_harness import wait_finished
from tests.conftest import token_client
from tests.lm_eval_harness import run_lm_eval

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PAIRS = [
    ("The keys to the cabinet are here.", "The keys to the cabinet is here."),
    ("No dog has ever barked.", "A dog has ever barked."),
    ("The author that the guards like laughs.", "The author that the guards like laugh."),
    ("Who did you see?", "Who did you see him?"),
    ("She herself left.", "She himself left."),
    ("The cats sleep.", "The cats sleeps."),
    ("Many people were fixing the car.", "Many people was fixing the car."),
    ("It is raining in the city today.", "It are raining in the city today."),
]
BLIMP = "".join(
    json.dumps({"sentence_good": good, "sentence_bad": bad, "pairID": str(i), "field": "x"}) + "\n"
    for i, (good, bad) in enumerate(PAIRS, start=1)
)


def _log_likelihoods(sample: dict[str, Any]) -> tuple[float, float]:
    (good, _), (bad, _) = (r[0] for r in sample["resps"])
    return float(good), float(bad)


def test_an_exported_task_under_the_harness_equals_gyms_runs(
    redis_broker, workers, tiny_gpt2, alice, tmp_path
) -> None:
    pair_set = pair_sets.minimal_pair_set_import(
        data=BLIMP, filename="agr.jsonl", name="agr", owner=alice
    ).pair_set
    assert pair_set.metric == "sentence"  # BLiMP's format: whole-sentence log probability
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    workers(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    client = token_client(alice)
    runs: dict[str, PairEvaluation] = {}
    expected: dict[str, list[float]] = {}
    for metric in ("lm_eval", "sentence"):
        body = json.dumps({"models": ["tiny"], "sets": ["agr"], "metric": metric})
        response = client.post("/api/pairs/evaluations/", body, content_type="application/json")
        assert response.status_code == 201, response.content
        (row,) = response.json()
        assert row["metric"] == metric
        run = wait_finished(PairEvaluation, row["id"], what="minimal-pair run")
        assert run.status == "done" and run.accuracy is not None, run.error
        runs[metric] = run

    for metric in ("lm_eval", "sentence"):
        folder = tmp_path / f"task-{metric}"
        call_command("export_lm_eval", set="agr", out=str(folder), metric=metric)
        harness = run_lm_eval(tiny_gpt2, folder, "gym_agr", tmp_path / f"out-{metric}", "pairID")[
            "gym_agr"
        ]
        assert harness["acc"] == pytest.approx(runs[metric].accuracy, abs=1e-12), metric
        by_pair = client.get(f"/api/pairs/evaluations/{runs[metric].pk}/by_pair/").json()
        assert by_pair["metric"] == metric
        gym = {
            row["pairid"]: row
            for row in (dict(zip(by_pair["columns"], r, strict=True)) for r in by_pair["rows"])
        }
        assert set(gym) == set(harness["samples"])
        expected[metric] = [gym[p]["expected"] for p in sorted(gym)]
        for pairid, sample in harness["samples"].items():
            good, bad = _log_likelihoods(sample)
            # Gym's whole-sentence surprisal is in bits; the harness's log-likelihood in nats.
            assert -gym[pairid]["expected"] * math.log(2) == pytest.approx(good, abs=1e-4)
            assert -gym[pairid]["unexpected"] * math.log(2) == pytest.approx(bad, abs=1e-4)
            assert bool(gym[pairid]["acc"]) == (good > bad), (metric, pairid)
    # The two conventions score different strings: no sentence has the same value.
    assert all(a != b for a, b in zip(expected["lm_eval"], expected["sentence"], strict=True))
