"""Importing suites into the database: every real file, round trips, all-or-nothing
writes, name collisions and the import/export management commands."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from suites import catalog_services, formats
from suites.models import Item, Prediction, Region, Suite, Tag
from suites.syntaxgym import selectors, services
from tests.conftest import EXAMPLES, shared_files, small_suite

pytestmark = pytest.mark.django_db


def _ids(paths):
    return [f"{p.parent.name}/{p.name}" for p in paths]


SHARED = shared_files()


@pytest.mark.parametrize("path", SHARED, ids=_ids(SHARED))
def test_every_shared_file_imports_and_round_trips(path) -> None:
    parsed = formats.load_suite_file(path)
    assert parsed.ok, parsed.errors
    report = services.suite_import(source=parsed, owner=None)
    exported = selectors.suite_canonical(report.suite)
    # What the database gives back is exactly the canonical suite the format layer made...
    assert exported == parsed.suite
    # ...and importing the export again gives the same suite.
    again = formats.parse_suite_text(formats.to_json_text(exported))
    assert again.ok, again.errors
    assert again.suite == parsed.suite
    suite = report.suite
    assert suite.item_count == len(parsed.suite["items"])
    assert suite.content_hash == formats.content_hash(parsed.suite)


def test_import_counts_and_rows() -> None:
    report = services.suite_import(
        source=json.dumps(small_suite(tags=["Agreement", "x"])), owner=None
    )
    suite = report.suite
    assert (suite.item_count, suite.condition_count, suite.region_count) == (2, 2, 3)
    assert list(suite.regions.values_list("name", flat=True)) == ["Subject", "Verb", "End"]
    assert list(suite.conditions.values_list("name", flat=True)) == ["match", "mismatch"]
    assert list(suite.predictions.values_list("formula", flat=True)) == [
        "(2;%mismatch%) > (2;%match%)"
    ]
    assert sorted(suite.tags.values_list("name", flat=True)) == ["agreement", "x"]
    assert Item.objects.get(suite=suite, item_number=2).conditions[1] == {
        "condition_name": "mismatch",
        "regions": ["The cat", "are", "here."],
    }


def test_invalid_suite_writes_nothing() -> None:
    bad = small_suite()
    bad["items"][1]["conditions"][1]["regions"].pop()  # region 3 missing in one condition
    bad["meta"]["tags"] = ["newtag"]
    with pytest.raises(services.SuiteInvalid) as caught:
        services.suite_import(source=bad, owner=None)
    assert caught.value.errors
    assert any("items[1]" in e.path for e in caught.value.errors)
    assert Suite.objects.count() == 0
    assert Region.objects.count() == 0 and Item.objects.count() == 0
    assert not Tag.objects.filter(name="newtag").exists()


def test_name_collision_is_an_error_never_an_overwrite(alice, bob) -> None:
    services.suite_import(source=small_suite("shared name"), owner=alice)
    other = small_suite("shared name")
    other["items"][0]["conditions"][0]["regions"][0]["content"] = "Changed"
    with pytest.raises(services.SuiteInvalid) as caught:
        services.suite_import(source=other, owner=bob)
    (error,) = caught.value.errors
    assert error.path == "$.meta.name"
    assert "already exists" in error.message and "alice" not in error.message  # owners stay private
    suite = Suite.objects.get(name="shared name")
    assert suite.owner == alice
    item = suite.items.first()
    assert item is not None and item.conditions[0]["regions"][0] == "The dog"


@pytest.mark.parametrize(
    ("name", "fragment"),
    [("a/b", "slashes"), ("", "empty"), ("x" * 201, "shorten"), ("a\x01b", "control")],
)
def test_bad_names_are_refused(name: str, fragment: str) -> None:
    with pytest.raises(services.SuiteInvalid) as caught:
        services.suite_import(source=small_suite(name), owner=None)
    assert any(fragment in e.message for e in caught.value.errors)


def test_replace_keeps_identity_and_changes_hash(alice, bob) -> None:
    suite = services.suite_import(source=small_suite("mine"), owner=alice).suite
    old_hash, old_pk = suite.content_hash, suite.pk
    new = small_suite("mine")
    new["items"][0]["conditions"][0]["regions"][2]["content"] = "over there."
    with pytest.raises(catalog_services.PermissionDenied):
        services.suite_replace(suite=suite, user=bob, source=new)
    report = services.suite_replace(suite=suite, user=alice, source=new)
    assert report.suite.pk == old_pk and report.suite.owner == alice
    assert report.suite.content_hash != old_hash
    assert Prediction.objects.filter(suite_id=old_pk).count() == 1
    assert Item.objects.filter(suite_id=old_pk).count() == 2


def test_meta_edit_keeps_content_hash(alice) -> None:
    suite = services.suite_import(source=small_suite("mine"), owner=alice).suite
    before = suite.content_hash
    services.suite_update_meta(
        suite=suite,
        user=alice,
        description="new",
        reference="ref",
        author="A",
        comment="c",
        tags=["b", "a"],
    )
    suite.refresh_from_db()
    assert suite.content_hash == before
    assert selectors.suite_meta(suite)["tags"] == ["a", "b"]
    assert selectors.suite_meta(suite)["description"] == "new"


def test_suites_with_tag_adds_the_tagged_suites_once_in_name_order() -> None:
    for name, tags in (("c", ["t"]), ("b", []), ("a", ["t"]), ("d", ["t"])):
        services.suite_import(source=small_suite(name, tags=tags), owner=None)
    picked = [Suite.objects.get(name="b"), Suite.objects.get(name="d")]
    tag = Tag.objects.get(name="t")
    chosen = selectors.suites_with_tag(picked, tag)
    assert [s.name for s in chosen] == ["b", "d", "a", "c"]
    assert selectors.suites_with_tag(picked, None) == picked


def test_import_suites_command_reports_each_file(tmp_path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(small_suite("good one")))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = StringIO()
    with pytest.raises(CommandError, match="1 failed"):
        call_command("import_suites", str(tmp_path), stdout=out)
    text = out.getvalue()
    assert f"{good}: imported 'good one'" in text
    assert f"{bad}: FAILED" in text
    assert Suite.objects.filter(name="good one").exists()


def test_import_suites_conflict_policies(tmp_path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(small_suite("dup")))
    call_command("import_suites", str(path), stdout=StringIO())
    out = StringIO()
    call_command("import_suites", str(path), "--on-conflict", "skip", stdout=out)
    assert "skipped" in out.getvalue()
    call_command("import_suites", str(path), "--on-conflict", "rename", stdout=StringIO())
    assert Suite.objects.filter(name="dup (2)").exists()
    with pytest.raises(CommandError):
        call_command("import_suites", str(path), stdout=StringIO())


def test_import_whole_shared_folder_with_renames() -> None:
    if not SHARED:
        pytest.skip("shared data not found")
    out = StringIO()
    call_command("import_suites", *map(str, SHARED), "--on-conflict", "rename", stdout=out)
    assert "FAILED" not in out.getvalue()
    assert Suite.objects.count() == len(shared_files())


def test_export_suite_command(tmp_path) -> None:
    services.suite_import(source=small_suite("exp"), owner=None)
    target = tmp_path / "out.json"
    call_command("export_suite", "exp", "-o", str(target), stderr=StringIO())
    assert json.loads(target.read_text()) == formats.parse_suite_data(small_suite("exp")).suite
    out = StringIO()
    call_command("export_suite", "exp", "--csv", stdout=out)
    assert (
        out.getvalue().splitlines()[0]
        == "item_number,condition_name,region_number,region_name,content"
    )
    with pytest.raises(CommandError, match="no suite named"):
        call_command("export_suite", "nope")


def test_examples_import_cleanly() -> None:
    out = StringIO()
    call_command("import_suites", str(EXAMPLES), stdout=out)
    assert Suite.objects.count() >= 3
    for suite in Suite.objects.all():
        assert suite.predictions.exists()
        assert suite.import_warnings == []
