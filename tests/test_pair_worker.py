"""Integration: minimal-pair evaluations through real Redis and a real Celery worker
process, on the project's example set, with a tiny causal and a tiny masked model: the
site's token table equals `minimal_pairs evaluate` on the same file and model, and its
stored accuracy equals `minimal_pairs analyze`'s by_cond."""

from __future__ import annotations

import json
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from evaluations import services
from evaluations.minimal_pairs.tokens import parse_predictions_tsv
from evaluations.models import PairEvaluation, PairSentenceTokens
from suites import pair_sets
from tests.conftest import EXAMPLES, BrowserClient
from tests.tiny_models import tiny_bert, tiny_gpt2  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EXAMPLE = EXAMPLES / "minimal_pairs" / "agreement_minimal_pairs.tsv"


def _wait(pk: int, timeout: float = 300) -> PairEvaluation:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = PairEvaluation.objects.get(pk=pk)
        if run.finished:
            return run
        time.sleep(0.5)
    raise AssertionError(f"minimal-pair run not finished after {timeout}s: {run.status}")


def _cli_tables(source: Path, tmp_path: Path) -> tuple[bytes, str]:
    """`minimal_pairs evaluate` then `analyze` (defaults) on the example set, one thread."""
    import torch

    pred = tmp_path / f"{source.name}.tsv"
    results = tmp_path / f"{source.name}-results.tsv"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        call_command("minimal_pairs", "evaluate", "--model", str(source), "--data", str(EXAMPLE),
                     "--out", str(pred), stdout=StringIO(), stderr=StringIO())  # fmt: skip
    finally:
        torch.set_num_threads(before)
    call_command("minimal_pairs", "analyze", "--pred", str(pred), "--data", str(EXAMPLE),
                 "--out", str(results), stdout=StringIO(), stderr=StringIO())  # fmt: skip
    return pred.read_bytes(), results.read_text()


def test_runs_on_a_real_worker_equal_the_command_line(  # type: ignore[no-untyped-def]
    redis_broker,
    workers,
    tiny_gpt2,  # noqa: F811
    tiny_bert,  # noqa: F811
    alice,
    tmp_path,
) -> None:
    pair_set = pair_sets.minimal_pair_set_import(
        data=EXAMPLE.read_bytes(), name="agreement", owner=None
    ).pair_set
    services.model_register(source=str(tiny_gpt2), name="tiny")
    services.model_register(source=str(tiny_bert), name="tinybert")
    # One thread in the worker, as in the command: the same arithmetic, bit for bit.
    workers(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    token, _ = Token.objects.get_or_create(user=alice)
    client = BrowserClient(HTTP_AUTHORIZATION=f"Token {token.key}")
    body = json.dumps({"models": ["tiny", "tinybert"], "sets": ["agreement"]})
    response = client.post("/api/pairs/evaluations/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    for row, source in zip(response.json(), (tiny_gpt2, tiny_bert), strict=True):
        run = _wait(row["id"])
        assert run.status == "done", run.error
        assert run.progress_done == run.progress_total == pair_set.sentence_count
        cli_pred, cli_results = _cli_tables(source, tmp_path)
        site = client.get(f"/api/pairs/evaluations/{run.pk}/tokens/?format=tsv")
        ours, theirs = parse_predictions_tsv(site.content), parse_predictions_tsv(cli_pred)
        for column in ("token", "sentid", "word"):
            assert getattr(ours, column) == getattr(theirs, column), column
        assert ours.wordpos.tolist() == theirs.wordpos.tolist()
        assert ours.punctuation.tolist() == theirs.punctuation.tolist()
        assert ours.surp.tolist() == theirs.surp.tolist()  # the same numbers, exactly
        assert ours.prob.tolist() == theirs.prob.tolist()
        # The stored accuracy is the command's by_cond under the default options.
        header, line = cli_results.splitlines()[:2]
        cli_acc = float(dict(zip(header.split("\t"), line.split("\t"), strict=True))["acc"])
        assert run.accuracy == cli_acc
        by_cond = client.get(f"/api/pairs/evaluations/{run.pk}/by_cond/?format=tsv")
        assert by_cond.content.decode().splitlines()[1:] == [
            # the model column holds the site's name instead of the source path
            line.replace(str(source), run.model.name)
            for line in cli_results.splitlines()[1:]
        ]
    # Asking again returns the runs; nothing is computed or stored again.
    again = client.post("/api/pairs/evaluations/", body, content_type="application/json")
    assert again.status_code == 200
    assert [r["id"] for r in again.json()] == [r["id"] for r in response.json()]
    assert PairEvaluation.objects.count() == 2
    assert PairSentenceTokens.objects.count() == 2 * pair_set.sentence_count
