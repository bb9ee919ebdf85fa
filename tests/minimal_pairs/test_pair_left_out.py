"""What an upload left out stays visible (issue 29): a minimal-pair set uploaded with its
incomplete pairs left out says so on its page, and importing predictions written for the
whole file offers the same choice: leave out the rows of sentences the set does not
have, with a warning that counts them (page, API and command alike), or be refused with
the rows' numbers and a word about the choice."""

from __future__ import annotations

import io
import re
from html import unescape

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluations.models import PairEvaluation, PairSentenceTokens
from suites.minimal_pairs import sets as pair_sets
from tests.conftest import SHARED_DATA, search, signed_in_client, token_client

pytestmark = pytest.mark.django_db

NLPSCHOLAR = SHARED_DATA / "nlpscholar"
DATA = (NLPSCHOLAR / "data" / "minimal_pairs_bad.tsv").read_bytes()
# gpt2's predictions for the whole file, the sentences of the incomplete pairs 7-10
# (sentids 13-16, rows 118-153 of the file) included.
PREDICTIONS = (NLPSCHOLAR / "predictions" / "minimal_pairs_bad.tsv").read_bytes()

SET_WARNING = "pairs left out because they lack an expected or an unexpected sentence: 7, 8, 9, 10"
ROWS_WARNING = (
    "rows left out because their sentid is not in the set: 36 "
    "(of 4 sentences: '13', '14', '15', '16')"
)
HINT = (
    "to import the rest (e.g. the set left out incomplete pairs on upload), ask to leave out "
    "rows whose sentid is not in the set (the import form's checkbox, drop_unknown_rows=1 "
    "in the API, --drop-unknown-rows on the command line)"
)
URL = "/api/minimal-pairs/bad/predictions/?model=gpt2&register=1"


@pytest.fixture
def left_out(alice):
    return pair_sets.minimal_pair_set_import(
        data=DATA, name="bad", owner=alice, drop_incomplete_pairs=True
    ).pair_set


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", "", html)).split())


def test_the_set_page_says_what_the_upload_left_out(left_out, anon_client) -> None:
    assert left_out.import_warnings == [SET_WARNING]
    assert anon_client.get("/api/minimal-pairs/bad/").json()["import_warnings"] == [SET_WARNING]
    page = anon_client.get("/minimal-pairs/bad/").content.decode()
    line = search(r'<p class="muted">(.*?) ·', page, re.S).group(1)
    assert _text(line) == f"6 pairs, 12 sentences (on upload, {SET_WARNING})"
    assert page.count("data-import-warning") == 1


def test_a_set_without_left_outs_says_nothing(alice, anon_client) -> None:
    complete = (NLPSCHOLAR / "data" / "minimal_pairs.tsv").read_bytes()
    pair_sets.minimal_pair_set_import(data=complete, name="good", owner=alice)
    assert "data-import-warning" not in anon_client.get("/minimal-pairs/good/").content.decode()


def test_the_api_refuses_rows_of_other_sentences_and_names_the_choice(left_out, alice) -> None:
    client = token_client(alice)
    response = client.post(URL, PREDICTIONS, content_type="text/tab-separated-values")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [(e["row"], e["column"]) for e in errors] == [
        (118, "sentid"),
        (127, "sentid"),
        (136, "sentid"),
        (145, "sentid"),
    ]
    assert errors[0]["message"] == f"sentid '13' is not in the set; {HINT}"
    assert not PairEvaluation.objects.exists() and not PairSentenceTokens.objects.exists()
    # Anything but a yes is no choice.
    maybe = client.post(
        URL + "&drop_unknown_rows=maybe", PREDICTIONS, content_type="text/tab-separated-values"
    )
    assert maybe.status_code == 400 and not PairEvaluation.objects.exists()


def test_the_api_leaves_them_out_on_request_with_a_warning(left_out, alice, anon_client) -> None:
    client = token_client(alice)
    response = client.post(
        URL + "&drop_unknown_rows=1", PREDICTIONS, content_type="text/tab-separated-values"
    )
    assert response.status_code == 201, response.content
    row = response.json()
    assert row["import_warnings"] == [ROWS_WARNING]
    # NLPScholar's own accuracy on the six complete pairs: 5 of 6.
    assert row["accuracy"] == pytest.approx(5 / 6)
    run = PairEvaluation.objects.get()
    assert PairSentenceTokens.objects.filter(evaluation=run).count() == 12
    assert anon_client.get(f"/api/pairs/evaluations/{run.pk}/").json()["import_warnings"] == [
        ROWS_WARNING
    ]
    page = anon_client.get(f"/pairs/evaluations/{run.pk}/").content.decode()
    shown = re.findall(r"<p [^>]*data-import-warning>(.*?)</p>", page)
    assert [unescape(w) for w in shown] == [f"Import: {ROWS_WARNING}."]


def test_the_import_page_offers_the_same_choice(left_out, alice) -> None:
    client = signed_in_client(alice)
    form = client.get("/minimal-pairs/bad/import-predictions/").content.decode()
    assert "Leave out rows whose sentid is not in the set" in form

    def upload(**extra: str):
        data = io.BytesIO(PREDICTIONS)
        data.name = "pred.tsv"
        fields = {"file": data, "model": "gpt2", "register": "on", **extra}
        return client.post_form("/minimal-pairs/bad/import-predictions/", fields)

    refused = upload()
    assert refused.status_code == 400
    text = _text(refused.content.decode())
    assert "The predictions file was not saved: 4 problems" in text
    assert f"row 118, column sentid sentid '13' is not in the set; {HINT}" in text
    assert not PairEvaluation.objects.exists()

    imported = upload(drop_unknown_rows="on")
    run = PairEvaluation.objects.get()
    assert imported.status_code == 302 and imported["Location"] == f"/pairs/evaluations/{run.pk}/"
    assert run.diagnostics["import_warnings"] == [ROWS_WARNING]
    page = _text(client.get(imported["Location"]).content.decode())
    # Once as the import's message, once on the run's page for good.
    assert page.count(f"Import: {ROWS_WARNING}.") == 2


def test_the_command_takes_the_same_choice(left_out, tmp_path) -> None:
    path = tmp_path / "pred.tsv"
    path.write_bytes(PREDICTIONS)
    err = io.StringIO()
    with pytest.raises(CommandError, match=r"not imported \(4 problem\(s\)\)"):
        call_command("import_pair_predictions", "--set", "bad", "--model", "gpt2", "--register",
                     str(path), stdout=io.StringIO(), stderr=err)  # fmt: skip
    assert f"{path}: row 118, column sentid: sentid '13' is not in the set; {HINT}" in (
        err.getvalue().splitlines()
    )
    assert not PairEvaluation.objects.exists()
    out = io.StringIO()
    call_command("import_pair_predictions", "--set", "bad", "--model", "gpt2", "--register",
                 "--drop-unknown-rows", str(path), stdout=out)  # fmt: skip
    run = PairEvaluation.objects.get()
    lines = out.getvalue().splitlines()
    assert lines == [
        f"{path}: warning: {ROWS_WARNING}",
        f"{path}: imported as evaluation {run.pk} (gpt2 on bad: accuracy 0.833, 0 ties)",
    ]
