"""Names, descriptions and tags: one rule each for every kind of data (suites,
minimal-pair sets, probing tasks, corpora) and for models, alike in the API, on the
upload pages and on a replacement. A name of dots only would be a step in an address
(`/corpora/../` is `/`); a description or a tag beyond the limit is refused with its
real length and the limit, and nothing is saved."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from evaluations.models import LanguageModel
from suites.catalog_services import TAG_MAX_LENGTH
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet, Tag
from tests.conftest import BrowserClient, small_suite, token_client
from tests.test_upload_convention import FORMS, KINDS, PAIRS, PROBING, send, upload

pytestmark = pytest.mark.django_db

DOTS = (".", "..", "....")
DESCRIPTION_MAX_LENGTH = 10_000  # the documented limit (docs/api.md)
TOO_LONG = f"{DESCRIPTION_MAX_LENGTH + 1:,} characters long; shorten it to at most "
TOO_LONG += f"{DESCRIPTION_MAX_LENGTH:,}"


@pytest.fixture(autouse=True)
def _corpus_folder(settings, tmp_path):
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"


def _named(client: BrowserClient, kind: str, form: str, name: str):
    """An upload of `kind` named `name` (a suite's name is in its file)."""
    if kind == "suites":
        return upload(client, kind, form, data=json.dumps(small_suite(name)).encode())
    return upload(client, kind, form, name=name)


def _messages(response) -> list[str]:
    return [error["message"] for error in response.json()["errors"]]


@pytest.mark.parametrize("name", DOTS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_name_of_dots_only_is_refused(alice, kind: str, form: str, name: str) -> None:
    response = _named(token_client(alice), kind, form, name)
    assert response.status_code == 400, response.content
    [message] = _messages(response)
    assert message.startswith(f"a name of dots only ({name!r})"), message
    assert not KINDS[kind].model.objects.exists()
    # A name with dots and something else is a name like any other.
    response = _named(token_client(alice), kind, form, f"{name}x")
    assert response.status_code == 201, response.content
    assert response.json()["name"] == f"{name}x"


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_description_over_the_limit_is_refused_with_its_length(
    alice, kind: str, form: str
) -> None:
    client = token_client(alice)

    def described(text: str):
        if kind == "suites":  # described by its own file
            suite = json.dumps(small_suite(description=text)).encode()
            return upload(client, kind, form, data=suite)
        return upload(client, kind, form, description=text)

    response = described("d" * (DESCRIPTION_MAX_LENGTH + 1))
    assert response.status_code == 400, response.content
    [message] = _messages(response)
    assert message.endswith(TOO_LONG), message
    assert not KINDS[kind].model.objects.exists()
    response = described("d" * DESCRIPTION_MAX_LENGTH)
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_long_tag_is_refused_at_its_real_length(alice, kind: str, form: str) -> None:
    # Tag.name holds 64 characters: a longer tag was cut to 64 before it was measured.
    for length in (TAG_MAX_LENGTH + 1, 65, 300):
        response = upload(token_client(alice), kind, form, tags=f"fine,{'x' * length}")
        assert response.status_code == 400, response.content
        [message] = _messages(response)
        assert f"is {length} characters long" in message, message
        assert f"at most {TAG_MAX_LENGTH} characters" in message, message
    assert not KINDS[kind].model.objects.exists()
    assert not Tag.objects.exists()


@pytest.mark.parametrize("form", FORMS)
def test_a_replacement_is_held_to_the_same_rules(alice, form: str) -> None:
    pair_sets.minimal_pair_set_import(data=PAIRS, name="conv", owner=alice, description="old")
    client = token_client(alice)

    def replace(**fields: str):
        return send(
            client, "/api/minimal-pairs/conv/", form, data=PAIRS.replace(b"keys", b"dogs"),
            filename="new.tsv", raw_type="text/tab-separated-values", method="put", **fields,
        )  # fmt: skip

    response = replace(name="..")
    assert response.status_code == 400, response.content
    assert _messages(response)[0].startswith("a name of dots only ('..')")
    response = replace(description="d" * (DESCRIPTION_MAX_LENGTH + 1))
    assert response.status_code == 400, response.content
    assert _messages(response)[0].endswith(TOO_LONG)
    kept = MinimalPairSet.objects.get()
    assert (kept.name, kept.description) == ("conv", "old")


# -- the upload pages ----------------------------------------------------------------

PAGES = {
    "minimal-pairs": ("/minimal-pairs/upload/", "pairs.tsv", PAIRS, {}),
    "probing-tasks": ("/probing/upload/", "toy.txt", PROBING, {}),
    "corpora": ("/corpora/upload/", "kids.txt", b"look at the doggy\n", {"validation_percent": 1}),
}


@pytest.mark.parametrize("kind", PAGES)
def test_the_upload_pages_refuse_the_same_names_and_descriptions(alice_client, kind: str) -> None:
    url, filename, data, extra = PAGES[kind]

    def post(**fields: object):
        file = SimpleUploadedFile(filename, data)
        return alice_client.post_form(url, {"file": file, **extra, **fields})

    response = post(name="..")
    assert response.status_code == 400
    assert "a name of dots only (&#x27;..&#x27;)" in response.content.decode()
    response = post(name="fine", description="d" * (DESCRIPTION_MAX_LENGTH + 1))
    assert response.status_code == 400
    page = response.content.decode()
    assert f"{DESCRIPTION_MAX_LENGTH + 1}" in page and f"{DESCRIPTION_MAX_LENGTH}" in page
    assert not KINDS[kind].model.objects.exists()
    assert post(name="fine").status_code == 302


def test_the_suite_upload_page_refuses_a_name_of_dots(alice_client) -> None:
    text = json.dumps(small_suite(".."))
    response = alice_client.post_form("/upload/", {"text": text})
    assert response.status_code == 400
    assert "a name of dots only (&#x27;..&#x27;)" in response.content.decode()
    assert not KINDS["suites"].model.objects.exists()


# -- models: a name is a slug, so dots never make one ---------------------------------


@pytest.mark.parametrize("name", DOTS)
def test_a_model_named_with_dots_only_is_refused(alice, name: str) -> None:
    client = token_client(alice)
    response = client.post("/api/models/", {"source": "someone/some-model", "name": name})
    assert response.status_code == 400, response.content
    assert [e["path"] for e in response.json()["errors"]] == ["$.name"]
    # Without a name, the name is made from the display name: nothing is left of dots.
    response = client.post("/api/models/", {"source": "someone/m", "display_name": name})
    assert response.status_code == 400, response.content
    assert _messages(response) == ["give a short name of letters, digits and hyphens"]
    response = client.post(
        "/api/models/",
        {"source": "someone/some-model", "description": "d" * (DESCRIPTION_MAX_LENGTH + 1)},
    )
    assert response.status_code == 400, response.content
    assert _messages(response)[0].endswith(TOO_LONG)
    assert not LanguageModel.objects.exists()
