"""Minimal-pair evaluations on the site, without a worker: asking for runs (service, API,
set page), the store (one transaction, exactly once), outdated results, cancel / retry
permissions, the four tables through the API, and importing NLPScholar's own predictions
(page, API, command) with every error located and nothing saved on error."""

from __future__ import annotations

import io
import json
import math
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from evaluations import token_data
from evaluations.minimal_pairs import services as pair_services
from evaluations.minimal_pairs.tokens import parse_predictions_tsv
from evaluations.models import Evaluation, LanguageModel, PairEvaluation, PairSentenceTokens
from evaluations.runs import lifecycle as runs
from evaluations.syntaxgym import services
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet
from suites.syntaxgym import services as suite_services
from tests.celery_harness import broker
from tests.conftest import (
    EXAMPLES,
    SHARED_DATA,
    signed_in_client,
    small_suite,
    token_client,
)
from tests.minimal_pairs.conftest import DATA

# Transactional: runs are sent to the queue when their rows are committed.
pytestmark = pytest.mark.django_db(transaction=True)

NLPSCHOLAR = SHARED_DATA / "nlpscholar"
SURPRISALS = {"1": [1.0, 2.0, 3.0, 4.0], "2": [1.0, 2.0, 5.0, 4.0], "3": [2.0, 1.0, 6.0],
              "4": [1.0, 1.0, 1.0]}  # fmt: skip


class Tok:
    def __init__(self, text: str, start: int, end: int, surprisal: float) -> None:
        self.text, self.start, self.end, self.surprisal = text, start, end, surprisal


def word_tokens(sentence: str, surprisals: list[float]) -> dict:
    """One token per whitespace word, as a worker packs them."""
    tokens, start = [], 0
    for word, surp in zip(sentence.split(" "), surprisals, strict=True):
        tokens.append(
            Tok(("Ġ" if start else "") + word, max(start - 1, 0), start + len(word), surp)
        )
        start += len(word) + 1
    return token_data.pack_tokens(tokens)


def worker_results(pair_set: MinimalPairSet) -> dict:
    rows = list(pair_set.sentences.order_by("position").values_list("sentid", "sentence"))
    return {
        "sentences": [word_tokens(text, SURPRISALS[sentid]) for sentid, text in rows],
        "diagnostics": {"batches": 1},
        "model_info": {"kind": "causal", "tokenizer": "tiny-tok", "n_params": 1234},
    }


def post_json(client, path: str, body: object):
    return client.post(path, json.dumps(body), content_type="application/json")


def asked_run(
    user, pair_set: MinimalPairSet, model: LanguageModel, *, word_probability: str = "tokens"
) -> PairEvaluation:
    """The one run of `model` on `pair_set` that `user` asks for."""
    (run,) = pair_services.pair_evaluation_request(
        user=user, models=[model], pair_sets=[pair_set], word_probability=word_probability
    ).evaluations
    return run


def done_run(alice, pair_set, model) -> PairEvaluation:
    run = asked_run(alice, pair_set, model)
    pair_services.pair_results_store(run_id=run.pk, attempt=1, results=worker_results(pair_set))
    return run


# ---------------------------------------------------------------- request and store


def test_one_run_per_model_set_and_content(alice, pair_set, model) -> None:
    other = LanguageModel.objects.create(name="other", display_name="Other", source="other/m")
    outcome = pair_services.pair_evaluation_request(
        user=alice, models=[model, other, model], pair_sets=[pair_set]
    )
    assert len(outcome.created) == 2 and not outcome.existing
    first = outcome.evaluations[0]
    assert (first.status, first.enqueued, first.progress_total) == ("queued", True, 4)
    assert first.requested_by == alice and first.content_hash == pair_set.content_hash
    payload = pair_services.pair_payload(first)
    assert payload["sentences"][2] == "no dog barks" and len(payload["sentences"]) == 4
    assert payload["model"] == {"source": "tiny/model", "revision": ""}
    again = pair_services.pair_evaluation_request(user=alice, models=[model], pair_sets=[pair_set])
    assert again.existing == [first] and not again.created
    assert PairEvaluation.objects.count() == 2


def test_store_writes_once_and_derives_the_default_accuracy(alice, pair_set, model) -> None:
    run = asked_run(alice, pair_set, model)
    results = worker_results(pair_set)
    assert pair_services.pair_results_store(run_id=run.pk, attempt=1, results=results)
    run.refresh_from_db()
    # Pair 1 (ROI "are" 3 bits vs "is" 5): acc. Pair 2 (whole sentence 3 vs 1): not.
    assert (run.status, run.accuracy, run.ties, run.progress_done) == ("done", 0.5, 0, 4)
    assert run.model_info["tokenizer"] == "tiny-tok" and run.diagnostics == {"batches": 1}
    model.refresh_from_db()
    assert (model.kind, model.parameter_count) == ("causal", 1234)
    assert PairSentenceTokens.objects.filter(evaluation=run).count() == 4
    # A re-delivery, a stale attempt: nothing written.
    results["sentences"][0]["surp"][2] = 9.0
    assert not pair_services.pair_results_store(run_id=run.pk, attempt=1, results=results)
    assert not pair_services.pair_results_store(run_id=run.pk, attempt=2, results=results)
    stored = PairSentenceTokens.objects.get(evaluation=run, sentid="1").tokens
    assert stored["surp"][2] == 3.0 and PairSentenceTokens.objects.count() == 4


def test_results_that_do_not_fit_fail_the_run_with_a_reason(alice, pair_set, model) -> None:
    run = asked_run(alice, pair_set, model)
    results = worker_results(pair_set)
    results["sentences"][1]["surp"].append(1.0)
    assert not pair_services.pair_results_store(run_id=run.pk, attempt=1, results=results)
    run.refresh_from_db()
    assert run.status == "failed" and "tokens of sentence 2 are malformed" in run.error
    assert not PairSentenceTokens.objects.exists()


def test_changed_content_keeps_old_results_marked_outdated(alice, pair_set, model) -> None:
    run = done_run(alice, pair_set, model)
    MinimalPairSet.objects.filter(pk=pair_set.pk).update(content_hash="0" * 64)
    pair_set.refresh_from_db()
    run.refresh_from_db()
    assert run.outdated and run.status == "done" and run.accuracy == 0.5
    outcome = pair_services.pair_evaluation_request(
        user=alice, models=[model], pair_sets=[pair_set]
    )
    assert len(outcome.created) == 1 and outcome.created[0].pk != run.pk
    assert PairSentenceTokens.objects.filter(evaluation=run).count() == 4
    # Content changed while a run was queued: its results are refused with the reason.
    (late,) = outcome.created
    MinimalPairSet.objects.filter(pk=pair_set.pk).update(content_hash="1" * 64)
    assert not pair_services.pair_results_store(
        run_id=late.pk, attempt=1, results=worker_results(pair_set)
    )
    late.refresh_from_db()
    assert late.status == "failed" and "content changed" in late.error
    assert not PairSentenceTokens.objects.filter(evaluation=late).exists()


def test_retrying_an_outdated_failed_run_scores_the_content_it_was_asked_on(
    alice, pair_set, model
) -> None:
    run = asked_run(alice, pair_set, model)
    asked_on = list(pair_set.sentences.order_by("position").values_list("sentence", flat=True))
    results = worker_results(pair_set)  # what a worker computes for that content
    runs.run_fail(kind=pair_services.PAIR_RUNS, run_id=run.pk, attempt=1, reason="GPU fell over")
    # The owner replaces the set (its old sentences are kept for the run on them).
    pair_sets.minimal_pair_set_replace(
        pair_set=pair_set, user=alice, data=DATA.replace("keys", "cats").replace("dog", "cat")
    )
    run.refresh_from_db()
    assert run.outdated
    run = runs.run_retry(run=run, user=alice)
    assert (run.status, run.attempt) == ("queued", 2)
    # The worker is sent the sentences the run is about, not the set's new ones...
    payload = pair_services.PAIR_RUNS.build_payload(run)
    assert payload["sentences"] == asked_on
    # ... and its results are stored for them, not refused.
    assert pair_services.pair_results_store(run_id=run.pk, attempt=2, results=results)
    run.refresh_from_db()
    assert (run.status, run.accuracy, run.outdated) == ("done", 0.5, True)
    assert PairSentenceTokens.objects.filter(evaluation=run).count() == 4


def test_retrying_an_outdated_run_whose_content_is_gone_says_why_and_changes_nothing(
    alice, pair_set, model, alice_client
) -> None:
    run = asked_run(alice, pair_set, model)
    runs.run_fail(kind=pair_services.PAIR_RUNS, run_id=run.pk, attempt=1, reason="GPU fell over")
    # Changed outside the replace service: the sentences of the run's content are gone.
    MinimalPairSet.objects.filter(pk=pair_set.pk).update(content_hash="2" * 64)
    refused = token_client(alice).post(f"/api/pairs/evaluations/{run.pk}/retry/")
    assert refused.status_code == 409
    assert "no longer stored" in refused.json()["errors"][0]["message"]
    page = alice_client.post_form(f"/pairs/evaluations/{run.pk}/retry/", follow=True)
    assert "cannot be retried" in page.content.decode()
    run.refresh_from_db()
    assert (run.status, run.attempt, run.error) == ("failed", 1, "GPU fell over")


def test_a_model_registered_for_imported_results_is_never_queued(alice, pair_set) -> None:
    imported = pair_services.imported_model_register(name="Big LM", user=alice)
    assert (imported.name, imported.source, imported.is_imported) == (
        "big-lm",
        "imported:big-lm",
        True,
    )
    with pytest.raises(runs.ModelNotRunnable, match="big-lm: registered only for imported"):
        pair_services.pair_evaluation_request(user=alice, models=[imported], pair_sets=[pair_set])
    suite = suite_services.suite_import(source=small_suite("a suite"), owner=alice).suite
    with pytest.raises(runs.ModelNotRunnable):
        services.evaluation_request(model=imported, suites=[suite], user=alice)
    assert not PairEvaluation.objects.exists() and not Evaluation.objects.exists()


def test_the_sweep_sends_unsent_pair_runs_and_fails_stale_ones(alice, pair_set, model) -> None:
    with broker("redis://127.0.0.1:1/0"), pytest.raises(runs.BrokerUnavailable):
        pair_services.pair_evaluation_request(user=alice, models=[model], pair_sets=[pair_set])
    long_ago = timezone.now() - timedelta(days=1)
    PairEvaluation.objects.update(queued_at=long_ago)
    assert runs.runs_sweep().resent == 1 and PairEvaluation.objects.get().enqueued
    PairEvaluation.objects.update(status="running", started_at=long_ago)
    assert runs.runs_sweep().failed == 1
    run = PairEvaluation.objects.get()
    assert run.status == "failed" and "Retry it" in run.error


# ---------------------------------------------------------------- API


def test_api_asks_for_runs_and_answers_their_status(
    alice, bob, pair_set, model, anon_client
) -> None:
    body = {"models": ["tiny"], "sets": ["small"]}
    assert post_json(anon_client, "/api/pairs/evaluations/", body).status_code == 401
    client = token_client(bob)
    created = post_json(client, "/api/pairs/evaluations/", body)
    assert created.status_code == 201, created.content
    (row,) = created.json()
    assert (row["model"], row["pair_set"], row["status"], row["origin"]) == (
        "tiny", "small", "queued", "worker")  # fmt: skip
    assert row["api_url"] == f"/api/pairs/evaluations/{row['id']}/" and row["queued_now"]
    assert row["url"] == f"/pairs/evaluations/{row['id']}/"
    again = post_json(client, "/api/pairs/evaluations/", body)
    assert again.status_code == 200 and again.json()[0]["id"] == row["id"]
    assert again.json()[0]["queued_now"] is False
    bad = post_json(client, "/api/pairs/evaluations/", {"models": ["nope"], "sets": ["gone"]})
    assert bad.status_code == 400
    assert {e["path"] for e in bad.json()["errors"]} == {"$.models.0", "$.sets.0"}
    assert "nope" in bad.json()["errors"][0]["message"]
    nul = post_json(client, "/api/pairs/evaluations/", {"models": ["tiny"], "sets": ["\x00"]})
    assert nul.status_code == 400 and "NUL" in nul.json()["errors"][0]["message"]
    detail = anon_client.get(row["api_url"]).json()
    assert (detail["status"], detail["progress_total"], detail["accuracy"]) == ("queued", 4, None)
    assert detail["tables"]["by_cond"] == f"/api/pairs/evaluations/{row['id']}/by_cond/"
    listed = anon_client.get("/api/pairs/evaluations/?set=small&status=queued").json()
    assert [r["id"] for r in listed["results"]] == [row["id"]]


def test_api_answers_503_when_the_queue_is_down(alice, pair_set, model) -> None:
    client = token_client(alice)
    with broker("redis://127.0.0.1:1/0"):
        down = post_json(client, "/api/pairs/evaluations/", {"models": ["tiny"], "sets": ["small"]})
    assert down.status_code == 503 and down.json()["errors"][0]["code"] == "broker_unavailable"
    assert PairEvaluation.objects.get().enqueued is False


def test_cancel_and_retry_only_for_owner_requester_or_staff(
    alice, bob, charlie, dana, pair_set, model
) -> None:
    run = asked_run(bob, pair_set, model)
    cancel = f"/api/pairs/evaluations/{run.pk}/cancel/"
    retry = f"/api/pairs/evaluations/{run.pk}/retry/"
    refused = token_client(charlie).post(cancel)
    assert refused.status_code == 403 and "owner" in refused.json()["errors"][0]["message"]
    assert token_client(alice).post(cancel).json()["status"] == "cancelled"
    assert token_client(alice).post(cancel).status_code == 409
    assert token_client(charlie).post(retry).status_code == 403
    retried = token_client(bob).post(retry).json()
    assert (retried["status"], retried["attempt"]) == ("queued", 2)
    # A late result of the first attempt changes nothing; the second attempt's is stored.
    results = worker_results(pair_set)
    assert not pair_services.pair_results_store(run_id=run.pk, attempt=1, results=results)
    assert pair_services.pair_results_store(run_id=run.pk, attempt=2, results=results)
    assert token_client(dana).post(retry).status_code == 409


def test_the_four_tables_with_options_as_json_and_tsv(alice, pair_set, model, anon_client) -> None:
    run = done_run(alice, pair_set, model)
    base = f"/api/pairs/evaluations/{run.pk}"
    tokens = anon_client.get(f"{base}/tokens/").json()
    assert tokens["columns"][:4] == ["token", "sentid", "word", "wordpos"]
    assert tokens["rows"][2][:4] == ["Ġare", "1", "are", 2] and tokens["rows"][2][-1] == 3.0
    tsv = anon_client.get(f"{base}/tokens/?format=tsv")
    assert tsv["Content-Type"].startswith("text/tab-separated-values")
    assert len(parse_predictions_tsv(tsv.content)) == 14
    by_cond = anon_client.get(f"{base}/by_cond/?conditions=cond&word_summary=sum").json()
    assert by_cond["columns"][:3] == ["model", "cond", "acc"]
    assert [(r[1], r[2]) for r in by_cond["rows"]] == [("agr", 1.0), ("npi", 0.0)]
    assert by_cond["options"]["word_summary"] == "sum"
    by_pair = anon_client.get(f"{base}/by_pair/?format=tsv").content.decode()
    assert by_pair.splitlines()[0] == "\tmodel\tpairid\texpected\tunexpected\tdiff\tacc\ttie"
    by_word = anon_client.get(f"{base}/by_word/?punctuation=next").json()
    assert len(by_word["rows"]) == 14
    for query, path in (("pred_measure=x", "$.pred_measure"), ("conditions=nope", "$.analysis"),
                        ("punctuation=after&format=tsv", "$.punctuation")):  # fmt: skip
        bad = anon_client.get(f"{base}/by_cond/?{query}")
        assert bad.status_code == 400 and bad["Content-Type"] == "application/json"
        assert bad.json()["errors"][0].get("path") == path, bad.json()
    assert anon_client.get(f"{base}/by_nothing/").status_code == 404
    assert anon_client.get("/api/pairs/evaluations/99999999999999999999/tokens/").status_code == 404
    queued = PairEvaluation.objects.create(model=LanguageModel.objects.create(
        name="m2", display_name="m2", source="m/2"), pair_set=pair_set, content_hash="x")  # fmt: skip
    assert anon_client.get(f"/api/pairs/evaluations/{queued.pk}/by_cond/").status_code == 409


# ---------------------------------------------------------------- imported predictions


def nlpscholar_files() -> tuple[bytes, bytes]:
    """NLPScholar's sample data and its gpt2 predictions, without the sentences of the
    incomplete pairs 7-10 (NLPScholar drops them; a Gym set does not accept them)."""
    data = (NLPSCHOLAR / "data" / "minimal_pairs_bad.tsv").read_text()
    predictions = (NLPSCHOLAR / "predictions" / "minimal_pairs_bad.tsv").read_text()
    dropped = {"13", "14", "15", "16"}
    data_lines = [line for line in data.splitlines(keepends=True)
                  if line.split("\t")[0] not in dropped]  # fmt: skip
    pred_lines = [line for line in predictions.splitlines(keepends=True)
                  if line.split("\t")[1] not in dropped]  # fmt: skip
    return "".join(data_lines).encode(), "".join(pred_lines).encode()


def test_imported_predictions_give_nlpscholars_own_results(alice, anon_client) -> None:
    data, predictions = nlpscholar_files()
    pair_sets.minimal_pair_set_import(data=data, name="nlpscholar", owner=alice)
    response = token_client(alice).post(
        "/api/minimal-pairs/nlpscholar/predictions/?model=gpt2&register=1&display_name=GPT-2",
        predictions,
        content_type="text/tab-separated-values",
    )
    assert response.status_code == 201, response.content
    row = response.json()
    assert (row["origin"], row["status"], row["model"]) == ("imported", "done", "gpt2")
    gpt2 = LanguageModel.objects.get(name="gpt2")
    assert (gpt2.source, gpt2.display_name, gpt2.is_imported) == ("imported:gpt2", "GPT-2", True)
    ours = anon_client.get(f"/api/pairs/evaluations/{row['id']}/by_cond/?conditions=condition")
    theirs = (NLPSCHOLAR / "results" / "minimal_pairs_bad.tsv").read_text().splitlines()
    header = theirs[0].split("\t")[1:]
    assert ours.json()["columns"][: len(header)] == header
    for line, got in zip(theirs[1:], ours.json()["rows"], strict=True):
        want = line.split("\t")[1:]
        assert got[:2] == want[:2]
        for a, b in zip(got[2 : len(want)], want[2:], strict=True):
            assert math.isclose(a, float(b), rel_tol=0, abs_tol=1e-9)
    # NLPScholar's word positions were taken as given (it numbers "Hello" then ",").
    tokens = anon_client.get(f"/api/pairs/evaluations/{row['id']}/tokens/").json()["rows"]
    assert tokens[1][:4] == [",", "1", ",", 1] and tokens[1][6] is True
    # Such a model is never queued.
    refused = post_json(
        token_client(alice), "/api/pairs/evaluations/", {"models": ["gpt2"], "sets": ["nlpscholar"]}
    )
    assert (
        refused.status_code == 400 and "imported results" in refused.json()["errors"][0]["message"]
    )
    again = token_client(alice).post(
        "/api/minimal-pairs/nlpscholar/predictions/?model=gpt2", predictions,
        content_type="text/tab-separated-values")  # fmt: skip
    assert again.status_code == 409


def flat_predictions() -> str:
    """NLPScholar-style predictions for the small set: one token per word, all 1 bit."""
    return "token\tsentid\tword\twordpos\tmodel\ttokenizer\tpunctuation\tprob\tsurp\n" + "".join(
        f"{w}\t{sid}\t{w}\t{i}\tm\tt\tFalse\t0.5\t1.0\n"
        for sid, text in (
            ("1", "the keys are here"),
            ("2", "the keys is here"),
            ("3", "no dog barks"),
            ("4", "a dog barks"),
        )  # fmt: skip
        for i, w in enumerate(text.split())
    )


def test_bad_predictions_are_located_and_save_nothing(alice, bob, pair_set, model) -> None:
    good = flat_predictions()
    url = "/api/minimal-pairs/small/predictions/?model=tiny"
    client = token_client(alice)
    # Lines: the header is 1; sentence 1 is 2-5, 2 is 6-9, 3 is 10-12, 4 is 13-15.
    cases = {
        "unknown sentid": (good.replace("\t4\tdog", "\t9\tdog"), (14, "sentid"), "'9' is not"),
        "bad number": (good.replace("0.5\t1.0\n", "0.5\tlots\n", 1), (2, "surp"), "number"),
        "bad flag": (good.replace("False", "maybe", 1), (2, "punctuation"), "True or False"),
        "negative position": (good.replace("\t1\tm", "\t-1\tm", 1), (3, "wordpos"), "0 or"),
        "empty": ("", (None, None), "empty"),
        "sentence missing": ("\n".join(good.splitlines()[:-3]), (None, "sentid"), "data row 5"),
    }
    for case, (body, place, words) in cases.items():
        response = client.post(url, body.encode(), content_type="text/tab-separated-values")
        assert response.status_code == 400, case
        first = response.json()["errors"][0]
        assert (first["row"], first["column"]) == place and words in first["message"], case
    assert client.post("/api/minimal-pairs/small/predictions/?model=nobody", good.encode(),
                       content_type="text/tab-separated-values").status_code == 400  # fmt: skip
    assert token_client(bob).post(url, good.encode(),
                                  content_type="text/tab-separated-values").status_code == 403  # fmt: skip
    assert not PairEvaluation.objects.exists() and not PairSentenceTokens.objects.exists()
    assert LanguageModel.objects.count() == 1
    ok = client.post(url, good.encode(), content_type="text/tab-separated-values")
    assert ok.status_code == 201 and ok.json()["accuracy"] == 0.0  # every pair tied
    assert PairEvaluation.objects.get().ties == 2


def test_import_command(alice, pair_set, model, tmp_path) -> None:
    data, predictions = nlpscholar_files()
    pair_sets.minimal_pair_set_import(data=data, name="nlpscholar", owner=None)
    path = tmp_path / "pred.tsv"
    path.write_bytes(predictions)
    with pytest.raises(CommandError, match="no model named 'gpt2'"):
        call_command("import_pair_predictions", "--set", "nlpscholar", "--model", "gpt2",
                     str(path), stdout=io.StringIO())  # fmt: skip
    out = io.StringIO()
    call_command("import_pair_predictions", "--set", "nlpscholar", "--model", "gpt2",
                 "--register", str(path), stdout=out)  # fmt: skip
    run = PairEvaluation.objects.get(origin="imported")
    assert f"evaluation {run.pk}" in out.getvalue() and run.accuracy == pytest.approx(0.8333333333)
    path.write_bytes(predictions.replace(b"\t0.0\n", b"\tx\n", 1))
    err = io.StringIO()
    with pytest.raises(CommandError, match="not imported"):
        call_command("import_pair_predictions", "--set", "nlpscholar", "--model", "tiny",
                     str(path), stdout=io.StringIO(), stderr=err)  # fmt: skip
    assert "row 2, column surp" in err.getvalue()
    assert PairEvaluation.objects.count() == 1


# ---------------------------------------------------------------- pages


def test_set_page_offers_evaluation_and_import_to_signed_in_users(
    alice, bob, pair_set, model, anon_client
) -> None:
    page = anon_client.get("/minimal-pairs/small/").content.decode()
    assert "Log in</a> to evaluate" in page and "Queue evaluation" not in page
    bob_client = signed_in_client(bob)
    page = bob_client.get("/minimal-pairs/small/").content.decode()
    assert "Evaluate with model(s)" in page and 'value="tiny"' in page
    assert "Import NLPScholar predictions" not in page
    assert bob_client.get("/minimal-pairs/small/import-predictions/").status_code == 403
    response = bob_client.post_form(
        "/pairs/evaluations/new/", {"models": ["tiny"], "pair_sets": ["small"]}
    )
    run = PairEvaluation.objects.get()
    assert response.status_code == 302 and run.requested_by == bob
    bad = bob_client.post_form(
        "/pairs/evaluations/new/", {"models": ["nope"], "pair_sets": ["small"]}
    )
    assert bad.status_code == 400 and PairEvaluation.objects.count() == 1
    page = bob_client.get(f"/pairs/evaluations/{run.pk}/").content.decode()
    assert f'action="/pairs/evaluations/{run.pk}/cancel/"' in page
    assert "/cancel/" not in anon_client.get(f"/pairs/evaluations/{run.pk}/").content.decode()
    assert bob_client.post_form(f"/pairs/evaluations/{run.pk}/cancel/").status_code == 302
    assert PairEvaluation.objects.get().status == "cancelled"
    page = bob_client.get(f"/pairs/evaluations/{run.pk}/").content.decode()
    assert f'action="/pairs/evaluations/{run.pk}/retry/"' in page
    assert bob_client.post_form(f"/pairs/evaluations/{run.pk}/retry/").status_code == 302
    assert PairEvaluation.objects.get().attempt == 2


def test_import_page(alice, pair_set, model) -> None:
    client = signed_in_client(alice)
    page = client.get("/minimal-pairs/small/").content.decode()
    assert "Import NLPScholar predictions" in page
    bad = io.BytesIO(b"token\tsentid\n")
    bad.name = "pred.tsv"
    response = client.post_form(
        "/minimal-pairs/small/import-predictions/", {"file": bad, "model": "tiny"}
    )
    assert (
        response.status_code == 400
        and "the predictions need the column" in response.content.decode()
    )
    assert not PairEvaluation.objects.exists()
    good = io.BytesIO(flat_predictions().encode())
    good.name = "pred.tsv"
    response = client.post_form(
        "/minimal-pairs/small/import-predictions/",
        {"file": good, "model": "Huge LM", "register": "on", "display_name": "Huge LM"},
    )
    run = PairEvaluation.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/pairs/evaluations/{run.pk}/"
    assert (run.origin, run.model.source, run.ties) == ("imported", "imported:huge-lm", 2)
    # Models registered for imported results are listed, but cannot be chosen for runs.
    set_page = client.get("/minimal-pairs/small/").content.decode()
    assert (
        '<option value="huge-lm" disabled>Huge LM (results imported, cannot run here)</option>'
        in set_page
    )


def test_a_missing_leaderboard_cell_links_to_the_prefilled_request_form(
    alice, pair_set, model, anon_client
) -> None:
    done_run(alice, pair_set, model)
    other_set = pair_sets.minimal_pair_set_import(data=DATA, name="small-2", owner=alice).pair_set
    other = LanguageModel.objects.create(name="other", display_name="Other", source="other/m")
    done_run(alice, other_set, other)
    board = anon_client.get("/leaderboard/").content.decode()
    link = "/pairs/evaluations/new/?model=tiny&amp;pair_set=small-2"
    assert link in board
    client = signed_in_client(alice)
    form = client.get(link.replace("&amp;", "&")).content.decode()
    assert '<option value="tiny" selected>' in form
    assert '<option value="small-2" selected>' in form


def test_bootstrap_queues_the_baselines_on_the_example_sets_once(
    settings, tmp_path, pair_set
) -> None:
    from evaluations import baseline

    settings.VAR_DIR = tmp_path
    call_command("import_minimal_pairs", str(EXAMPLES / "minimal_pairs"), stdout=io.StringIO())
    out = io.StringIO()
    call_command("gym_bootstrap", "--evaluate-examples", stdout=out)
    # Alice's own set ("small") is not the site's to evaluate.
    asked = set(PairEvaluation.objects.values_list("model__name", "pair_set__name"))
    names = set(LanguageModel.objects.filter(is_baseline=True).values_list("name", flat=True))
    assert baseline.BASELINE_NAME in names
    assert asked == {(name, "agreement_minimal_pairs") for name in names}
    assert f"{len(names)} example minimal-pair runs queued" in out.getvalue()
    again = io.StringIO()
    call_command("gym_bootstrap", "--evaluate-examples", stdout=again)
    assert PairEvaluation.objects.count() == len(names)
    assert f"0 example minimal-pair runs queued, {len(names)} already" in again.getvalue()
