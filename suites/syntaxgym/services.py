"""Writes to SyntaxGym test suites: importing one (a file, pasted JSON or the grid
editor's), changing its metadata, replacing its content, copying and deleting it. Each
is one function, called by the suite pages (`views`, `authoring`), the API (`api`) and
`manage.py import_suites` alike. What every kind of data shares when it is written
(names, tags, ownership, upload limits) is `suites.catalog_services`'; the other kinds
have their own services in their packages."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction
from django.utils import timezone

from gym.errors import ApplicationError, invalid_entries
from suites import formats
from suites.catalog_services import (
    NAME_MAX_LENGTH,
    change_check,
    name_problem,
    name_taken,
    tag_list_errors,
    tag_slugs,
    tags_set,
    upload_limits,
    upload_name,
)
from suites.formats import Location, SuiteError
from suites.models import Condition, Item, Prediction, Region, Suite
from suites.syntaxgym import selectors

_META_TEXT_FIELDS = ("description", "reference", "author", "comment")
# Where name errors point: meta.name.
_NAME = ("meta", "name")
NAME_LOCATION = Location.of(_NAME)
# Copies are named "<name> (copy)", "<name> (copy 2)", …; past this many tries something
# other than a name clash is wrong.
MAX_COPY_ATTEMPTS = 100
# Items written per INSERT.
ITEM_BATCH = 500


class SuiteInvalid(ApplicationError):
    """The suite cannot be saved; `errors` says where and why. Nothing was written.
    `taken_name`: the name another suite has, when that is one of the problems (pages
    offer to save the upload under a free name)."""

    def __init__(self, errors: list[SuiteError], *, taken_name: str = "") -> None:
        super().__init__("; ".join(f"{e.path}: {e.message}" for e in errors[:3]))
        self.errors = errors
        self.taken_name = taken_name

    def error_list(self) -> list[dict[str, Any]]:
        return invalid_entries(self.errors)


class NoFreeName(Exception):
    """suite_copy tried MAX_COPY_ATTEMPTS names and every one was taken."""


@dataclass
class ImportReport:
    suite: Suite
    created: bool
    source_format: str
    warnings: list[str] = field(default_factory=list)
    # The name asked for, when the suite was saved under a free one instead.
    renamed_from: str = ""


def suite_name_check(*, name: str, replace: Suite | None = None) -> list[SuiteError]:
    """What is wrong with `name` as a suite's name (see name_problem); empty when it is
    free. suite_import applies it, and the editor's validation endpoint calls it so that
    a clash shows as soon as it is typed."""
    if not name.strip():
        return [SuiteError.at(_NAME, "the suite needs a name (meta.name)")]
    problem = name_problem(
        name=name,
        model=Suite,
        noun="suite",
        replace=replace,
        advice="choose another meta.name, or replace that suite from its own page if it is yours",
    )
    return [SuiteError.at(_NAME, problem)] if problem else []


def suite_import(
    *,
    source: str | bytes | dict[str, Any] | formats.FormatResult,
    owner: User | None,
    replace: Suite | None = None,
    name: str | None = None,
    rename_if_taken: bool = False,
    extra_tags: Iterable[str] = (),
) -> ImportReport:
    """Validate a suite in any known format and save it, all or nothing.

    `replace`: an existing suite whose content is swapped for this one (its row, and so
    the evaluations that point at it, stay). `name` overrides meta.name.
    `rename_if_taken`: a new suite whose name is taken is saved under the first free name
    of '<name> (2)', '<name> (3)', … (`ImportReport.renamed_from` keeps the asked one).
    `extra_tags` are added to the suite's own meta.tags, under the same limits.
    Raises SuiteInvalid with every error found; nothing is written then.
    """
    result = _parsed(source)
    data = result.suite
    if not result.ok or data is None:
        raise SuiteInvalid(list(result.errors))
    meta = {**data["meta"], **({"name": name} if name is not None else {})}
    tags, tag_errors = _merged_tags(meta.get("tags"), extra_tags)
    if tag_errors:
        raise SuiteInvalid(tag_errors)
    if tags is not None:
        meta["tags"] = tags
    asked = str(meta.get("name", ""))
    suite = _save(
        {**data, "meta": meta},
        asked=asked,
        owner=owner,
        replace=replace,
        result=result,
        rename_if_taken=rename_if_taken,
    )
    return ImportReport(
        suite=suite,
        created=replace is None,
        source_format=result.source_format,
        warnings=list(result.warnings),
        renamed_from=asked if suite.name != asked else "",
    )


def _save(
    data: dict[str, Any],
    *,
    asked: str,
    owner: User | None,
    replace: Suite | None,
    result: formats.FormatResult,
    rename_if_taken: bool,
) -> Suite:
    """Write the suite under `asked`, or under the first free name (`rename_if_taken`)."""
    for _attempt in range(MAX_COPY_ATTEMPTS):
        suite_name = upload_name(Suite, asked, rename_if_taken=rename_if_taken, replace=replace)
        name_errors = suite_name_check(name=suite_name, replace=replace)
        if name_errors:
            raise SuiteInvalid(
                name_errors, taken_name=asked if name_taken(Suite, asked, replace=replace) else ""
            )
        data["meta"]["name"] = suite_name
        try:
            with transaction.atomic():
                return _write(data, owner=owner, replace=replace, result=result)
        except IntegrityError:
            # Another request took the name between the check and the insert: with
            # rename_if_taken the next free name is tried, else the clash is reported.
            if not rename_if_taken:
                raise SuiteInvalid(
                    suite_name_check(name=suite_name, replace=replace)
                    or [SuiteError.at(_NAME, f"a suite named {suite_name!r} already exists")],
                    taken_name=suite_name,
                ) from None
    raise NoFreeName(f"Could not find a free name for {asked!r}; choose another name.")


def _parsed(source: str | bytes | dict[str, Any] | formats.FormatResult) -> formats.FormatResult:
    if isinstance(source, formats.FormatResult):
        return source
    if isinstance(source, dict):
        return formats.parse_suite_data(source, upload_limits())
    return formats.parse_suite_text(source, upload_limits())


def _merged_tags(own: Any, extra: Iterable[str]) -> tuple[list[str] | None, list[SuiteError]]:
    """The suite's meta.tags with `extra` added (None when there is nothing to add),
    checked by the limits the format applies to meta.tags."""
    extra = [str(t) for t in extra if str(t).strip()]
    if not extra:
        return None, []
    slugs = tag_slugs([*(own if isinstance(own, list) else []), *extra])
    return slugs, tag_list_errors(slugs, where=("meta", "tags"), noun="suite")


def _write(
    data: dict[str, Any],
    *,
    owner: User | None,
    replace: Suite | None,
    result: formats.FormatResult,
) -> Suite:
    meta = data["meta"]
    known = {"name", "metric", "tags", *_META_TEXT_FIELDS}
    suite = replace if replace is not None else Suite(owner=owner)
    suite.name = meta["name"]
    for key in _META_TEXT_FIELDS:
        setattr(suite, key, str(meta.get(key) or ""))
    suite.metric = meta.get("metric", "sum")
    suite.extra_meta = {k: v for k, v in meta.items() if k not in known}
    suite.source_format = result.source_format
    suite.import_warnings = list(result.warnings)
    suite.content_hash = formats.content_hash(data)
    region_meta: dict[str, str] = data["region_meta"]
    items = data["items"]
    condition_order = [c["condition_name"] for c in items[0]["conditions"]] if items else []
    suite.region_count = len(region_meta)
    suite.condition_count = len(condition_order)
    suite.item_count = len(items)
    suite.save()

    if replace is not None:
        for related in (suite.regions, suite.conditions, suite.predictions, suite.items):
            related.all().delete()

    Region.objects.bulk_create(
        Region(suite=suite, number=int(number), name=region_name)
        for number, region_name in sorted(region_meta.items(), key=lambda kv: int(kv[0]))
    )
    Condition.objects.bulk_create(
        Condition(suite=suite, name=cond, position=i) for i, cond in enumerate(condition_order)
    )
    originals = list(result.original_predictions)
    Prediction.objects.bulk_create(
        Prediction(
            suite=suite,
            position=i,
            formula=p["formula"],
            original=originals[i] if i < len(originals) else p["formula"],
        )
        for i, p in enumerate(data.get("predictions", []))
    )
    # In batches: bulk_create lists whatever it is given, and 200,000 Item objects at once
    # would double what the suite itself takes in memory.
    for start in range(0, len(items), ITEM_BATCH):
        Item.objects.bulk_create(
            Item(
                suite=suite,
                item_number=item["item_number"],
                position=i,
                conditions=[
                    {
                        "condition_name": c["condition_name"],
                        "regions": [r["content"] for r in c["regions"]],
                    }
                    for c in item["conditions"]
                ],
            )
            for i, item in enumerate(items[start : start + ITEM_BATCH], start=start)
        )
    tags_set(target=suite, raw=meta.get("tags", []))
    return suite


def suite_update_meta(
    *,
    suite: Suite,
    user: User | AnonymousUser | None,
    description: str,
    reference: str,
    author: str,
    comment: str,
    tags: Iterable[str],
) -> Suite:
    """Change what describes a suite; its content (and so its content hash) stays."""
    change_check(user, suite, what="the suite", verb="change")
    with transaction.atomic():
        suite.description = description
        suite.reference = reference
        suite.author = author
        suite.comment = comment
        suite.save(update_fields=["description", "reference", "author", "comment", "updated_at"])
        tags_set(target=suite, raw=tags)
    return suite


def suite_replace(
    *,
    suite: Suite,
    user: User | AnonymousUser | None,
    source: str | bytes | dict[str, Any] | formats.FormatResult,
) -> ImportReport:
    """Swap a suite's content for a new upload, keeping its identity (owner, evaluations)."""
    change_check(user, suite, what="the suite", verb="replace")
    return suite_import(source=source, owner=suite.owner, replace=suite)


def copy_name(name: str, attempt: int) -> str:
    """'<name> (copy)', then '<name> (copy 2)', …, cut to fit the name length limit."""
    suffix = " (copy)" if attempt == 1 else f" (copy {attempt})"
    base = name[: NAME_MAX_LENGTH - len(suffix)].rstrip()
    return base + suffix


def suite_copy(*, suite: Suite, owner: User) -> ImportReport:
    """Copy any suite into `owner`'s suites under the first free name of
    '<name> (copy)', '<name> (copy 2)', …

    Raises SuiteInvalid when the stored suite no longer passes today's checks, and
    NoFreeName when MAX_COPY_ATTEMPTS names are all taken."""
    data = selectors.suite_canonical(suite)
    stem = copy_name(suite.name, 1)[: -len(" (copy)")]
    taken = set(Suite.objects.filter(name__startswith=stem).values_list("name", flat=True))
    for attempt in range(1, MAX_COPY_ATTEMPTS + 1):
        new_name = copy_name(suite.name, attempt)
        if new_name in taken:
            continue
        try:
            return suite_import(source=data, owner=owner, name=new_name)
        except SuiteInvalid as invalid:
            # Someone took the name in the meantime: try the next one. Any other error
            # means the stored suite no longer passes today's checks.
            if not (
                all(e.location == NAME_LOCATION for e in invalid.errors)
                and Suite.objects.filter(name=new_name).exists()
            ):
                raise
    raise NoFreeName("Could not find a free name for the copy; rename some copies first.")


def suite_delete(*, suite: Suite, user: User | AnonymousUser | None) -> str:
    """Delete a suite, or archive it when it has results: results are their requesters'
    data, so they stay (with the suite they refer to), and only the lists forget it.
    Returns "deleted" or "archived"."""
    change_check(user, suite, what="the suite", verb="delete")
    with transaction.atomic():
        locked = Suite.objects.select_for_update().get(pk=suite.pk)
        if locked.evaluations.exists():
            if locked.archived_at is None:
                locked.archived_at = timezone.now()
                locked.save(update_fields=["archived_at"])
            suite.archived_at = locked.archived_at
            return "archived"
        locked.delete()
    return "deleted"
