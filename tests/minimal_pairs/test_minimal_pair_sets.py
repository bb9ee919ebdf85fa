"""Minimal-pair sets on the site: the import service (one transaction, every error
located), `import_minimal_pairs`, the example set, the upload page, list and set pages
(pairs side by side, ROI words highlighted) and the API (upload, list, detail, export)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from suites.formats import minimal_pairs as mp
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet, PairSetSentence
from tests.conftest import EXAMPLES, SHARED_DATA, token_client

pytestmark = pytest.mark.django_db

NLPSCHOLAR_DATA = SHARED_DATA / "nlpscholar" / "data"
SMALL = (
    "sentid\tpairid\tcomparison\tsentence\tROI\tkind\n"
    "1\t1\texpected\tHello, the keys are here.\t3\tagr_1\n"
    "2\t1\tunexpected\tHello, the keys is here.\t3\tagr_1\n"
)


def test_import_stores_sentences_in_bulk_and_exports_the_same_tsv(alice) -> None:
    data = (NLPSCHOLAR_DATA / "minimal_pairs.tsv").read_bytes()
    report = pair_sets.minimal_pair_set_import(
        data=data, name="nlpscholar sample", owner=alice, tags=["Agreement", "npi"]
    )
    stored = report.pair_set
    assert (stored.pair_count, stored.sentence_count, stored.source_format) == (
        8,
        16,
        mp.NLPSCHOLAR_TSV,
    )
    assert sorted(t.name for t in stored.tags.all()) == ["agreement", "npi"]
    assert stored.condition_columns == ["contextid", "lemma", "condition"]
    first = PairSetSentence.objects.get(pair_set=stored, sentid="1")
    assert (first.roi, first.conditions["lemma"]) == ([3, 4], "BE")
    exported = pair_sets.pair_set_export(stored)
    assert exported == mp.to_tsv_text(mp.parse_minimal_pairs(data))
    assert stored.content_hash == mp.content_hash(mp.parse_minimal_pairs(exported))


def test_a_bad_file_or_name_saves_nothing(alice) -> None:
    bad = (NLPSCHOLAR_DATA / "minimal_pairs_bad.tsv").read_bytes()
    with pytest.raises(pair_sets.PairSetInvalid) as caught:
        pair_sets.minimal_pair_set_import(data=bad, name="bad", owner=alice)
    assert [(e.row, e.column) for e in caught.value.errors][0] == (14, "comparison")
    pair_sets.minimal_pair_set_import(data=SMALL, name="taken", owner=alice)
    for name, message in (("taken", "already exists"), ("a/b", "slashes"), ("", "needs a name"),
                          ("upload", "reserved")):  # fmt: skip
        with pytest.raises(pair_sets.PairSetInvalid, match=message):
            pair_sets.minimal_pair_set_import(data=SMALL, name=name, owner=alice)
    assert MinimalPairSet.objects.count() == 1 and PairSetSentence.objects.count() == 2


def test_import_command_and_the_example_set() -> None:
    out = io.StringIO()
    call_command(
        "import_minimal_pairs", str(EXAMPLES / "minimal_pairs"), "--tags", "agreement", stdout=out
    )
    example = MinimalPairSet.objects.get(name="agreement_minimal_pairs")
    assert example.owner is None and example.pair_count == 7
    assert "imported 'agreement_minimal_pairs'" in out.getvalue()
    call_command("import_minimal_pairs", str(EXAMPLES / "minimal_pairs"), "--on-conflict", "skip",
                 stdout=io.StringIO())  # fmt: skip
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 of 1 file"):
        call_command(
            "import_minimal_pairs", str(NLPSCHOLAR_DATA / "minimal_pairs_bad.tsv"), stdout=out
        )
    assert "row 14, column comparison" in out.getvalue()
    assert MinimalPairSet.objects.count() == 1


def test_pages_list_search_and_pairs_side_by_side_with_roi_highlighted(anon_client, alice) -> None:
    pair_sets.minimal_pair_set_import(
        data=SMALL, name="agree", owner=alice, description="needle", tags=["agreement"]
    )
    pair_sets.minimal_pair_set_import(data=SMALL.replace("agr_1", "x"), name="other", owner=alice)
    page = anon_client.get("/minimal-pairs/?q=needle").content.decode()
    assert "agree" in page and "/minimal-pairs/other/" not in page
    assert "/minimal-pairs/other/" in anon_client.get("/minimal-pairs/").content.decode()
    assert (
        "/minimal-pairs/agree/" in anon_client.get("/minimal-pairs/?tag=agreement").content.decode()
    )
    detail = anon_client.get("/minimal-pairs/agree/").content.decode()
    # Word 3 with punctuation folded into the word before: Hello, | the | keys | are | here.
    assert (
        '<mark title="word 3">are</mark>' in detail and '<mark title="word 3">is</mark>' in detail
    )
    assert '<span title="word 0">Hello,</span>' in detail and "agr_1" in detail
    download = anon_client.get("/minimal-pairs/agree/download.tsv")
    assert download.content.decode() == mp.to_tsv_text(mp.parse_minimal_pairs(SMALL))
    assert anon_client.get("/minimal-pairs/missing/").status_code == 404


def test_upload_page(alice_client, anon_client) -> None:
    assert anon_client.get("/minimal-pairs/upload/").status_code == 302
    from django.core.files.uploadedfile import SimpleUploadedFile

    bad = SimpleUploadedFile("bad.tsv", (NLPSCHOLAR_DATA / "minimal_pairs_bad.tsv").read_bytes())
    response = alice_client.post_form("/minimal-pairs/upload/", {"file": bad, "name": "b"})
    assert response.status_code == 400 and "row 14, column comparison" in response.content.decode()
    lines = [{"sentence_good": "A cat sleeps.", "sentence_bad": "A cat sleep.", "UID": "agr"}]
    blimp = SimpleUploadedFile("b.jsonl", "\n".join(json.dumps(x) for x in lines).encode())
    response = alice_client.post_form(
        "/minimal-pairs/upload/", {"file": blimp, "name": "blimp one", "tags": "agreement"}
    )
    assert response.status_code == 302 and response["Location"] == "/minimal-pairs/blimp%20one/"
    stored = MinimalPairSet.objects.get(name="blimp one")
    assert stored.owner is not None and stored.owner.username == "alice"
    assert stored.source_format == mp.BLIMP_JSONL
    # Tags beyond the limits: the form says so of the set, and nothing is saved.
    again = SimpleUploadedFile("b.jsonl", "\n".join(json.dumps(x) for x in lines).encode())
    many = ",".join(f"t{n}" for n in range(21))
    response = alice_client.post_form(
        "/minimal-pairs/upload/", {"file": again, "name": "tagged", "tags": many}
    )
    assert response.status_code == 400
    assert "the minimal-pair set would have 21 tags" in response.content.decode()
    assert not MinimalPairSet.objects.filter(name="tagged").exists()


def test_api_upload_list_detail_export_and_hostile_input(anon_client, alice) -> None:
    client = token_client(alice)
    url = "/api/minimal-pairs/?name=api%20set&tags=agreement&filename=x.tsv"
    anonymous = anon_client.post(url, SMALL, content_type="text/tab-separated-values")
    assert anonymous.status_code == 401
    created = client.post(url, SMALL, content_type="text/tab-separated-values")
    assert created.status_code == 201, created.content
    assert created.json()["pair_count"] == 1 and created.json()["tags"] == ["agreement"]
    listed = anon_client.get("/api/minimal-pairs/?search=api").json()
    assert [s["name"] for s in listed["results"]] == ["api set"]
    detail = anon_client.get("/api/minimal-pairs/api%20set/").json()
    assert detail["condition_columns"] == ["kind"] and detail["owner"] == "alice"
    exported = anon_client.get("/api/minimal-pairs/api%20set/export/")
    assert exported.content.decode() == mp.to_tsv_text(mp.parse_minimal_pairs(SMALL))
    for body in (b"\xff\xfe\x00garbage", b"", b"sentid\tsentence\n1\t\n", b'{"sentence_good": 1}'):
        response = client.post(
            "/api/minimal-pairs/?name=h", body, content_type="application/octet-stream"
        )
        assert response.status_code == 400, body
        assert response.json()["errors"][0]["message"]
    again = client.post(url, SMALL, content_type="text/tab-separated-values")
    assert again.status_code == 400 and "already exists" in again.json()["errors"][0]["message"]
    assert anon_client.get("/api/minimal-pairs/nope/").status_code == 404
    assert MinimalPairSet.objects.count() == 1


def test_set_page_pages_over_pairs_with_a_constant_number_of_queries(
    anon_client, alice, django_assert_max_num_queries
) -> None:
    def make(n: int) -> str:
        lines = ["sentid\tpairid\tcomparison\tsentence"]
        for k in range(n):
            lines += [f"{2 * k}\tp{k}\texpected\tThe cat sleeps {k}.",
                      f"{2 * k + 1}\tp{k}\tunexpected\tThe cat sleep {k}."]  # fmt: skip
        return "\n".join(lines) + "\n"

    pair_sets.minimal_pair_set_import(data=make(60), name="sixty", owner=alice)
    pair_sets.minimal_pair_set_import(data=make(600), name="many", owner=alice)
    second = anon_client.get("/minimal-pairs/sixty/?page=2").content.decode()
    assert 'data-sentid="100"' in second and 'data-sentid="99"' not in second
    assert "<td>p59</td>" in second and "<td>p49</td>" not in second
    with django_assert_max_num_queries(8) as small:
        assert anon_client.get("/minimal-pairs/sixty/").status_code == 200
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert anon_client.get("/minimal-pairs/many/?page=7").status_code == 200


def test_api_analyses_nlpscholar_predictions_against_a_stored_set(anon_client, alice) -> None:
    client = token_client(alice)
    data = (NLPSCHOLAR_DATA / "minimal_pairs.tsv").read_bytes()
    pair_sets.minimal_pair_set_import(data=data, name="sample", owner=alice)
    predictions = (
        SHARED_DATA / "nlpscholar" / "predictions" / "minimal_pairs_bad.tsv"
    ).read_bytes()
    url = "/api/minimal-pairs/sample/analyze/?conditions=condition&table=by_pair"
    # Analysis costs server time: accounts only.
    assert anon_client.post(url, predictions, content_type="text/plain").status_code == 401
    body = client.post(url, predictions, content_type="text/tab-separated-values").json()
    assert body["columns"][:7] == [
        "model",
        "condition",
        "pairid",
        "expected",
        "unexpected",
        "diff",
        "acc",
    ]
    # The full set has 8 pairs (NLPScholar's "bad" data file lacked labels for 4 of them).
    assert [(r[1], r[2]) for r in body["rows"]][:2] == [("plu", "5"), ("plu", "6")]
    assert body["rows"][2][:3] == ["gpt2", "plu", "7"]
    by_cond = client.post(
        "/api/minimal-pairs/sample/analyze/?conditions=condition&as=tsv&pred_measure=prob",
        predictions,
        content_type="text/tab-separated-values",
    )
    assert by_cond.content.decode().splitlines()[0].split("\t")[:4] == [
        "",
        "model",
        "condition",
        "acc",
    ]
    for query, body_bytes, message in (
        ("?pred_measure=bits", predictions, "pred_measure must be one of"),
        ("?conditions=nope", predictions, "'nope' is not a condition column"),
        ("?table=by_item", predictions, "table must be"),
        ("", b"token\tsentid\n", "the predictions need the column"),
        ("", b"\xff\xfe", "not UTF-8"),
    ):
        response = client.post(
            f"/api/minimal-pairs/sample/analyze/{query}", body_bytes, content_type="text/plain"
        )
        assert response.status_code == 400, query
        assert message in response.json()["errors"][0]["message"]
    missing = client.post(
        "/api/minimal-pairs/none/analyze/", predictions, content_type="text/plain"
    )
    assert missing.status_code == 404


def test_a_file_that_is_not_utf8_is_refused_with_where_and_how_to_fix() -> None:
    """A binary or Latin-1 file: the error names the row, the byte and the fix (it used to
    say only "the file is not UTF-8 text (byte 0)", counting bytes from 0)."""
    data = "sentid\tpairid\tcomparison\tsentence\n1\t1\texpected\tcaf\u00e9\n".encode("latin-1")
    with pytest.raises(mp.MinimalPairFormatError) as caught:
        mp.parse_minimal_pairs(data, filename="pairs.tsv")
    (error,) = caught.value.errors
    assert error.path == "row 2"
    assert "the byte 0xe9 (byte 51 of the file) is not valid UTF-8" in error.message
    assert "save the file as UTF-8" in error.message


def test_incomplete_pairs_can_be_left_out_on_request(alice, alice_client) -> None:
    """NLPScholar's own bad sample has pairs without both labels: refused by default,
    stored without them (and a warning naming them) when the uploader asks, from the
    command, the page and the API alike."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    path = NLPSCHOLAR_DATA / "minimal_pairs_bad.tsv"
    whole = mp.parse_minimal_pairs(path.read_bytes(), drop_incomplete_pairs=True)
    dropped = set(whole.dropped_pairs)
    assert dropped  # the sample has incomplete pairs
    kept = [s for s in whole.sentences if s.pairid not in dropped]

    out = io.StringIO()
    call_command("import_minimal_pairs", str(path), "--drop-incomplete-pairs", stdout=out)
    stored = MinimalPairSet.objects.get(name="minimal_pairs_bad")
    assert "warning: pairs left out because they lack" in out.getvalue()
    assert stored.sentence_count == len(kept) == stored.sentences.count()
    assert stored.pair_count == len({s.pairid for s in kept})
    assert set(stored.sentences.values_list("pairid", flat=True)).isdisjoint(dropped)
    assert any("left out" in w for w in stored.import_warnings)

    upload = SimpleUploadedFile("bad.tsv", path.read_bytes())
    response = alice_client.post_form(
        "/minimal-pairs/upload/",
        {"file": upload, "name": "page copy", "drop_incomplete_pairs": "on"},
    )
    assert response.status_code == 302
    assert MinimalPairSet.objects.get(name="page copy").sentence_count == len(kept)

    client = token_client(alice)
    refused = client.post(
        "/api/minimal-pairs/?name=api%20copy", path.read_bytes(), content_type="text/plain"
    )
    assert refused.status_code == 400
    created = client.post(
        "/api/minimal-pairs/?name=api%20copy&drop_incomplete_pairs=1",
        path.read_bytes(),
        content_type="text/plain",
    )
    assert created.status_code == 201, created.content
    assert created.json()["sentence_count"] == len(kept)
    # Replacing takes the same choice: the page copy gets the file with its pairs left out.
    replaced = client.put(
        "/api/minimal-pairs/page%20copy/?drop_incomplete_pairs=1",
        path.read_bytes(),
        content_type="text/plain",
    )
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["changed"] is False  # the same content as stored
    assert (
        client.put(
            "/api/minimal-pairs/page%20copy/", path.read_bytes(), content_type="text/plain"
        ).status_code
        == 400
    )
