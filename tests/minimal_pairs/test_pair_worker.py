"""Integration: minimal-pair evaluations through real Redis and a real Celery worker
process, on the project's example set, with a tiny causal and a tiny masked model: the
site's token table equals `minimal_pairs evaluate` on the same file and model, and its
stored accuracy equals `minimal_pairs analyze`'s by_cond."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evaluations.language_models import registry as model_registry
from evaluations.minimal_pairs.tokens import parse_predictions_tsv
from evaluations.models import PairEvaluation, PairSentenceTokens
from suites.minimal_pairs import sets as pair_sets
from tests.celery_harness import wait_finished
from tests.conftest import token_client
from tests.minimal_pairs.conftest import EXAMPLE, evaluate_and_analyze

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _wait(pk: int) -> PairEvaluation:
    return wait_finished(PairEvaluation, pk, what="minimal-pair run")


def _cli_tables(source: Path, tmp_path: Path) -> tuple[bytes, str]:
    """`minimal_pairs evaluate` then `analyze` (defaults) on the example set, one thread."""
    pred, results = evaluate_and_analyze(source, tmp_path, source.name)
    return pred.read_bytes(), results.read_text()


def test_runs_on_a_real_worker_equal_the_command_line(
    redis_broker,
    workers,
    tiny_gpt2,  # noqa: F811
    tiny_bert,  # noqa: F811
    alice,
    example_pairs,
    tmp_path,
) -> None:
    second = pair_sets.minimal_pair_set_import(
        data=EXAMPLE.read_text().replace("cabinet", "drawer"), name="drawers", owner=None
    ).pair_set
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    model_registry.model_register(source=str(tiny_bert), name="tinybert")
    # One thread in the worker, as in the command: the same arithmetic, bit for bit.
    workers(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    client = token_client(alice)
    body = json.dumps({"models": ["tiny", "tinybert"], "sets": ["agreement", "drawers"]})
    response = client.post("/api/pairs/evaluations/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    # Runs come set by set, model by model; a model's small sets share one task.
    runs = response.json()
    assert [(r["pair_set"], r["model"]) for r in runs] == [
        ("agreement", "tiny"), ("agreement", "tinybert"), ("drawers", "tiny"),
        ("drawers", "tinybert")]  # fmt: skip
    for row in runs[2:]:
        run = _wait(row["id"])
        assert run.status == "done" and run.accuracy is not None, run.error
        assert PairSentenceTokens.objects.filter(evaluation=run).count() == second.sentence_count
    for row, source in zip(runs[:2], (tiny_gpt2, tiny_bert), strict=True):
        run = _wait(row["id"])
        assert run.status == "done", run.error
        assert run.progress_done == run.progress_total == example_pairs.sentence_count
        cli_pred, cli_results = _cli_tables(source, tmp_path)
        site = client.get(f"/api/pairs/evaluations/{run.pk}/tokens/?format=tsv")
        ours, theirs = parse_predictions_tsv(site.content), parse_predictions_tsv(cli_pred)
        # The tokenizer column names a local tokenizer within its model folder: no page or
        # export shows the server's paths.
        (tokenizer,) = set(ours.tokenizer)
        assert tokenizer.endswith(source.name) and not tokenizer.startswith("/"), tokenizer
        assert str(source.parent).encode() not in site.content
        for column in ("token", "sentid", "word"):
            assert getattr(ours, column) == getattr(theirs, column), column
        assert ours.wordpos.tolist() == theirs.wordpos.tolist()
        assert ours.punctuation.tolist() == theirs.punctuation.tolist()
        # The same numbers, within float32 noise: the worker scored this set in one engine
        # call with the other set (other batches), as SCORING.md allows (1e-4 bits).
        assert np.allclose(ours.surp, theirs.surp, rtol=0, atol=1e-4)
        assert np.allclose(ours.prob, theirs.prob, rtol=1e-4, atol=0)
        # The stored accuracy and the by_cond table are the command's (default options).
        by_cond = client.get(f"/api/pairs/evaluations/{run.pk}/by_cond/?format=tsv")
        site_rows = [line.split("\t") for line in by_cond.content.decode().splitlines()]
        cli_rows = [line.split("\t") for line in cli_results.splitlines()]
        assert site_rows[0] == cli_rows[0]
        (site_row,), (cli_row,) = site_rows[1:], cli_rows[1:]
        # the model column holds the site's name instead of the source path
        assert (site_row[1], cli_row[1]) == (run.model.name, str(source))
        assert run.accuracy == float(cli_row[2]) == float(site_row[2])
        assert np.allclose([float(v) for v in site_row[3:]], [float(v) for v in cli_row[3:]],
                           rtol=0, atol=1e-4)  # fmt: skip
    # Asking again returns the runs; nothing is computed or stored again.
    again = client.post("/api/pairs/evaluations/", body, content_type="application/json")
    assert again.status_code == 200
    assert [r["id"] for r in again.json()] == [r["id"] for r in response.json()]
    assert PairEvaluation.objects.count() == 4
    assert PairSentenceTokens.objects.count() == 2 * (
        example_pairs.sentence_count + second.sentence_count
    )
