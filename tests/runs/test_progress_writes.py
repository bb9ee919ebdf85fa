"""A progress report writes the progress columns of its run and nothing else, and never
touches the suite's snapshot (36 MB at 100,000 items). The snapshot has a table of its
own (`EvaluationSnapshot`), not a column of the row progress updates: SQLite reads the
whole row to update it, and rewrites its overflow pages when the record's size changes."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evaluations.models import Evaluation, EvaluationSnapshot, LanguageModel
from evaluations.runs import tasks
from evaluations.syntaxgym import services
from suites.syntaxgym import services as suite_services
from tests.conftest import small_suite

pytestmark = pytest.mark.django_db

TABLE = Evaluation._meta.db_table
PROGRESS_COLUMNS = {"status", "started_at", "progress_done", "progress_total"}


@pytest.fixture
def evaluation(alice) -> Evaluation:
    suite = suite_services.suite_import(source=small_suite("progress rows"), owner=alice).suite
    model = LanguageModel.objects.create(name="m", display_name="M", source="/models/m")
    return services.evaluation_request(model=model, suites=[suite], user=alice).evaluations[0]


def _run_writes(queries: list[dict[str, str]]) -> list[str]:
    """The statements that write the runs' table."""
    return [
        q["sql"]
        for q in queries
        if re.match(rf'\s*UPDATE\s+"?{TABLE}"?\s', q["sql"], re.IGNORECASE)
        or re.match(rf'\s*INSERT\s+INTO\s+"?{TABLE}"?', q["sql"], re.IGNORECASE)
    ]


def _set_columns(sql: str) -> set[str]:
    assignments = re.search(r"\sSET\s(.*?)\sWHERE\s", sql, re.IGNORECASE | re.DOTALL)
    assert assignments, sql
    return set(re.findall(r'"?(\w+)"?\s*=', assignments.group(1)))


def _assert_progress_updates_only(writes: list[str]) -> None:
    """Every write is an UPDATE that sets progress columns (PROGRESS_COLUMNS) only."""
    for sql in writes:
        assert sql.lstrip().upper().startswith("UPDATE"), sql
        assert _set_columns(sql) <= PROGRESS_COLUMNS, sql


def _report(
    evaluation: Evaluation, done: int, *, restart: bool = False, parts: int = 1
) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        if parts == 1:
            tasks.progress.apply(args=("suite", evaluation.pk, 1, done, 4, restart))
        else:
            entry = {"run": evaluation.pk, "attempt": 1, "part": 0, "parts": parts}
            tasks.progress_parts.apply(
                args=("suite", [{**entry, "done": done, "size": 2}], restart)
            )
    # Neither read nor written: the snapshot's table is not named by any statement.
    assert not any("snapshot" in q["sql"] for q in captured.captured_queries)
    return _run_writes(captured.captured_queries)


def test_the_row_progress_updates_holds_no_snapshot(evaluation) -> None:
    """The migrated schema, as the database has it: the evaluations' table has no
    snapshot column, and the snapshot is in its own table."""
    with connection.cursor() as cursor:
        columns = {c.name for c in connection.introspection.get_table_description(cursor, TABLE)}
    assert "progress_done" in columns
    assert not any("snapshot" in c for c in columns), columns
    stored = EvaluationSnapshot.objects.get(evaluation=evaluation).content
    assert stored["meta"]["name"] == "progress rows"
    assert Evaluation.objects.get(pk=evaluation.pk).snapshot == stored


def test_progress_leaves_the_snapshot_as_it_was(evaluation) -> None:
    before = EvaluationSnapshot.objects.get(evaluation=evaluation).content
    _report(evaluation, 0, restart=True)
    _report(evaluation, 2)
    assert EvaluationSnapshot.objects.get(evaluation=evaluation).content == before
    evaluation.refresh_from_db()
    assert evaluation.progress_done == 2


def test_progress_writes_only_the_progress_columns(evaluation) -> None:
    assert EvaluationSnapshot.objects.filter(evaluation=evaluation).exists()
    writes = [
        *_report(evaluation, 0, restart=True),
        *_report(evaluation, 1),
        *_report(evaluation, 3),
    ]
    # The first report starts the run, the others move its progress: each one an UPDATE.
    assert len(writes) >= 3, writes
    _assert_progress_updates_only(writes)
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.progress_done) == ("running", 3)


def test_progress_of_a_split_run_writes_only_the_progress_columns(evaluation) -> None:
    writes = [*_report(evaluation, 0, restart=True, parts=2), *_report(evaluation, 1, parts=2)]
    assert len(writes) >= 2, writes
    _assert_progress_updates_only(writes)
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.progress_done) == ("running", 1)
