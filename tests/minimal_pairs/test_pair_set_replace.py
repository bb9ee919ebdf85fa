"""Replacing a minimal-pair set's content (page and API, owner or staff): validated as an
upload with nothing changed on error, runs on the old content kept readable with their
own sentences and marked outdated, a new run on the new content, the leaderboard on
current results only."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from evaluations.minimal_pairs import results as pair_results
from evaluations.minimal_pairs import services as pair_services
from evaluations.models import LanguageModel, PairEvaluation
from suites.catalog_services import PermissionDenied
from suites.formats import minimal_pairs as mp
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet, PairSetVersion
from tests.conftest import token_client
from tests.minimal_pairs.test_minimal_pair_pages import (
    HEADER,
    card,
    make_set,
    store_run,
    url,
)

pytestmark = pytest.mark.django_db

# New content: other sentids and sentences, four words each as the stored runs expect.
NEW = HEADER + "".join(
    f"n{i}\tp{i // 2}\t{label}\t{sentence}\t1\tC\n"
    for i, (label, sentence) in enumerate(
        [
            ("expected", "Cats nap here."),
            ("unexpected", "Cats naps here."),
            ("expected", "Birds sing now."),
            ("unexpected", "Birds sings now."),
        ]
    )
)
PAGE = "/minimal-pairs/agreement%20pairs/replace/"
API = "/api/minimal-pairs/agreement%20pairs/?filename=new.tsv"


def _pair_rows(run: PairEvaluation) -> list[dict[str, Any]]:
    table = pair_results.analyze_evaluation(run).by_pair
    assert table is not None
    return table.as_dicts()


@pytest.fixture
def model() -> LanguageModel:
    return LanguageModel.objects.create(name="tiny-lm", display_name="Tiny LM", source="hub/tiny")


@pytest.fixture
def pair_set(alice) -> MinimalPairSet:
    return make_set("agreement pairs", owner=alice, tags=["agreement"])


def tsv_file(text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile("new.tsv", text.encode())


def replace_form(text: str, **fields: str) -> dict:
    return {"file": tsv_file(text), "name": "agreement pairs", "tags": "agreement", **fields}


def test_owner_replaces_on_the_page_and_the_old_run_stays_readable(
    alice_client, anon_client, pair_set, model
) -> None:
    old_run = store_run(model, pair_set)
    before = _pair_rows(old_run)
    old_hash = pair_set.content_hash
    assert "Replace content" in alice_client.get(pair_set.get_absolute_url()).content.decode()
    assert "Replace content" not in anon_client.get(pair_set.get_absolute_url()).content.decode()
    form = alice_client.get(PAGE).content.decode()
    assert 'value="agreement pairs"' in form and 'value="agreement"' in form

    response = alice_client.post_form(PAGE, replace_form(NEW), follow=True)
    assert "Replaced the content of" in response.content.decode()
    pair_set.refresh_from_db()
    assert pair_set.content_hash != old_hash
    assert (pair_set.sentence_count, pair_set.pair_count) == (4, 2)
    assert [t.name for t in pair_set.tags.all()] == ["agreement"]
    assert list(pair_set.sentences.values_list("sentid", flat=True)) == ["n0", "n1", "n2", "n3"]

    # The old run: outdated, analysed on its own six sentences with its own numbers.
    old_run.refresh_from_db()
    assert old_run.outdated and old_run.content_hash == old_hash
    assert _pair_rows(old_run) == before
    assert pair_results.token_table(old_run).word[:3] == ["The", "dog", "runs"]
    page = anon_client.get(url(old_run)).content.decode()
    assert card(page, "outdated") == "outdated" and 'data-pairid="3"' in page
    assert "sleeps" in page and "Cats" not in page and 'data-pairid="p0"' not in page
    tokens = anon_client.get(f"/api/pairs/evaluations/{old_run.pk}/tokens/").json()
    assert "The" in str(tokens)

    # Asking again makes a new run on the new content; the board counts only current runs.
    outcome = pair_services.pair_evaluation_request(
        user=pair_set.owner, models=[model], pair_sets=[pair_set]
    )
    (new_run,) = outcome.created
    assert new_run.pk != old_run.pk and new_run.content_hash == pair_set.content_hash
    board = anon_client.get("/api/leaderboard/minimal-pairs/").json()
    assert not [r for r in board["rows"] if "agreement pairs" in r["scores"]]
    PairEvaluation.objects.filter(pk=new_run.pk).delete()
    current = store_run(model, pair_set)
    board = anon_client.get("/api/leaderboard/minimal-pairs/").json()
    (row,) = board["rows"]
    assert row["scores"]["agreement pairs"]["evaluation"] == current.pk


def test_same_content_says_nothing_changed(alice_client, pair_set, model) -> None:
    run = store_run(model, pair_set)
    text = pair_sets.pair_set_export(pair_set)
    response = alice_client.post_form(PAGE, replace_form(text), follow=True)
    assert "Nothing changed" in response.content.decode()
    run.refresh_from_db()
    assert not run.outdated and not PairSetVersion.objects.exists()


def test_bad_file_changes_nothing(alice_client, pair_set, model) -> None:
    run = store_run(model, pair_set)
    before = list(pair_set.sentences.values_list("sentid", "sentence"))
    bad = NEW.replace("unexpected\tCats", "unsure\tCats")
    response = alice_client.post_form(PAGE, replace_form(bad))
    assert response.status_code == 400
    assert "row 3, column comparison" in response.content.decode()
    taken = make_set("taken", owner=None)
    response = alice_client.post_form(PAGE, replace_form(NEW, name=taken.name))
    assert response.status_code == 400 and "already exists" in response.content.decode()
    pair_set.refresh_from_db()
    assert pair_set.name == "agreement pairs" and not run.outdated
    assert list(pair_set.sentences.values_list("sentid", "sentence")) == before
    assert not PairSetVersion.objects.exists()


def test_only_owner_or_staff_replace(bob, bob_client, dana, anon_client, pair_set) -> None:
    old_hash = pair_set.content_hash
    assert anon_client.get(PAGE).status_code == 302
    assert bob_client.get(PAGE).status_code == 403
    assert bob_client.post_form(PAGE, replace_form(NEW)).status_code == 403
    put = token_client(bob).put(API, NEW, content_type="text/tab-separated-values")
    assert put.status_code == 403 and put.json()["errors"][0]["code"] == "permission_denied"
    assert anon_client.put(API, NEW, content_type="text/plain").status_code == 401
    with pytest.raises(PermissionDenied):
        pair_sets.minimal_pair_set_replace(pair_set=pair_set, user=bob, data=NEW)
    pair_set.refresh_from_db()
    assert pair_set.content_hash == old_hash
    put = token_client(dana).put(API, NEW, content_type="text/tab-separated-values")
    assert put.status_code == 200 and put.json()["changed"] is True


def test_api_replace_keeps_what_is_not_given(alice, pair_set, model) -> None:
    run = store_run(model, pair_set)
    client = token_client(alice)
    bad = client.put(API, NEW.replace("\t1\tC\n", "\t9\tC\n", 1), content_type="text/plain")
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["path"].startswith("row 2, column ROI")
    put = client.put(API + "&description=new%20words", NEW, content_type="text/plain")
    assert put.status_code == 200, put.content
    body = put.json()
    assert body["changed"] is True and body["pair_count"] == 2
    assert (body["name"], body["tags"], body["description"]) == (
        "agreement pairs",
        ["agreement"],
        "new words",
    )
    garbage = client.put(API, b"\xff\x00\xfe", content_type="application/octet-stream")
    assert garbage.status_code == 400 and garbage.json()["errors"][0]["message"]
    missing = client.put("/api/minimal-pairs/nope/", NEW, content_type="text/plain")
    assert missing.status_code == 404
    again = client.put(API, NEW, content_type="text/plain").json()
    assert again["changed"] is False
    run.refresh_from_db()
    assert run.outdated
    # Back to the first content: the old run is current again and reads the live rows.
    pair_set.refresh_from_db()
    text = pair_sets.pair_set_data_at(pair_set, run.content_hash)
    back = client.put(API, mp.to_tsv_text(text), content_type="text/plain").json()
    assert back["content_hash"] == run.content_hash
    run.refresh_from_db()
    assert not run.outdated and _pair_rows(run)
