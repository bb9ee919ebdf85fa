"""The probing leaderboard shows the seeds' spread beside each mean: the standard
deviation of te accuracy across seeds at the layer chosen on va, on the page, in the API
and in the CSV. Runs are stored rows here (the worker's own numbers have their tests in
test_probing_controls); the spread is worked out by hand from the seeds' accuracies."""

from __future__ import annotations

import csv
import io
import math
import statistics

import pytest

from evaluations.models import LanguageModel, ProbingLayerResult, ProbingRun
from suites.models import ProbingTask
from suites.probing.services import probing_task_import

pytestmark = pytest.mark.django_db

DATA = "tr\tNN\tthe dog barks .\ntr\tNNS\tthe dogs bark .\nva\tNN\ta cat .\nte\tNNS\tcats .\n"
# Three seeds' te accuracies at each of two layers; layer 1 is chosen on va.
SEED_TE = {0: [0.5, 0.6, 0.7], 1: [0.6, 0.7, 0.8]}


@pytest.fixture
def task(alice) -> ProbingTask:
    return probing_task_import(source=DATA, name="toy", owner=alice, task_type="subj_number")


def stored_run(task: ProbingTask, name: str, seeds: int) -> ProbingRun:
    model = LanguageModel.objects.create(name=name, display_name=name, source=f"{name}-src")
    run = ProbingRun.objects.create(
        model=model,
        task=task,
        content_hash=task.content_hash,
        status="done",
        seeds=seeds,
        best_layer=1,
        best_va=0.9,
        best_te=statistics.mean(SEED_TE[1]) if seeds > 1 else 0.75,
        baselines={},
        confusion={},
    )
    for layer, accuracies in SEED_TE.items():
        stats = {"seed_te": accuracies, "te_std": statistics.stdev(accuracies)} if seeds > 1 else {}
        ProbingLayerResult.objects.create(
            run=run,
            layer=layer,
            va_accuracy=0.8,
            te_accuracy=statistics.mean(accuracies),
            stats=stats,
        )
    return run


def test_board_shows_each_cells_spread(task, anon_client) -> None:
    stored_run(task, "seeded", seeds=3)
    stored_run(task, "single", seeds=1)
    # Layer 1: mean 0.7, deviations ±0.1 and 0: √((0.01 + 0 + 0.01) / 2) = 0.1.
    by_hand = math.sqrt((0.1**2 + 0.0 + 0.1**2) / 2)
    data = anon_client.get("/api/leaderboard/probing/").json()
    cells = {row["model"]: row["cells"]["toy"] for row in data["rows"]}
    assert cells["seeded"]["seeds"] == 3
    assert cells["seeded"]["te_sd"] == pytest.approx(by_hand, abs=1e-12)
    assert cells["seeded"]["te_accuracy"] == pytest.approx(0.7)
    assert (cells["single"]["seeds"], cells["single"]["te_sd"]) == (1, None)

    page = anon_client.get("/leaderboard/").content.decode()
    section = page[page.index('id="probing"') :]
    assert section.count("data-te-sd") == 1
    assert '<span class="lb-cov" data-te-sd>± 0.100</span>' in section

    rows = list(
        csv.reader(io.StringIO(anon_client.get("/leaderboard/probing.csv").content.decode()))
    )
    assert rows[0][3:] == ["toy", "toy:layer", "toy:selectivity", "toy:seeds", "toy:te_sd"]
    by_model = {row[0]: row for row in rows[1:]}
    assert by_model["seeded"][6] == "3"
    assert float(by_model["seeded"][7]) == pytest.approx(by_hand, abs=1e-12)
    assert by_model["single"][6:8] == ["1", ""]
    assert by_model["baseline:majority"][4:8] == ["", "", "", ""]
