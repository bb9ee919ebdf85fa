"""A suite run asked for word-corrected region sums (`word_probability: "corrected"`):
through the API, a real Celery worker and the database, next to the ordinary run."""

from __future__ import annotations

import csv
import io
import json

import pytest

from evaluations import scoring
from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, ItemResult
from evaluations.syntaxgym import selectors
from evaluations.syntaxgym.exports import CORRECTED_SUM_COLUMN
from suites import formats
from suites.syntaxgym import services as suite_services
from tests.conftest import SHARED_DATA, token_client
from tests.syntaxgym.test_evaluation_worker import _wait

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SUITE = SHARED_DATA / "syntaxgym-2020" / "nextflow" / "number_src.json"


def test_a_corrected_run_is_its_own_run_named_everywhere(
    redis_broker, workers, tiny_gpt2, alice
) -> None:
    if not SUITE.is_file():
        pytest.skip("shared data not found")
    suite = suite_services.suite_import(source=SUITE.read_bytes(), owner=None).suite
    model_registry.model_register(source=str(tiny_gpt2), name="tiny", display_name="Tiny")
    workers()
    client = token_client(alice)

    def ask(**extra: str) -> list[int]:
        body = {"model": "tiny", "suites": [suite.name], **extra}
        response = client.post(
            "/api/evaluations/", json.dumps(body), content_type="application/json"
        )
        assert response.status_code in (200, 201), response.content
        return [e["id"] for e in response.json()]

    plain_ids = ask()
    corrected_ids = ask(word_probability="corrected")
    assert corrected_ids != plain_ids  # not the existing ordinary run
    assert ask(word_probability="corrected") == corrected_ids  # asked again: the same one
    bad = client.post(
        "/api/evaluations/",
        json.dumps({"model": "tiny", "suites": [suite.name], "word_probability": "words"}),
        content_type="application/json",
    )
    assert bad.status_code == 400
    plain, corrected = _wait([*plain_ids, *corrected_ids])
    assert (plain.status, corrected.status) == ("done", "done"), (plain.error, corrected.error)
    assert (plain.word_probability, corrected.word_probability) == ("tokens", "corrected")
    assert "word_probability" not in plain.diagnostics
    assert corrected.diagnostics["word_probability"] == "corrected"
    detail = client.get(f"/api/evaluations/{corrected.pk}/").json()
    assert detail["word_probability"] == "corrected"

    # Stored sums are what the engine gives with the option; the other metrics are the
    # ordinary run's.
    loaded = scoring.load_model(str(tiny_gpt2))
    keys = formats.sentences(corrected.snapshot)
    direct = scoring.score_sentences(
        loaded, [regions for _i, _c, regions in keys], word_probability="corrected"
    )
    ours = {r.item_number: r.values for r in ItemResult.objects.filter(evaluation=corrected)}
    theirs = {r.item_number: r.values for r in ItemResult.objects.filter(evaluation=plain)}
    differ = 0
    for (item, condition, _regions), score in zip(keys, direct, strict=True):
        got = ours[item][condition]
        assert got["sum"] == pytest.approx([r.metrics["sum"] for r in score.regions], abs=1e-3)
        assert got["mean"] == pytest.approx(theirs[item][condition]["mean"], abs=1e-3)
        differ += got["sum"] != pytest.approx(theirs[item][condition]["sum"], abs=1e-3)
    assert differ > 0

    # The leaderboard and the suite page read the ordinary run only.
    assert [s.evaluation_id for s in selectors.suite_results(suite)] == [plain.pk]

    # The result page says so; the ordinary run's does not.
    page = client.get(f"/evaluations/{corrected.pk}/results/").content.decode()
    assert 'data-word-probability="corrected"' in page
    assert (
        "data-word-probability"
        not in client.get(f"/evaluations/{plain.pk}/results/").content.decode()
    )

    # Exports name it: the JSON's results and the CSV's sum column.
    document = client.get(f"/evaluations/{corrected.pk}/results.json").json()
    assert document["results"]["word_probability"] == "corrected"
    assert (
        "word_probability"
        not in client.get(f"/evaluations/{plain.pk}/results.json").json()["results"]
    )
    table = client.get(f"/evaluations/{corrected.pk}/results.csv").content.decode()
    header = next(csv.reader(io.StringIO(table)))
    assert CORRECTED_SUM_COLUMN in header and "sum" not in header
    plain_table = client.get(f"/evaluations/{plain.pk}/results.csv").content.decode()
    assert "sum" in next(csv.reader(io.StringIO(plain_table)))


def test_the_request_form_takes_the_option(redis_broker, tiny_gpt2, alice, alice_client) -> None:
    if not SUITE.is_file():
        pytest.skip("shared data not found")
    suite = suite_services.suite_import(source=SUITE.read_bytes(), owner=alice).suite
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    page = alice_client.get("/evaluations/new/").content.decode()
    assert 'name="word_probability" value="corrected"' in page
    # Left out (older forms and links): the usual sums.
    response = alice_client.post_form(
        "/evaluations/new/", {"model": "tiny", "suites": [suite.name]}
    )
    assert response.status_code == 302
    response = alice_client.post_form(
        "/evaluations/new/",
        {"model": "tiny", "suites": [suite.name], "word_probability": "corrected"},
    )
    assert response.status_code == 302
    assert sorted(Evaluation.objects.values_list("word_probability", flat=True)) == [
        "corrected",
        "tokens",
    ]
