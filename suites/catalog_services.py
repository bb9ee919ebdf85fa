"""What the kinds of test data (suites, minimal-pair sets, probing tasks, corpora) share
when they are written: who may change one, the checks on its name and a free name, its
tags, and the errors that say nothing was saved. Each kind's own services build on these;
lists are `catalog`'s, the upload convention `catalog_api`'s."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import IntegrityError, models, transaction
from django.utils.text import slugify

from gym.errors import ApplicationError, invalid_entries
from suites.formats.limits import SETTINGS, InputLimits
from suites.formats.report import SuiteError
from suites.formats.syntaxgym import DESCRIPTION_MAX_LENGTH, TAG_MAX_LENGTH, TAGS_MAX_COUNT
from suites.models import GymData, Tag

NAME_MAX_LENGTH = 200
# Names appear in URLs (/suites/<name>/); a slash would split them.
_NAME_FORBIDDEN = re.compile(r"[/\\\x00-\x1f\x7f]")


class DataInvalid(ApplicationError):
    """A minimal-pair set or probing task cannot be saved; `errors` lists every problem
    (each says where and what). Nothing was written."""

    def __init__(self, errors: Sequence[Any]) -> None:
        super().__init__("; ".join(str(e) for e in errors[:3]))
        self.errors = list(errors)

    def error_list(self) -> list[dict[str, Any]]:
        return invalid_entries(self.errors)


class PermissionDenied(DjangoPermissionDenied):
    """The user may not do this; pages and the API answer 403 with the message."""


def can_change(user: User | AnonymousUser | None, suite: GymData) -> bool:
    """Owners change their suites (and minimal-pair sets, probing tasks); staff change
    any (and the site's own examples)."""
    if user is None or not user.is_authenticated:
        return False
    owner_id = suite.owner_id
    return bool(user.is_staff) or (owner_id is not None and owner_id == user.pk)


def change_check(user: User | AnonymousUser | None, row: GymData, *, what: str, verb: str) -> None:
    """Raise PermissionDenied unless `user` may change `row` ("only the suite's owner (or
    staff) may replace it"): the services' check, and the APIs' before they read a body."""
    if not can_change(user, row):
        raise PermissionDenied(f"only {what}'s owner (or staff) may {verb} it")


def tag_slugs(raw: Iterable[str]) -> list[str]:
    """Tags as stored: lower-case slugs, unique, sorted. Not cut short: tag_list_errors
    refuses a long one with its real length, before anything is stored."""
    return sorted({slug for slug in (slugify(str(t)) for t in raw) if slug})


def tag_list_errors(
    slugs: Sequence[str], *, where: tuple[str | int, ...], noun: str
) -> list[SuiteError]:
    """What is wrong with `slugs` as the tags of one `noun` (a suite, a probing task):
    too long a tag, too many tags."""
    errors = [
        SuiteError.at(
            where,
            f"the tag {slug[:50]!r} is {len(slug)} characters long; a tag is a short label "
            f"of at most {TAG_MAX_LENGTH} characters",
        )
        for slug in slugs
        if len(slug) > TAG_MAX_LENGTH
    ]
    if len(slugs) > TAGS_MAX_COUNT:
        errors.append(
            SuiteError.at(
                where,
                f"the {noun} would have {len(slugs)} tags; keep the {TAGS_MAX_COUNT} that "
                "describe it best",
            )
        )
    return errors


def tag_problems(raw: Iterable[str], *, noun: str) -> list[str]:
    """What is wrong with `raw` (tags as given) as the tags of one `noun`, as messages:
    the check every kind's import makes before it writes anything."""
    return [e.message for e in tag_list_errors(tag_slugs(raw), where=("tags",), noun=noun)]


# Characters that change how a name looks without being seen: bidirectional overrides
# and isolates, zero-width joiners and spaces, other format and control characters,
# unassigned and private-use code points, line and paragraph separators.
_INVISIBLE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def invisible_characters(text: str) -> str:
    """'' when the text is clean, else a description of its first invisible character."""
    for position, char in enumerate(text, start=1):
        if unicodedata.category(char) in _INVISIBLE_CATEGORIES:
            label = unicodedata.name(char, "an unnamed character").lower()
            return f"invisible or direction-changing characters such as U+{ord(char):04X} ({label}) at position {position}"
    return ""


def description_problem(description: str) -> str:
    """What is wrong with `description` as any kind's description: '' when it is within
    DESCRIPTION_MAX_LENGTH characters."""
    if len(description) > DESCRIPTION_MAX_LENGTH:
        return (
            f"the description is {len(description):,} characters long; shorten it to at most "
            f"{DESCRIPTION_MAX_LENGTH:,}"
        )
    return ""


def name_problem(
    *,
    name: str,
    model: type[models.Model],
    noun: str,
    replace: models.Model | None = None,
    reserved: Collection[str] = (),
    advice: str = "choose another name",
) -> str:
    """What is wrong with `name` as the name of a `model` row (a suite, a minimal-pair
    set, a probing task, a corpus; `noun` says which in the message): empty, reserved by
    the kind's URLs, too long, slashes or control or invisible characters, dots only,
    spaces at either end, or taken by a row other than `replace`. '' when it is free. `advice` ends the
    message about a taken name."""
    if not name.strip():
        return f"the {noun} needs a name"
    if name in reserved:
        return f"{name!r} is reserved for a page of the site; choose another name"
    if len(name) > NAME_MAX_LENGTH:
        return f"the name is {len(name)} characters long; shorten it to at most {NAME_MAX_LENGTH}"
    if _NAME_FORBIDDEN.search(name):
        return "the name may not contain slashes or control characters"
    if not name.strip("."):
        # '.' and '..' are steps in a URL's path: /corpora/../ is /.
        return (
            f"a name of dots only ({name[:10]!r}) would be read as a step in the page's "
            "address; add a letter or digit"
        )
    if invisible := invisible_characters(name):
        return f"the name may not contain {invisible}"
    if name != name.strip():
        return "the name may not start or end with spaces"
    if name_taken(model, name, replace=replace):
        # Who owns it is not said: a name must not reveal other people's accounts.
        return f"a {noun} named {name!r} already exists; {advice}"
    return ""


def name_and_tag_errors(
    *,
    name: str,
    model: type[GymData],
    noun: str,
    reserved: Collection[str],
    tags: Iterable[str] = (),
    description: str = "",
) -> list[SuiteError]:
    """What is wrong with `name` as the name of a new `model` row (see name_problem), with
    `tags` as its tags and with its `description`, each error at "name", "tags" or
    "description": the checks of an import whose errors are SuiteErrors (probing tasks,
    corpora) before it writes anything."""
    problem = name_problem(name=name, model=model, noun=noun, reserved=reserved)
    errors = [SuiteError("name", problem)] if problem else []
    errors += [SuiteError("tags", message) for message in tag_problems(tags, noun=noun)]
    if problem := description_problem(description):
        errors.append(SuiteError("description", problem))
    return errors


@contextmanager
def named_row_write(
    *,
    name: str,
    model: type[GymData],
    noun: str,
    reserved: Collection[str],
    invalid: type[DataInvalid],
) -> Iterator[None]:
    """One transaction that writes a new `model` row named `name`, checked beforehand
    with name_and_tag_errors. Another request may take the name between the check and
    the insert: the unique name's IntegrityError then becomes `invalid`, with the name's
    errors, and nothing is written."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError:
        errors = name_and_tag_errors(name=name, model=model, noun=noun, reserved=reserved)
        raise invalid(errors or [SuiteError("name", f"a {noun} named {name!r} exists")]) from None


def name_taken(
    model: type[models.Model], name: str, *, replace: models.Model | None = None
) -> bool:
    """Whether a row of `model` other than `replace` is named `name`."""
    clash = model._default_manager.filter(name=name)
    if replace is not None:
        clash = clash.exclude(pk=replace.pk)
    return clash.exists()


def upload_name(
    model: type[GymData], name: str, *, rename_if_taken: bool, replace: GymData | None = None
) -> str:
    """The name an upload is saved under: `name`, or with `rename_if_taken` the first
    free '<name> (2)', … when a row other than `replace` has it (see `free_name`)."""
    if rename_if_taken and name.strip() and name_taken(model, name, replace=replace):
        return free_name(model, name)
    return name


def free_name(model: type[GymData], wanted: str) -> str:
    """The first of '<wanted> (2)', '<wanted> (3)', … that no row of `model` (suites,
    minimal-pair sets, probing tasks) has, cut to fit the name length limit."""
    stem = wanted[: NAME_MAX_LENGTH - len(" (999)")].rstrip()
    taken = set(model._default_manager.filter(name__startswith=stem).values_list("name", flat=True))
    n = 2
    while f"{stem} ({n})" in taken:
        n += 1
    return f"{stem} ({n})"


def tags_set(*, target: GymData, raw: Iterable[str]) -> None:
    """Tag a suite, a minimal-pair set or a probing task with `raw` as slugs (creating
    the tags that are new), inside the caller's transaction."""
    slugs = tag_slugs(raw)
    existing = {t.name: t for t in Tag.objects.filter(name__in=slugs)}
    missing = [Tag(name=s) for s in slugs if s not in existing]
    if missing:
        Tag.objects.bulk_create(missing, ignore_conflicts=True)
        existing = {t.name: t for t in Tag.objects.filter(name__in=slugs)}
    target.tags.set([existing[s] for s in slugs])


def upload_limits() -> InputLimits:
    """What one uploaded file may hold (the GYM_UPLOAD_MAX_* settings, named by
    suites.formats.limits.SETTINGS), for the readers in suites/formats, which know no
    settings."""
    return InputLimits(**{limit: getattr(settings, name) for limit, name in SETTINGS.items()})
