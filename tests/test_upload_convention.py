"""One upload convention for every kind's API (suites, minimal-pair sets, probing tasks,
corpora):
the file as the multipart field `file` with the fields beside it, or the file as the raw
body with the fields in the query; the same error body, the same 413, the same
`on_conflict`, and one description of it all in the OpenAPI schema."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import BOUNDARY, encode_multipart

from gym.errors import too_large_message
from gym.middleware import _SLACK_BYTES
from suites.catalog_api import NO_FILE, NO_LENGTH
from suites.catalog_services import TAG_MAX_LENGTH, TAGS_MAX_COUNT
from suites.corpora.models import Corpus
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet, ProbingTask, Suite, Tag
from tests.conftest import BrowserClient, small_suite, token_client

pytestmark = pytest.mark.django_db

PAIRS = (
    b"sentid\tpairid\tcomparison\tsentence\tROI\tkind\n"
    b"1\t1\texpected\tHello, the keys are here.\t3\tagr_1\n"
    b"2\t1\tunexpected\tHello, the keys is here.\t3\tagr_1\n"
)
OTHER_PAIRS = (
    b"sentid\tpairid\tcomparison\tsentence\tROI\tkind\n"
    b"1\t1\texpected\tThe cats nap.\t2\tagr_1\n"
    b"2\t1\tunexpected\tThe cats naps.\t2\tagr_1\n"
    b"3\t2\texpected\tA dog barks.\t2\tagr_1\n"
    b"4\t2\tunexpected\tA dog bark.\t2\tagr_1\n"
)
PROBING = b'tr\tA\tsay " hi " .\ntr\tB\ttwo words here .\nva\tA\tone .\nte\tB\tthree more words .\n'


@dataclass(frozen=True)
class Kind:
    url: str
    model: type[Any]
    raw_type: str  # the media type of a raw body
    file: bytes  # a valid file, named "conv" (suites by their content, others by filename)
    bad: bytes  # a file the kind refuses
    filename: str
    limit: str = "GYM_MAX_UPLOAD_BYTES"  # the setting that holds its size limit


KINDS = {
    "suites": Kind(
        "/api/suites/",
        Suite,
        "application/json",
        json.dumps(small_suite("conv")).encode(),
        b'{"meta": ',
        "conv.json",
    ),
    "minimal-pairs": Kind(
        "/api/minimal-pairs/",
        MinimalPairSet,
        "text/tab-separated-values",
        PAIRS,
        b"sentid\tsentence\n1\t\n",
        "conv.tsv",
    ),
    "probing-tasks": Kind(
        "/api/probing-tasks/", ProbingTask, "text/plain", PROBING, b"tr\tA\n\xff\xfe\n", "conv.txt"
    ),
    # Corpora are read as they arrive, up to a limit of their own.
    "corpora": Kind(
        "/api/corpora/",
        Corpus,
        "text/plain",
        b"text\nhello world\n",
        b"id\n1\n",
        "conv.tsv",
        "GYM_MAX_CORPUS_BYTES",
    ),
}
FORMS = ("multipart", "raw")
NOUNS = {
    "suites": "suite",
    "minimal-pairs": "minimal-pair set",
    "probing-tasks": "probing task",
    "corpora": "corpus",
}


@pytest.fixture(autouse=True)
def _corpus_folder(settings, tmp_path):
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"


# The test client encodes a dict for MULTIPART_CONTENT; with the boundary spelt out it
# sends the bytes given, for PUT as for POST.
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def send(
    client: BrowserClient,
    url: str,
    form: str,
    *,
    data: bytes,
    filename: str,
    raw_type: str,
    method: str = "post",
    **fields: str,
):
    """An upload of `data` in one of the two forms."""
    send = getattr(client, method)
    if form == "multipart":
        payload = {"file": SimpleUploadedFile(filename, data), **fields}
        return send(url, encode_multipart(BOUNDARY, payload), content_type=MULTIPART)
    # A raw body's name goes in the query (suites take theirs from the content).
    query = urlencode({**fields, "filename": filename})
    return send(f"{url}?{query}", data, content_type=raw_type)


def upload(client: BrowserClient, kind: str, form: str, data: bytes | None = None, **fields: str):
    k = KINDS[kind]
    return send(
        client,
        k.url,
        form,
        data=k.file if data is None else data,
        filename=k.filename,
        raw_type=k.raw_type,
        **fields,
    )


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_either_form_uploads_with_its_fields(alice, kind: str, form: str) -> None:
    response = upload(token_client(alice), kind, form, tags="Conv Tag,other")
    assert response.status_code == 201, response.content
    answer = response.json()
    assert answer["name"] == "conv"
    assert answer["tags"] == ["conv-tag", "other"]
    assert answer["renamed_from"] is None and answer["warnings"] == []
    stored = KINDS[kind].model.objects.get(name="conv")
    assert stored.owner == alice


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_taken_name_fails_or_is_renamed_on_request(alice, kind: str, form: str) -> None:
    client = token_client(alice)
    assert upload(client, kind, form).status_code == 201
    clash = upload(client, kind, form)
    assert clash.status_code == 400
    [error] = clash.json()["errors"]
    assert error["code"] == "invalid" and "already" in error["message"], error
    renamed = upload(client, kind, form, on_conflict="rename")
    assert renamed.status_code == 201, renamed.content
    assert (renamed.json()["name"], renamed.json()["renamed_from"]) == ("conv (2)", "conv")
    assert sorted(KINDS[kind].model.objects.values_list("name", flat=True)) == ["conv", "conv (2)"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_an_unknown_on_conflict_is_refused(alice, kind: str, form: str) -> None:
    response = upload(token_client(alice), kind, form, on_conflict="overwrite")
    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            {
                "code": "invalid_choice",
                "message": '"overwrite" is not a valid choice.',
                "path": "$.on_conflict",
            }
        ]
    }
    assert KINDS[kind].model.objects.count() == 0


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_an_invalid_file_gets_located_errors_and_saves_nothing(alice, kind: str, form: str) -> None:
    response = upload(token_client(alice), kind, form, data=KINDS[kind].bad)
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors and all(e["code"] == "invalid" and e["message"] and e["path"] for e in errors)
    assert KINDS[kind].model.objects.count() == 0


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_tags_beyond_the_limits_are_refused_and_nothing_is_saved(
    alice, kind: str, form: str
) -> None:
    # Every kind holds its tags to the same limits (20 tags, 40 characters each), saying
    # what is tagged, instead of cutting a long tag short or keeping any number of them.
    client = token_client(alice)
    many = ",".join(f"t{n}" for n in range(TAGS_MAX_COUNT + 1))
    response = upload(client, kind, form, tags=many)
    assert response.status_code == 400, response.content
    [error] = response.json()["errors"]
    assert error["message"] == (
        f"the {NOUNS[kind]} would have {TAGS_MAX_COUNT + 1} tags; keep the "
        f"{TAGS_MAX_COUNT} that describe it best"
    )
    long = "x" * (TAG_MAX_LENGTH + 1)
    response = upload(client, kind, form, tags=f"fine,{long}")
    assert response.status_code == 400, response.content
    [error] = response.json()["errors"]
    assert f"is {TAG_MAX_LENGTH + 1} characters long" in error["message"], error
    assert KINDS[kind].model.objects.count() == 0
    assert not Tag.objects.filter(name__in=["t0", "fine"]).exists()
    at_the_limits = ",".join([long[:-1], *(f"t{n}" for n in range(TAGS_MAX_COUNT - 1))])
    response = upload(client, kind, form, tags=at_the_limits)
    assert response.status_code == 201, response.content
    assert len(response.json()["tags"]) == TAGS_MAX_COUNT


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_file_over_the_limit_is_413(alice, settings, kind: str, form: str) -> None:
    setattr(settings, KINDS[kind].limit, 10)
    response = upload(token_client(alice), kind, form)
    assert response.status_code == 413
    size = len(KINDS[kind].file)
    message = too_large_message(size, 10, KINDS[kind].limit)
    assert response.json() == {"errors": [{"code": "too_large", "message": message}]}
    assert KINDS[kind].model.objects.count() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_body_far_over_the_limit_is_refused_before_it_is_read_naming_its_setting(
    alice, settings, kind: str
) -> None:
    # gym.middleware's 413, before Django reads the body, names the same limit as the
    # kind's own 413.
    setattr(settings, KINDS[kind].limit, 0)
    body = b"x" * (_SLACK_BYTES + 1)
    response = token_client(alice).post(KINDS[kind].url, body, content_type="text/plain")
    assert response.status_code == 413
    message = too_large_message(len(body), 0, KINDS[kind].limit)
    assert response.json() == {"errors": [{"code": "too_large", "message": message}]}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_anonymous_uploads_are_401(kind: str, form: str) -> None:
    response = upload(BrowserClient(), kind, form)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize("kind", KINDS)
def test_a_multipart_body_without_file_says_how_to_send_it(alice, kind: str) -> None:
    response = token_client(alice).post(KINDS[kind].url, {"name": "x"})
    assert response.status_code == 400
    assert response.json() == {
        "errors": [{"code": "invalid", "message": NO_FILE, "path": "$.file"}]
    }


@pytest.mark.parametrize("kind", KINDS)
def test_a_chunked_raw_body_without_its_length_is_refused_not_read_as_empty(
    alice, kind: str
) -> None:
    # The WSGI layer hands on an empty body when a client streams it in chunks without a
    # Content-Length: the upload would fail as an empty file, or a corpus seem to have
    # no text. It is refused saying how to send it.
    k = KINDS[kind]
    response = token_client(alice).post(
        f"{k.url}?filename={k.filename}",
        k.file,
        content_type=k.raw_type,
        CONTENT_LENGTH="",
        HTTP_TRANSFER_ENCODING="chunked",
    )
    assert response.status_code == 400, response.content
    assert response.json() == {
        "errors": [{"code": "invalid", "message": NO_LENGTH, "path": "$.file"}]
    }
    assert k.model.objects.count() == 0


@pytest.mark.parametrize(
    "url", [*(k.url for k in KINDS.values()), "/api/minimal-pairs/conv/", "predictions"]
)
def test_a_chunked_multipart_body_without_its_length_is_told_so(alice, url: str) -> None:
    # The same empty body as a raw one's: a form that sent its `file` is not told to send
    # its `file`, but why it arrived without one.
    pair_sets.minimal_pair_set_import(data=PAIRS, name="conv", owner=alice)
    method = "put" if url == "/api/minimal-pairs/conv/" else "post"
    url = "/api/minimal-pairs/conv/predictions/?model=m&register=1" if url == "predictions" else url
    body = encode_multipart(BOUNDARY, {"file": SimpleUploadedFile("conv.tsv", PAIRS)})
    response = getattr(token_client(alice), method)(
        url, body, content_type=MULTIPART, CONTENT_LENGTH="", HTTP_TRANSFER_ENCODING="chunked"
    )
    assert response.status_code == 400, response.content
    assert response.json() == {
        "errors": [{"code": "invalid", "message": NO_LENGTH, "path": "$.file"}]
    }
    assert MinimalPairSet.objects.get().pair_count == 1
    assert not any(k.model.objects.exclude(name="conv").exists() for k in KINDS.values())


def test_curl_f_file_uploads_a_pair_set_named_after_the_file(alice) -> None:
    # curl -F file=@minimal_pairs.tsv /api/minimal-pairs/ (issue 21): the multipart
    # envelope is not read as TSV.
    client = token_client(alice)
    response = client.post(
        "/api/minimal-pairs/", {"file": SimpleUploadedFile("minimal_pairs.tsv", PAIRS)}
    )
    assert response.status_code == 201, response.content
    assert (response.json()["name"], response.json()["pair_count"]) == ("minimal_pairs", 1)


def test_raw_bodies_need_a_name_when_there_is_no_filename(alice) -> None:
    client = token_client(alice)
    response = client.post("/api/minimal-pairs/", PAIRS, content_type="text/plain")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "code": "invalid",
            "path": "column name",
            "row": None,
            "column": "name",
            "message": "the minimal-pair set needs a name",
        }
    ]
    response = client.post("/api/probing-tasks/", PROBING, content_type="text/plain")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "code": "invalid",
            "path": "name",
            "location": {},
            "message": "the probing task needs a name",
        }
    ]
    named = client.post("/api/probing-tasks/?name=raw%20task", PROBING, content_type="text/plain")
    assert named.status_code == 201 and named.json()["task_type"] == "custom"


# -- replacing a minimal-pair set (PUT) takes the same two forms -------------------------


@pytest.fixture
def conv(alice) -> MinimalPairSet:
    return pair_sets.minimal_pair_set_import(
        data=PAIRS, name="conv", owner=alice, tags=["kept"]
    ).pair_set


def replace(client: BrowserClient, form: str, data: bytes = OTHER_PAIRS, **fields: str):
    return send(
        client,
        "/api/minimal-pairs/conv/",
        form,
        data=data,
        filename="new.tsv",
        raw_type="text/tab-separated-values",
        method="put",
        **fields,
    )


@pytest.mark.parametrize("form", FORMS)
def test_replace_in_either_form_keeps_what_is_not_given(alice, conv, form: str) -> None:
    response = replace(token_client(alice), form)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert (answer["name"], answer["tags"], answer["pair_count"]) == ("conv", ["kept"], 2)
    assert (answer["changed"], answer["renamed_from"], answer["warnings"]) == (True, None, [])
    again = replace(token_client(alice), form, description="new words")
    assert again.status_code == 200
    assert (again.json()["changed"], again.json()["description"]) == (False, "")


@pytest.mark.parametrize("form", FORMS)
def test_replace_renames_to_a_free_name_on_request(alice, conv, form: str) -> None:
    pair_sets.minimal_pair_set_import(data=PAIRS, name="taken", owner=alice)
    client = token_client(alice)
    clash = replace(client, form, name="taken")
    assert clash.status_code == 400 and clash.json()["errors"][0]["column"] == "name"
    renamed = replace(client, form, name="taken", on_conflict="rename")
    assert renamed.status_code == 200, renamed.content
    assert (renamed.json()["name"], renamed.json()["renamed_from"]) == ("taken (2)", "taken")


@pytest.mark.parametrize("form", FORMS)
def test_replace_refusals(alice, bob, conv, settings, form: str) -> None:
    assert replace(BrowserClient(), form).status_code == 401
    assert replace(token_client(bob), form).status_code == 403
    bad = replace(token_client(alice), form, on_conflict="overwrite")
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "$.on_conflict"
    settings.GYM_MAX_UPLOAD_BYTES = 10
    big = replace(token_client(alice), form)
    assert big.status_code == 413 and big.json()["errors"][0]["code"] == "too_large"
    conv.refresh_from_db()
    assert conv.pair_count == 1


# -- predictions files: the same two forms, the fields in the query or beside `file` ----

PREDICTIONS = (
    "token\tsentid\tword\twordpos\tmodel\ttokenizer\tpunctuation\tprob\tsurp\n"
    + "".join(
        f"{w}\t{sid}\t{w}\t{i}\tm\tt\tFalse\t0.5\t{1.0 + i}\n"
        for sid, text in (("1", "Hello the keys are here"), ("2", "Hello the keys is here"))
        for i, w in enumerate(text.split())
    )
).encode()


@pytest.mark.parametrize("form", FORMS)
def test_predictions_are_analysed_and_imported_in_either_form(alice, form: str) -> None:
    client = token_client(alice)
    pair_sets.minimal_pair_set_import(data=PAIRS, name="conv", owner=alice)
    tsv = "text/tab-separated-values"
    analysed = send(
        client, "/api/minimal-pairs/conv/analyze/", form, data=PREDICTIONS, filename="p.tsv",
        raw_type=tsv, table="by_pair",
    )  # fmt: skip
    assert analysed.status_code == 200, analysed.content
    [row] = analysed.json()["rows"]
    assert row[:2] == ["m", "1"]
    imported = send(
        client, "/api/minimal-pairs/conv/predictions/", form, data=PREDICTIONS, filename="p.tsv",
        raw_type=tsv, model="m", register="1",
    )  # fmt: skip
    assert imported.status_code == 201, imported.content
    assert (imported.json()["model"], imported.json()["status"]) == ("m", "done")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("action", ["analyze", "predictions"])
def test_a_predictions_file_over_the_limit_is_413(alice, settings, action: str, form: str) -> None:
    client = token_client(alice)
    pair_sets.minimal_pair_set_import(data=PAIRS, name="conv", owner=alice)
    settings.GYM_MAX_UPLOAD_BYTES = 10
    response = send(
        client, f"/api/minimal-pairs/conv/{action}/", form, data=PREDICTIONS, filename="p.tsv",
        raw_type="text/tab-separated-values", model="m", register="1",
    )  # fmt: skip
    assert response.status_code == 413
    message = too_large_message(len(PREDICTIONS), 10)
    assert response.json() == {"errors": [{"code": "too_large", "message": message}]}


# -- the schema says it once ------------------------------------------------------------


def test_the_schema_describes_every_upload_the_same_way(anon_client) -> None:
    schema = json.loads(anon_client.get("/api/schema/?format=json").content)
    operations = {
        ("/api/suites/", "post"): "UploadForm",
        ("/api/minimal-pairs/", "post"): "PairSetUploadForm",
        ("/api/minimal-pairs/{name}/", "put"): "PairSetUploadForm",
        ("/api/probing-tasks/", "post"): "ProbingTaskUploadForm",
        ("/api/corpora/", "post"): "CorpusUploadForm",
    }
    for (path, method), form_name in operations.items():
        operation = schema["paths"][path][method]
        content = operation["requestBody"]["content"]
        assert list(content)[0] == "multipart/form-data" and "application/octet-stream" in content
        assert content["multipart/form-data"]["schema"]["$ref"].endswith("/" + form_name)
        form = schema["components"]["schemas"][form_name]
        assert form["required"] == ["file"]
        assert form["properties"]["file"]["format"] == "binary"
        query = {p["name"] for p in operation["parameters"] if p["in"] == "query"}
        assert {"on_conflict", "tags"} <= query, path
        assert query == set(form["properties"]) - {"file"}, path
        assert {"201", "200"} & set(operation["responses"]), path
        for code in ("400", "401", "403", "413"):
            error = operation["responses"][code]["content"]["application/json"]["schema"]
            assert error["$ref"].endswith("/Error"), (path, code)


@pytest.mark.parametrize("form", FORMS)
def test_a_suite_upload_refuses_a_name_or_description_field(alice, form: str) -> None:
    # Other kinds take these for files that carry no name; a suite carries its own, and a
    # field that would be ignored is refused, saying where the name comes from.
    client = token_client(alice)
    response = upload(client, "suites", form, name="mine", description="d")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert sorted(e["path"] for e in errors) == ["$.description", "$.name"]
    assert all("meta.name" in e["message"] for e in errors)
    assert not Suite.objects.exists()
    # Without them the same upload goes through, named by its meta.
    assert upload(client, "suites", form).json()["name"] == "conv"
