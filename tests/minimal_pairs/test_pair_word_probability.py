"""Minimal-pair runs on the site asked for word-corrected surprisals
(`word_probability: "corrected"`): through the API, a real Celery worker and the
database, next to the ordinary run, against `minimal_pairs evaluate --word-probability
corrected` on the same model and file; and, without a worker, the request (service, API,
page), the payload and the imports."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from evaluations.language_models import registry as model_registry
from evaluations.minimal_pairs import comparisons as pair_comparisons
from evaluations.minimal_pairs import selectors as pair_selectors
from evaluations.minimal_pairs import services as pair_services
from evaluations.minimal_pairs.tokens import parse_predictions_tsv
from evaluations.models import PairEvaluation
from tests.conftest import signed_in_client, token_client
from tests.minimal_pairs.conftest import evaluate_and_analyze
from tests.minimal_pairs.test_pair_evaluations import asked_run, worker_results
from tests.minimal_pairs.test_pair_worker import _wait

pytestmark = pytest.mark.django_db(transaction=True)


def _post(client, body: object):
    return client.post("/api/pairs/evaluations/", json.dumps(body), content_type="application/json")


def _cli(source: Path, tmp_path: Path, *flags: str) -> tuple[bytes, list[dict[str, str]]]:
    """`minimal_pairs evaluate` (one thread, as the worker) then `analyze` with word sums:
    the token table and the by_word rows."""
    name = "corrected" if flags else "plain"
    summed = ("--save", "by_word", "--word-summary", "sum")
    pred, _results = evaluate_and_analyze(source, tmp_path, name, flags=flags, analyze=summed)
    by_word = (tmp_path / f"{name}-results_byword.tsv").read_text()
    return pred.read_bytes(), list(csv.DictReader(io.StringIO(by_word), delimiter="\t"))


def _rows(tsv: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(tsv), delimiter="\t"))


def _same_words(site: list[dict[str, str]], cli: list[dict[str, str]]) -> int:
    """Asserts the site's by_word rows are the command's (the model column aside, the
    numbers within the engine's batching tolerance); returns how many numbers there were."""
    assert len(site) == len(cli) > 0
    compared = 0
    for ours, theirs in zip(site, cli, strict=True):
        assert set(ours) - {"word_probability"} == set(theirs)
        for column, value in theirs.items():
            if column == "model":
                continue
            try:
                number = float(value)
            except ValueError:
                assert ours[column] == value, column
                continue
            if np.isnan(number):
                assert np.isnan(float(ours[column])), column
            else:
                assert float(ours[column]) == pytest.approx(number, abs=1e-3), column
                compared += 1
    return compared


@pytest.mark.integration
def test_a_corrected_run_on_a_real_worker_equals_the_command_line(
    redis_broker,
    workers,
    tiny_gpt2,  # noqa: F811
    alice,
    example_pairs,
    tmp_path,
) -> None:
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    workers(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    client = token_client(alice)
    body = {"models": ["tiny"], "sets": ["agreement"]}
    plain_response = _post(client, body)
    corrected_response = _post(client, {**body, "word_probability": "corrected"})
    assert (plain_response.status_code, corrected_response.status_code) == (201, 201)
    ((plain_row,), (corrected_row,)) = plain_response.json(), corrected_response.json()
    assert plain_row["id"] != corrected_row["id"]  # not the existing ordinary run
    assert (plain_row["word_probability"], corrected_row["word_probability"]) == (
        "tokens", "corrected")  # fmt: skip
    again = _post(client, {**body, "word_probability": "corrected"})
    assert again.status_code == 200 and again.json()[0]["id"] == corrected_row["id"]
    bad = _post(client, {**body, "word_probability": "words"})
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["path"] == "$.word_probability"
    plain, corrected = _wait(plain_row["id"]), _wait(corrected_row["id"])
    assert (plain.status, corrected.status) == ("done", "done"), (plain.error, corrected.error)
    assert "word_probability" not in plain.diagnostics
    assert corrected.diagnostics["word_probability"] == "corrected"
    detail = client.get(f"/api/pairs/evaluations/{corrected.pk}/").json()
    assert detail["word_probability"] == "corrected"

    # The stored tokens are the command's corrected table, the ordinary run's its plain one.
    cli_corrected, cli_corrected_words = _cli(
        tiny_gpt2, tmp_path, "--word-probability", "corrected"
    )
    cli_plain, cli_plain_words = _cli(tiny_gpt2, tmp_path)
    for run, cli_pred in ((plain, cli_plain), (corrected, cli_corrected)):
        site = client.get(f"/api/pairs/evaluations/{run.pk}/tokens/?format=tsv").content
        ours, theirs = parse_predictions_tsv(site), parse_predictions_tsv(cli_pred)
        assert ours.token == theirs.token and ours.word == theirs.word
        assert ours.wordpos.tolist() == theirs.wordpos.tolist()
        assert np.allclose(ours.surp, theirs.surp, rtol=0, atol=1e-4, equal_nan=True)
        # The file says what it holds, as the command's does.
        header = site.decode().splitlines()[0].split("\t")
        assert (header[-1] == "word_probability") == (run == corrected)
    assert not np.allclose(
        parse_predictions_tsv(cli_plain).surp,
        parse_predictions_tsv(cli_corrected).surp,
        atol=1e-3,
        equal_nan=True,
    )  # the correction changed something

    # Word values (word sums) are the command's corrected ones; the ordinary run's the
    # command's ordinary ones.
    for run, cli_words in ((corrected, cli_corrected_words), (plain, cli_plain_words)):
        table = client.get(
            f"/api/pairs/evaluations/{run.pk}/by_word/?format=tsv&word_summary=sum"
        ).content.decode()
        # pandas' unnamed index column, as the command writes it
        assert _same_words(_rows(table), cli_words) > 0
    named = client.get(f"/api/pairs/evaluations/{corrected.pk}/by_word/?word_summary=sum").json()
    assert named["word_probability"] == "corrected" and named["columns"][-1] != "word_probability"
    by_word = client.get(f"/api/pairs/evaluations/{plain.pk}/by_word/").json()
    assert "word_probability" not in by_word
    assert "word_probability" in client.get(f"/api/pairs/evaluations/{corrected.pk}/tokens/").json()

    # The leaderboard, the set and model pages' lists and the comparisons read the
    # ordinary run only.
    board = pair_selectors.pair_leaderboard()
    assert [cell[1] for row in board.rows for cell in row.cells.values()] == [plain.pk]
    assert [s.evaluation_id for s in pair_selectors.pair_set_results(example_pairs)] == [plain.pk]
    assert [
        pk for _m, pk in pair_comparisons.current_results(example_pairs, include_hidden=True)
    ] == [plain.pk]

    # The result page says so, and does not offer to compare it; the ordinary run's page
    # is as before.
    page = client.get(f"/pairs/evaluations/{corrected.pk}/").content.decode()
    assert 'data-word-probability="corrected"' in page and "data-compare-link" not in page
    assert "__corrected_byword.tsv" in page
    plain_page = client.get(f"/pairs/evaluations/{plain.pk}/").content.decode()
    assert "data-word-probability" not in plain_page and "data-compare-link" in plain_page


# ---------------------------------------------------------------- without a worker


def test_the_payload_carries_the_option_only_when_corrected(
    alice, pair_set, model, anon_client
) -> None:
    plain = pair_services.pair_evaluation_request(
        user=alice, models=[model], pair_sets=[pair_set]
    ).evaluations[0]
    corrected = pair_services.pair_evaluation_request(
        user=alice, models=[model], pair_sets=[pair_set], word_probability="corrected"
    ).evaluations[0]
    assert plain.pk != corrected.pk and corrected.word_probability == "corrected"
    assert set(pair_services.pair_payload(plain)) == {"model", "sentences"}
    assert pair_services.pair_payload(corrected)["word_probability"] == "corrected"
    assert (
        pair_services.pair_payload(corrected)["sentences"]
        == (pair_services.pair_payload(plain)["sentences"])
    )
    listed = anon_client.get("/api/pairs/evaluations/?word_probability=corrected").json()
    assert [row["id"] for row in listed["results"]] == [corrected.pk]
    bad = anon_client.get("/api/pairs/evaluations/?word_probability=words")
    assert bad.status_code == 400 and "word_probability" in bad.json()["errors"][0]["path"]
    with pytest.raises(pair_services.PairRequestInvalid, match="word_probability"):
        pair_services.pair_evaluation_request(
            user=alice, models=[model], pair_sets=[pair_set], word_probability="words"
        )


def test_stored_results_of_a_corrected_run_are_named_in_its_exports(
    alice, pair_set, model, anon_client
) -> None:
    run = asked_run(alice, pair_set, model, word_probability="corrected")
    results = {**worker_results(pair_set), "diagnostics": {"word_probability": "corrected"}}
    assert pair_services.pair_results_store(run_id=run.pk, attempt=run.attempt, results=results)
    for table in ("tokens", "by_word", "by_pair", "by_cond"):
        path = f"/api/pairs/evaluations/{run.pk}/{table}/"
        assert anon_client.get(path).json()["word_probability"] == "corrected", table
        tsv = anon_client.get(path + "?format=tsv").content.decode().splitlines()
        assert tsv[0].split("\t")[-1] == "word_probability", table
        assert {line.split("\t")[-1] for line in tsv[1:]} == {"corrected"}, table
    # The page links to word sums (the default mean spreads the correction), and its
    # accuracy under the defaults is no leaderboard's.
    page = anon_client.get(f"/pairs/evaluations/{run.pk}/").content.decode()
    assert "data-word-sum-link" in page
    summed = anon_client.get(f"/pairs/evaluations/{run.pk}/?word_summary=sum").content.decode()
    assert "data-word-sum-link" not in summed and "data-options-note" in summed
    assert "stored accuracy" in summed and "leaderboard's accuracy" not in summed


def test_a_model_the_correction_does_not_apply_to_is_named_as_such(
    alice, pair_set, model, anon_client
) -> None:
    run = asked_run(alice, pair_set, model, word_probability="corrected")
    why = "a masked LM"
    results = {
        **worker_results(pair_set),
        "diagnostics": {"word_probability": "tokens", "word_boundary": why},
    }
    assert pair_services.pair_results_store(run_id=run.pk, attempt=run.attempt, results=results)
    assert (
        anon_client.get(f"/api/pairs/evaluations/{run.pk}/tokens/").json()["word_probability"]
        == "tokens"
    )
    page = anon_client.get(f"/pairs/evaluations/{run.pk}/").content.decode()
    assert 'data-word-probability="tokens"' in page and why in page


def test_the_request_page_takes_the_option(alice, pair_set, model) -> None:
    client = signed_in_client(alice)
    form = client.get("/pairs/evaluations/new/").content.decode()
    assert 'name="word_probability"' in form and 'value="corrected"' in form
    asked = {"models": ["tiny"], "pair_sets": ["small"]}
    assert client.post_form("/pairs/evaluations/new/", asked).status_code == 302
    corrected = client.post_form(
        "/pairs/evaluations/new/", {**asked, "word_probability": "corrected"}
    )
    assert corrected.status_code == 302
    assert sorted(PairEvaluation.objects.values_list("word_probability", flat=True)) == [
        "corrected",
        "tokens",
    ]
    bad = client.post_form("/pairs/evaluations/new/", {**asked, "word_probability": "words"})
    assert bad.status_code == 400 and PairEvaluation.objects.count() == 2


def test_imported_predictions_are_ordinary_runs_beside_a_corrected_one(
    alice, pair_set, model
) -> None:
    pair_services.pair_evaluation_request(
        user=alice, models=[model], pair_sets=[pair_set], word_probability="corrected"
    )
    rows = ["token\tsentid\tword\twordpos\tmodel\ttokenizer\tpunctuation\tprob\tsurp"]
    for sentid, sentence in pair_set.sentences.values_list("sentid", "sentence"):
        for position, word in enumerate(sentence.split(" ")):
            rows.append(f"{word}\t{sentid}\t{word}\t{position}\tm\tt\tFalse\t0.5\t1.0")
    imported = pair_services.pair_predictions_import(
        pair_set=pair_set, model_name="tiny", data="\n".join(rows) + "\n", user=alice
    )
    assert imported.word_probability == "tokens" and imported.origin == "imported"
