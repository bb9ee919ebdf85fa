"""The suite pages as a user meets them: browse, search, tags, suite page, upload,
edit/replace/delete permissions, downloads, sign up / log in / log out."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from suites.models import Suite
from suites.syntaxgym import services
from tests.conftest import small_suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def alices_suite(alice) -> Suite:
    data = small_suite(
        "alice's agreement", description="Agreement with an attractor", tags=["agreement"]
    )
    return services.suite_import(source=data, owner=alice).suite


def test_list_search_filter_sort_and_empty_state(anon_client, alice) -> None:
    response = anon_client.get("/")
    assert response.status_code == 200
    assert "No suites yet" in response.content.decode()
    services.suite_import(source=small_suite("zeta suite", tags=["npi"]), owner=alice)
    services.suite_import(
        source=small_suite("alpha suite", description="about garden paths"), owner=alice
    )
    page = anon_client.get("/").content.decode()
    assert page.index("alpha suite") < page.index("zeta suite")
    page = anon_client.get("/?sort=-name").content.decode()
    assert page.index("zeta suite") < page.index("alpha suite")
    page = anon_client.get("/?q=garden").content.decode()
    assert "alpha suite" in page and "zeta suite" not in page
    page = anon_client.get("/?tag=npi").content.decode()
    assert "zeta suite" in page and "alpha suite" not in page
    page = anon_client.get("/?q=nothing-matches").content.decode()
    assert "No suite matches" in page


def test_pagination_keeps_filters(anon_client, alice) -> None:
    for i in range(30):
        services.suite_import(source=small_suite(f"s{i:02d}", tags=["many"]), owner=alice)
    page1 = anon_client.get("/?tag=many").content.decode()
    assert "Page 1 of 2" in page1
    assert "page=2" in page1 and "tag=many" in page1
    page2 = anon_client.get("/?tag=many&page=2").content.decode()
    assert "s29" in page2 and "s00" not in page2


def test_tag_pages(anon_client, alices_suite) -> None:
    page = anon_client.get("/tags/").content.decode()
    assert "agreement" in page and "1 suite" in page
    page = anon_client.get("/tags/agreement/").content.decode()
    assert "alice&#x27;s agreement" in page
    assert anon_client.get("/tags/unknown/").status_code == 404


def test_suite_page_shows_meta_regions_predictions_and_grid(anon_client, alices_suite) -> None:
    response = anon_client.get(alices_suite.get_absolute_url())
    assert response.status_code == 200
    page = response.content.decode()
    for text in [
        "Agreement with an attractor",
        "Subject",
        "Verb",
        "match",
        "mismatch",
        "The cat",
        "are",
    ]:
        assert text in page
    # Predictions readably: region names and condition names as labelled references.
    assert 'class="ref-region">2 Verb<' in page and 'class="ref-cond">mismatch<' in page
    # Grid: one row group per item, one row per condition.
    assert page.count('<tbody class="item">') == 2
    assert 'rowspan="2"' in page
    # Not the owner: no edit links.
    assert "Replace content" not in page
    assert anon_client.get("/suites/no-such-suite/").status_code == 404


def test_suite_page_paginates_items(anon_client, alice) -> None:
    data = small_suite("long")
    base = data["items"][0]
    data["items"] = [{**base, "item_number": n} for n in range(1, 121)]
    suite = services.suite_import(source=data, owner=alice).suite
    page = anon_client.get(suite.get_absolute_url()).content.decode()
    assert page.count('<tbody class="item">') == 50
    assert "Page 1 of 3" in page


def test_owner_sees_controls(alice_client, alices_suite) -> None:
    page = alice_client.get(alices_suite.get_absolute_url()).content.decode()
    assert "Replace content" in page and "Edit details" in page and "Delete" in page


def test_upload_needs_login(anon_client) -> None:
    response = anon_client.get("/upload/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_upload_file_and_text(alice_client) -> None:
    upload = SimpleUploadedFile(
        "s.json", json.dumps(small_suite("from file")).encode(), "application/json"
    )
    response = alice_client.post_form("/upload/", {"file": upload})
    assert response.status_code == 302
    suite = Suite.objects.get(name="from file")
    assert response["Location"] == suite.get_absolute_url()
    assert suite.owner is not None and suite.owner.username == "alice"
    response = alice_client.post_form(
        "/upload/", {"text": json.dumps(small_suite("from text"))}, follow=True
    )
    assert "Imported “from text”: 2 items" in response.content.decode()


def test_upload_errors_are_listed_and_nothing_saved(alice_client) -> None:
    bad = small_suite("bad one")
    bad["predictions"] = [{"type": "formula", "formula": "(2;%mismatch%) > (2;%match%"}]
    bad["items"][1]["item_number"] = 1
    response = alice_client.post_form("/upload/", {"text": json.dumps(bad)})
    assert response.status_code == 400
    page = response.content.decode()
    assert "The suite was not saved" in page
    assert "$.predictions[0]" in page
    assert "item" in page
    assert not Suite.objects.filter(name="bad one").exists()
    response = alice_client.post_form("/upload/", {"text": "{oops"})
    assert response.status_code == 400 and "line 1" in response.content.decode()
    response = alice_client.post_form("/upload/", {})
    assert response.status_code == 400 and "Choose a JSON file" in response.content.decode()


def test_upload_shows_normalisation_notes(alice_client) -> None:
    data = small_suite("spacey")
    data["items"][0]["conditions"][0]["regions"][1]["content"] = " is "
    response = alice_client.post_form("/upload/", {"text": json.dumps(data)}, follow=True)
    page = response.content.decode()
    assert "msg-warning" in page
    item = Suite.objects.get(name="spacey").items.first()
    assert item is not None and item.conditions[0]["regions"][1] == "is"


def test_upload_over_the_limit_is_413(alice_client, settings) -> None:
    settings.GYM_MAX_UPLOAD_BYTES = 1000
    response = alice_client.post_form("/upload/", {"text": "x" * 200_000})
    assert response.status_code == 413
    assert "the limit is 1,000 bytes" in response.content.decode()


@pytest.mark.parametrize("action", ["edit", "replace", "delete"])
def test_only_owner_or_staff_may_change(
    action, anon_client, bob_client, charlie_client, dana_client, alices_suite
) -> None:
    url = f"/suites/{alices_suite.name}/{action}/"
    response = anon_client.get(url)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert bob_client.get(url).status_code == 403
    assert bob_client.post_form(url, {"description": "hacked"}).status_code == 403
    # A user without rights is refused like any other non-owner; staff may.
    assert charlie_client.get(url).status_code == 403
    assert dana_client.get(url).status_code == 200
    alices_suite.refresh_from_db()
    assert alices_suite.description == "Agreement with an attractor"


def test_owner_edits_replaces_and_deletes(alice_client, alices_suite) -> None:
    url = alices_suite.get_absolute_url()
    response = alice_client.post_form(
        url + "edit/",
        {"description": "Edited", "reference": "", "author": "Al", "comment": "", "tags": "x, Y z"},
    )
    assert response.status_code == 302
    alices_suite.refresh_from_db()
    assert alices_suite.description == "Edited"
    assert sorted(alices_suite.tags.values_list("name", flat=True)) == ["x", "y-z"]
    new = small_suite("alice's agreement")
    new["items"].pop()
    response = alice_client.post_form(url + "replace/", {"text": json.dumps(new)})
    assert response.status_code == 302
    alices_suite.refresh_from_db()
    assert alices_suite.item_count == 1
    response = alice_client.post_form(url + "delete/")
    assert response.status_code == 302
    assert not Suite.objects.filter(pk=alices_suite.pk).exists()


def test_downloads(anon_client, alices_suite) -> None:
    response = anon_client.get(f"/suites/{alices_suite.name}/download.json")
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    data = json.loads(response.content)
    assert data["meta"]["name"] == "alice's agreement"
    assert data["predictions"] == [{"type": "formula", "formula": "(2;%mismatch%) > (2;%match%)"}]
    response = anon_client.get(f"/suites/{alices_suite.name}/download.csv")
    lines = response.content.decode().splitlines()
    assert lines[0] == "item_number,condition_name,region_number,region_name,content"
    assert lines[1] == "1,match,1,Subject,The dog"
    assert len(lines) == 1 + 2 * 2 * 3


def test_signup_login_logout(anon_client, django_user_model) -> None:
    response = anon_client.post_form(
        "/accounts/signup/",
        {
            "username": "dora",
            "email": "",
            "password1": "a-long-pass-9876",
            "password2": "a-long-pass-9876",
        },
    )
    assert response.status_code == 302
    assert django_user_model.objects.filter(username="dora").exists()
    assert anon_client.get("/upload/").status_code == 200
    anon_client.post_form("/accounts/logout/")
    assert anon_client.get("/upload/").status_code == 302
    response = anon_client.post_form(
        "/accounts/login/", {"username": "dora", "password": "a-long-pass-9876"}
    )
    assert response.status_code == 302
    assert anon_client.get("/upload/").status_code == 200


def test_post_without_csrf_token_is_refused(alice_client) -> None:
    response = alice_client.post("/upload/", {"text": json.dumps(small_suite("no csrf"))})
    assert response.status_code == 403
    assert not Suite.objects.filter(name="no csrf").exists()


def test_long_names_render(anon_client, alice) -> None:
    long_name = "a-very-long-suite-name-" * 8
    suite = services.suite_import(source=small_suite(long_name.strip("-")), owner=alice).suite
    assert anon_client.get(suite.get_absolute_url()).status_code == 200
    assert anon_client.get("/").status_code == 200


def test_suites_path_leads_to_the_list_with_its_query(anon_client) -> None:
    response = anon_client.get("/suites/?q=agreement")
    assert response.status_code == 302
    assert response["Location"] == "/?q=agreement"
