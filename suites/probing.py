"""Writes to probing tasks: importing a SentEval-style file is one function, called by
the command (and later the upload page and the API)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.utils.text import slugify

from suites.formats.probing import (
    LineSource,
    ProbingReader,
    guess_task_type,
    iter_probing,
)
from suites.formats.report import SuiteError
from suites.models import ProbingInstance, ProbingTask, Tag

NAME_MAX_LENGTH = 200
# Rows per INSERT: large enough that a 120,000-line file takes a few dozen statements.
BATCH_SIZE = 5000
_NAME_FORBIDDEN = re.compile(r"[/\\\x00-\x1f\x7f]")


class ProbingTaskInvalid(Exception):
    """The task cannot be saved; `errors` says where and why. Nothing was written."""

    def __init__(self, errors: list[SuiteError]) -> None:
        super().__init__("; ".join(str(error) for error in errors[:3]))
        self.errors = errors


def _name_errors(name: str) -> list[SuiteError]:
    if not name.strip():
        return [SuiteError("name", "a probing task needs a name")]
    if len(name) > NAME_MAX_LENGTH:
        return [SuiteError("name", f"the name is longer than {NAME_MAX_LENGTH} characters")]
    if _NAME_FORBIDDEN.search(name):
        return [SuiteError("name", "the name may not contain slashes or control characters")]
    if ProbingTask.objects.filter(name=name).exists():
        return [SuiteError("name", f"a probing task named '{name}' exists; choose another name")]
    return []


def probing_task_import(
    *,
    source: LineSource,
    name: str,
    owner: AbstractBaseUser | None,
    task_type: str | None = None,
    description: str = "",
    tags: Iterable[str] = (),
) -> ProbingTask:
    """Read, check and store a probing file in one transaction.

    Instances are inserted in batches while the file streams through the reader; the
    checks that need the whole file run at the end, and a failure rolls every row back.
    `task_type` defaults to the SentEval task the name stands for, else "custom".
    Raises ProbingTaskInvalid listing every problem.
    """
    name = name.strip()
    if task_type is None:
        task_type = guess_task_type(name)
    try:
        reader = ProbingReader(task_type)
    except ValueError as exc:
        raise ProbingTaskInvalid([SuiteError("type", str(exc))]) from None
    errors = _name_errors(name)
    if errors:
        raise ProbingTaskInvalid(errors)
    try:
        with transaction.atomic():
            task = ProbingTask.objects.create(
                name=name,
                owner=owner,
                description=description,
                task_type=task_type,
                content_hash="",
            )
            # Plain parameterised INSERTs: building 120,000 model objects costs more
            # than the database's work on them (see benchmarks/probing.py).
            table = ProbingInstance._meta.db_table
            insert = (
                f"INSERT INTO {table} (task_id, line, partition, label, sentence, n_words, "
                "extra) VALUES (%s, %s, %s, %s, %s, %s, %s)"
            )
            batch: list[tuple[object, ...]] = []
            with connection.cursor() as cursor:
                for item in iter_probing(source, reader):
                    batch.append(
                        (
                            task.pk,
                            item.line,
                            item.partition,
                            item.label,
                            item.sentence,
                            item.n_words,
                            json.dumps(list(item.extra), ensure_ascii=False),
                        )
                    )
                    if len(batch) >= BATCH_SIZE:
                        cursor.executemany(insert, batch)
                        batch = []
                if batch:
                    cursor.executemany(insert, batch)
            summary = reader.finish()
            if not summary.ok:
                raise ProbingTaskInvalid(summary.errors)
            task.content_hash = summary.content_hash
            task.labels = summary.labels
            task.counts = {
                partition: {label: counter[label] for label in summary.labels if counter[label]}
                for partition, counter in summary.counts.items()
            }
            task.extra_columns = summary.n_extra
            task.instance_count = summary.total
            task.save()
            slugs = sorted({slug for slug in (slugify(tag)[:64] for tag in tags) if slug})
            task.tags.set([Tag.objects.get_or_create(name=slug)[0] for slug in slugs])
    except IntegrityError as exc:  # a task of that name was saved meanwhile
        raise ProbingTaskInvalid([SuiteError("name", f"cannot save: {exc}")]) from None
    return task
