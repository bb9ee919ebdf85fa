"""Importing probing tasks into the database: one transaction, streamed, nothing on error."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from suites.models import ProbingInstance, ProbingTask
from suites.probing.services import ProbingTaskInvalid, probing_task_import
from tests.conftest import EXAMPLES
from tests.probing.conftest import sample

pytestmark = pytest.mark.django_db


def test_import_a_real_sample(alice) -> None:
    path = sample("tree_depth")
    task = probing_task_import(
        source=path, name="tree_depth", owner=alice, tags=["Syntax", "senteval"]
    )
    assert task.task_type == "tree_depth" and task.owner == alice
    assert task.instance_count == 710 == task.instances.count()
    assert task.labels == ["5", "6", "7", "8", "9", "10", "11"]
    assert sum(task.counts["tr"].values()) == 245
    assert sorted(tag.name for tag in task.tags.all()) == ["senteval", "syntax"]
    first = task.instances.order_by("line").first()
    assert first is not None
    line = path.read_text(encoding="utf-8").splitlines()[0].split("\t")
    assert (first.line, first.partition, first.label, first.sentence) == (1, *line)
    assert first.n_words == len(line[2].split())
    assert len(task.content_hash) == 64


def test_errors_leave_nothing_behind(alice) -> None:
    # Many good lines first (several insert batches), the fatal problem only at the end.
    good = "".join(f"tr\tPAST\tline {n} .\n" for n in range(12_000))
    text = good + "va\tPAST\tfine .\nte\tPRES\tnever seen in tr .\n"
    with pytest.raises(ProbingTaskInvalid) as caught:
        probing_task_import(source=text, name="past_present", owner=alice)
    assert [str(e) for e in caught.value.errors] == [
        "line 12002: label 'PRES' occurs in 'te' (1 line, the first here) but never in 'tr': "
        "a probe cannot learn a class it never sees"
    ]
    assert ProbingTask.objects.count() == 0 and ProbingInstance.objects.count() == 0


def test_names_types_and_duplicates(alice) -> None:
    text = "tr\tA\ta .\nva\tA\tb .\nte\tA\tc .\n"
    task = probing_task_import(source=text, name="mine", owner=alice)
    assert task.task_type == "custom"
    with pytest.raises(ProbingTaskInvalid, match="exists; choose another name"):
        probing_task_import(source=text, name="mine", owner=alice)
    with pytest.raises(ProbingTaskInvalid, match="slashes"):
        probing_task_import(source=text, name="a/b", owner=alice)
    with pytest.raises(ProbingTaskInvalid, match="unknown probing task type"):
        probing_task_import(source=text, name="x", owner=alice, task_type="tense")
    with pytest.raises(ProbingTaskInvalid, match="not one of past_present's labels"):
        probing_task_import(source=text, name="y", owner=alice, task_type="past_present")
    assert ProbingTask.objects.count() == 1


def test_command_imports_files_and_reports_failures(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("tr\tA\t\nxx\tA\tb\n")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 of 2 file"):
        call_command(
            "import_probing_task", str(sample("past_present")), str(bad), stdout=out, stderr=err
        )
    assert "imported 'past_present' (past_present, 679 instances, 2 labels)" in out.getvalue()
    assert "line 1, field 3: the sentence is empty" in err.getvalue()
    assert "line 2, field 1: partition 'xx' is not one of tr, va, te" in err.getvalue()
    assert list(ProbingTask.objects.values_list("name", flat=True)) == ["past_present"]
    with pytest.raises(CommandError, match="--name names one task"):
        call_command("import_probing_task", str(bad), str(bad), "--name", "x")


def test_the_example_task_loads_as_the_run_command_does() -> None:
    files = sorted((EXAMPLES / "probing").glob("*.txt"))
    assert files
    args = [str(f) for f in files] + ["--skip-existing", "--tag", "agreement"]
    call_command("import_probing_task", *args, stdout=StringIO())
    out = StringIO()
    call_command("import_probing_task", *args, stdout=out)  # a second start skips it
    assert "skipped" in out.getvalue()
    task = ProbingTask.objects.get(name="subject_number_attractors")
    assert task.task_type == "custom" and task.labels == ["PL", "SG"]
    assert set(task.counts) == {"tr", "va", "te"}


def test_awkward_text_survives_the_bulk_insert(alice) -> None:
    sentences = ['say " hi " \\N .', "back \\ slash , ´ é ñ 東京 .", "null \x01 byte-free ."]
    text = "".join(
        f"{partition}\tA\tx{n}\\y\t{sentence}\n"
        for n, (partition, sentence) in enumerate(zip(("tr", "va", "te"), sentences, strict=True))
    )
    task = probing_task_import(source=text.encode(), name="awkward", owner=alice)
    stored = list(task.instances.order_by("line").values_list("sentence", "extra"))
    assert stored == [(s, [f"x{n}\\y"]) for n, s in enumerate(sentences)]
    assert task.extra_columns == 1


@pytest.mark.django_db(transaction=True)
def test_a_database_gone_during_the_copy_of_instances_is_djangos_error() -> None:
    """The instances go in by COPY on the driver's own cursor; a database that goes away
    meanwhile (restarted, a connection ended) must raise Django's OperationalError, which
    the site answers with a 503, not the driver's, which would be a 500."""
    import psycopg
    from django.db import OperationalError, connection

    from suites.probing.services import _write_rows
    from tests.celery_harness import database_url

    if connection.vendor != "postgresql":
        pytest.skip("COPY is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
        with psycopg.connect(database_url(), autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(OperationalError):
            _write_rows(cursor, [(1, 1, "tr", "A", "a b .", 3, None)])
    connection.close()
