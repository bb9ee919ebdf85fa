"""The upload page and the API offer what the import command does on a name clash
(save under the next free name, '<name> (2)') and take tags, under the limits suites'
tags have everywhere."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from suites import catalog_services
from suites.models import Suite
from suites.syntaxgym import services
from tests.conftest import small_suite, token_client

pytestmark = pytest.mark.django_db


def _names() -> list[str]:
    return sorted(Suite.objects.values_list("name", flat=True))


def _tags(name: str) -> list[str]:
    return sorted(Suite.objects.get(name=name).tags.values_list("name", flat=True))


def test_a_clash_offers_the_free_name_and_one_click_saves_it(alice, bob_client) -> None:
    services.suite_import(source=small_suite("agreement"), owner=alice)
    text = json.dumps(small_suite("agreement"))
    refused = bob_client.post_form("/upload/", {"text": text, "tags": "mine"})
    page = refused.content.decode()
    assert (
        refused.status_code == 400 and "a suite named &#x27;agreement&#x27; already exists" in page
    )
    assert "Save it as “agreement (2)”" in page
    # The form comes back ticked, with the text and tags, so the button is the one click.
    assert re.search(r'<input type="checkbox" name="rename" [^>]*checked>', page)
    assert "mine" in page and "The horse" not in page and "The dog" in page
    assert _names() == ["agreement"]
    saved = bob_client.post_form("/upload/", {"text": text, "tags": "mine", "rename": "on"})
    assert saved.status_code == 302 and _names() == ["agreement", "agreement (2)"]
    notice = bob_client.get(saved["Location"]).content.decode()
    assert (
        "A suite named “agreement” exists already, so this one was saved as “agreement (2)”"
        in notice
    )
    assert _tags("agreement (2)") == ["mine"]
    # Ticked from the start, the next free name is taken at once.
    bob_client.post_form("/upload/", {"text": text, "rename": "on"})
    assert _names() == ["agreement", "agreement (2)", "agreement (3)"]


def test_a_clashing_file_comes_back_as_text_for_the_retry(alice, bob_client) -> None:
    services.suite_import(source=small_suite("agreement"), owner=alice)
    upload = SimpleUploadedFile("a.json", json.dumps(small_suite("agreement")).encode())
    page = bob_client.post_form("/upload/", {"file": upload}).content.decode()
    assert "Save it as “agreement (2)”" in page
    textarea = re.search(r'<textarea name="text"[^>]*>(.*?)</textarea>', page, re.S)
    assert textarea is not None and "&quot;agreement&quot;" in textarea.group(1)


def test_tags_on_the_upload_page_are_checked_like_everywhere(alice_client) -> None:
    text = json.dumps(small_suite("tagged", tags=["from-file"]))
    long = bob = "x" * 41
    refused = alice_client.post_form("/upload/", {"text": text, "tags": f"ok, {long}"})
    page = refused.content.decode()
    assert refused.status_code == 400 and f"the tag &#x27;{bob}&#x27; is 41 characters long" in page
    many = ", ".join(f"t{n}" for n in range(20))
    refused = alice_client.post_form("/upload/", {"text": text, "tags": many})
    # Twenty here and one in the file: the suite would have 21.
    page = refused.content.decode()
    assert refused.status_code == 400 and "the suite would have 21 tags; keep the 20" in page
    assert "meta.tags" in page and _names() == []
    saved = alice_client.post_form("/upload/", {"text": text, "tags": "Agreement, NPI licensing,"})
    assert saved.status_code == 302
    assert _tags("tagged") == ["agreement", "from-file", "npi-licensing"]


def test_the_replace_page_has_neither_rename_nor_tags(alice, alice_client) -> None:
    services.suite_import(source=small_suite("mine"), owner=alice)
    page = alice_client.get("/suites/mine/replace/").content.decode()
    assert 'name="rename"' not in page and 'name="tags"' not in page
    assert 'name="rename"' in alice_client.get("/upload/").content.decode()


def test_the_api_renames_on_request_and_takes_tags(alice, bob) -> None:
    services.suite_import(source=small_suite("agreement"), owner=alice)
    client = token_client(bob)
    body = json.dumps(small_suite("agreement"))

    def post(query: str):
        return client.post(f"/api/suites/{query}", body, content_type="application/json")

    clash = post("")
    assert clash.status_code == 400 and clash.json()["errors"][0]["path"] == "$.meta.name"
    bad = post("?on_conflict=overwrite")
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "$.on_conflict"
    too_long = post("?on_conflict=rename&tags=" + "y" * 41)
    assert too_long.status_code == 400 and too_long.json()["errors"][0]["path"] == "$.meta.tags"
    assert _names() == ["agreement"]
    saved = post("?on_conflict=rename&tags=api,Second%20Tag")
    assert saved.status_code == 201
    answer = saved.json()
    assert answer["name"] == "agreement (2)" and answer["renamed_from"] == "agreement"
    assert answer["tags"] == ["api", "second-tag"]
    assert answer["url"].endswith("/api/suites/agreement%20(2)/")
    assert client.get(answer["url"]).json()["name"] == "agreement (2)"
    fresh = client.post(
        "/api/suites/?on_conflict=rename",
        json.dumps(small_suite("fresh")),
        content_type="application/json",
    )
    assert fresh.status_code == 201 and fresh.json()["renamed_from"] is None


def test_the_free_name_fits_the_name_limit(alice) -> None:
    long = "n" * catalog_services.NAME_MAX_LENGTH
    services.suite_import(source=small_suite(long), owner=alice)
    report = services.suite_import(source=small_suite(long), owner=alice, rename_if_taken=True)
    assert report.renamed_from == long
    assert len(
        report.suite.name
    ) <= catalog_services.NAME_MAX_LENGTH and report.suite.name.endswith(" (2)")
