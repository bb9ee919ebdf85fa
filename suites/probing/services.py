"""Writes to probing tasks: importing a SentEval-style file is one function, called by
the upload page, the API and `manage.py import_probing_task`."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import QuerySet

from suites.catalog import COMMON_SORTS, catalog_filter
from suites.catalog_services import (
    DataInvalid,
    name_and_tag_errors,
    named_row_write,
    tags_set,
    upload_limits,
    upload_name,
)
from suites.formats.probing import (
    LineSource,
    ProbingReader,
    guess_task_type,
    iter_probing,
)
from suites.formats.report import SuiteError
from suites.models import ProbingInstance, ProbingTask

# Rows per INSERT: large enough that a 120,000-line file takes a few dozen statements.
BATCH_SIZE = 5000


class ProbingTaskInvalid(DataInvalid):
    """The task cannot be saved; `errors` says where and why. Nothing was written."""

    errors: list[SuiteError]


# Names that the task pages' URLs use for themselves.
RESERVED_NAMES = {"upload"}


_COLUMNS = ("task_id", "line", "partition", "label", "sentence", "n_words", "extra")


def _write_rows(cursor: Any, rows: list[tuple[object, ...]]) -> None:
    """Insert instance rows without building model objects (120,000 of them cost more
    than the database's work): COPY on PostgreSQL, one executemany elsewhere."""
    table = connection.ops.quote_name(ProbingInstance._meta.db_table)
    columns = ", ".join(_COLUMNS)
    if connection.vendor == "postgresql":
        # The driver's own cursor: its errors become Django's, as every query's do, so a
        # database that goes away meanwhile is a 503 (gym.middleware), never a 500.
        with (
            connection.wrap_database_errors,
            cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
    else:
        marks = ", ".join(["%s"] * len(_COLUMNS))
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)


def probing_task_import(
    *,
    source: LineSource,
    name: str,
    owner: User | None,
    task_type: str | None = None,
    description: str = "",
    tags: Iterable[str] = (),
    rename_if_taken: bool = False,
) -> ProbingTask:
    """Read, check and store a probing file in one transaction.

    Instances are inserted in batches while the file streams through the reader; the
    checks that need the whole file run at the end, and a failure rolls every row back.
    `task_type` defaults to the SentEval task the name stands for, else "custom".
    `rename_if_taken`: a taken name becomes the first free '<name> (2)', ….
    Raises ProbingTaskInvalid listing every problem.
    """
    name = name.strip()
    if task_type is None:
        task_type = guess_task_type(name)
    name = upload_name(ProbingTask, name, rename_if_taken=rename_if_taken)
    try:
        reader = ProbingReader(task_type, upload_limits())
    except ValueError as exc:
        raise ProbingTaskInvalid([SuiteError("type", str(exc))]) from None
    tags = list(tags)
    errors = name_and_tag_errors(
        name=name,
        model=ProbingTask,
        noun="probing task",
        reserved=RESERVED_NAMES,
        tags=tags,
        description=description,
    )
    if errors:
        raise ProbingTaskInvalid(errors)
    with named_row_write(
        name=name,
        model=ProbingTask,
        noun="probing task",
        reserved=RESERVED_NAMES,
        invalid=ProbingTaskInvalid,
    ):
        task = ProbingTask.objects.create(
            name=name,
            owner=owner,
            description=description,
            task_type=task_type,
            content_hash="",
        )
        batch: list[tuple[object, ...]] = []
        lengths: dict[str, Counter[int]] = {}
        with connection.cursor() as cursor:
            for item in iter_probing(source, reader):
                lengths.setdefault(item.label, Counter())[item.n_words] += 1
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
                    _write_rows(cursor, batch)
                    batch = []
            if batch:
                _write_rows(cursor, batch)
        summary = reader.finish()
        if not summary.ok:
            raise ProbingTaskInvalid(summary.errors)
        task.content_hash = summary.content_hash
        task.labels = summary.labels
        task.counts = {
            partition: {label: counter[label] for label in summary.labels if counter[label]}
            for partition, counter in summary.counts.items()
        }
        task.length_counts = {
            label: {str(n): lengths[label][n] for n in sorted(lengths[label])}
            for label in summary.labels
        }
        task.extra_columns = summary.n_extra
        task.instance_count = summary.total
        task.save()
        tags_set(target=task, raw=tags)
    return task


# Reads shared by the pages and the API.

TASK_SORTS: dict[str, tuple[str, ...]] = {**COMMON_SORTS, "instances": ("-instance_count",)}


def probing_task_list(
    *, q: str = "", tag: str = "", task_type: str = "", sort: str = "name"
) -> QuerySet[ProbingTask]:
    tasks = ProbingTask.objects.all()
    if task_type:
        tasks = tasks.filter(task_type=task_type)
    return catalog_filter(tasks, q=q, tag=tag, sort=sort, sorts=TASK_SORTS)


def probing_task_overview(task: ProbingTask) -> dict[str, Any]:
    """Counts by partition and label (with totals) and the length distribution per label,
    all from the task row: no instance is read."""
    rows = [
        {
            "label": label,
            "tr": task.counts.get("tr", {}).get(label, 0),
            "va": task.counts.get("va", {}).get(label, 0),
            "te": task.counts.get("te", {}).get(label, 0),
        }
        for label in task.labels
    ]
    for row in rows:
        row["total"] = row["tr"] + row["va"] + row["te"]
    totals = {name: sum(row[name] for row in rows) for name in ("tr", "va", "te", "total")}
    lengths = sorted({int(n) for counts in task.length_counts.values() for n in counts})
    return {
        "rows": rows,
        "totals": totals,
        "lengths": {
            "words": lengths,
            "series": [
                {
                    "label": label,
                    "counts": [task.length_counts.get(label, {}).get(str(n), 0) for n in lengths],
                }
                for label in task.labels
            ],
        },
    }
