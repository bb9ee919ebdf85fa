"""Integration: a test suite exported as lm-eval tasks runs under the real harness
(lm-eval, the tiny local GPT-2, CPU, offline) and gives Gym's figures. Under the
convention the export reproduces by default (the sentence after the end-of-text token, no
leading space) each task's accuracy equals Gym's accuracy of its prediction on a real
worker (and, for a suite with one prediction, the suite's), each document's outcome is
the item's, and each choice's log-likelihood is the condition's region sum."""

from __future__ import annotations

import io
import json
import math
import zipfile
from typing import Any

import pytest
from django.core.management import call_command

from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, ItemResult, PredictionResult
from suites.syntaxgym import services as suite_services
from tests.celery_harness import wait_finished
from tests.conftest import token_client
from tests.lm_eval_harness import run_lm_eval

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ITEMS = [
    ("The keys to the cabinet", "are", "is", "am", "on the table ."),
    ("The author that the guards like", "laughs", "laugh", "laughing", "at night ."),
    ("The cats in the house", "sleep", "sleeps", "sleeping", "all day ."),
    ("Many people", "were", "was", "be", "fixing the car ."),
    ("It", "is", "are", "be", "raining in the city today ."),
    ("The dogs near the gate", "bark", "barks", "barking", "loudly ."),
]
WHOLE = "(1;%{c}%) + (2;%{c}%) + (3;%{c}%)"


def suite(name: str, predictions: list[str]) -> dict[str, Any]:
    def condition(name: str, subject: str, verb: str, rest: str) -> dict[str, Any]:
        regions = [subject, verb, rest]
        return {
            "condition_name": name,
            "regions": [{"region_number": i + 1, "content": r} for i, r in enumerate(regions)],
        }

    return {
        "meta": {"name": name, "metric": "sum"},
        "region_meta": {"1": "subject", "2": "verb", "3": "rest"},
        "predictions": [{"type": "formula", "formula": p} for p in predictions],
        "items": [
            {
                "item_number": n,
                "conditions": [
                    condition("good", subject, good, rest),
                    condition("bad", subject, bad, rest),
                    condition("odd", subject, odd, rest),
                ],
            }
            for n, (subject, good, bad, odd, rest) in enumerate(ITEMS, start=1)
        ],
    }


def test_exported_suites_under_the_harness_equal_gyms_evaluations(
    redis_broker, workers, tiny_gpt2, alice, tmp_path
) -> None:
    # One prediction (three choices: a conjunction preferring one condition, written
    # with region sums and with a whole-sentence reference), and a suite with two.
    one = suite_services.suite_import(
        source=suite(
            "agree_one",
            [f"(({WHOLE.format(c='good')}) < ({WHOLE.format(c='bad')})) & "
             "((*;%good%) < (*;%odd%))"],
        ),
        owner=alice,
    ).suite  # fmt: skip
    two = suite_services.suite_import(
        source=suite("agree_two", ["(*;%bad%) > (*;%good%)", "(*;%odd%) > (*;%bad%)"]),
        owner=alice,
    ).suite
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    workers(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    client = token_client(alice)
    body = json.dumps({"model": "tiny", "suites": [one.name, two.name]})
    response = client.post("/api/evaluations/", body, content_type="application/json")
    assert response.status_code in (200, 201), response.content
    runs = {
        e.suite.name: wait_finished(Evaluation, e.pk, what="suite evaluation")
        for e in Evaluation.objects.select_related("suite")
    }
    assert all(r.status == "done" for r in runs.values()), [r.error for r in runs.values()]

    # The API's zip for one, unpacked where lm_eval runs; the command's folder for two.
    work = tmp_path / "work"
    zipped = client.get(f"/api/suites/{one.name}/export/?as=lm-eval")
    assert zipped.status_code == 200
    zipfile.ZipFile(io.BytesIO(zipped.content)).extractall(work)
    call_command("export_lm_eval", suite=two.name, out=str(work / "two"))
    tasks = "gym_agree_one,gym_agree_two_p1,gym_agree_two_p2"
    harness = run_lm_eval(tiny_gpt2, work, tasks, tmp_path / "out", "item_number")

    assert harness["gym_agree_one"]["acc"] == pytest.approx(runs["agree_one"].accuracy, abs=1e-12)
    expected = {
        "gym_agree_one": (runs["agree_one"], 0, ("good", "bad", "odd")),
        "gym_agree_two_p1": (runs["agree_two"], 0, ("good", "bad")),
        "gym_agree_two_p2": (runs["agree_two"], 1, ("bad", "odd")),
    }
    outcomes = set()
    for task, (run, position, conditions) in expected.items():
        prediction = PredictionResult.objects.get(evaluation=run, position=position)
        assert harness[task]["acc"] == pytest.approx(prediction.accuracy, abs=1e-12), task
        items = {i.item_number: i for i in ItemResult.objects.filter(evaluation=run)}
        assert set(items) == set(harness[task]["samples"])
        for number, sample in harness[task]["samples"].items():
            assert sample["doc"]["conditions"] == list(conditions)
            likelihoods = [float(r[0][0]) for r in sample["resps"]]
            for condition, likelihood in zip(conditions, likelihoods, strict=True):
                bits = sum(items[number].values[condition]["sum"])
                # Gym's region sums are in bits; the harness's log-likelihood in nats.
                assert -bits * math.log(2) == pytest.approx(likelihood, abs=1e-4)
            assert bool(sample["acc"]) == items[number].outcomes[position], (task, number)
            outcomes.add(items[number].outcomes[position])
    assert outcomes == {True, False}  # the tiny model gets some right and some wrong
