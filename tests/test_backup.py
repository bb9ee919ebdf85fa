"""Backup and restore (`gym_backup`, `gym_restore`, `gym/backup.py`): a site with every
kind of data is backed up and restored into an empty site, a separate process with its
own var folder and database (SQLite; with DATABASE_URL set, a throw-away PostgreSQL
database), which finds every suite, set, task, corpus, model, run and result, and the
files. A damaged backup, a site that holds data and a folder that is not empty are
refused with the reason; a backup of an older schema is migrated forward."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from evaluations.models import (
    ItemResult,
    LanguageModel,
    PairEvaluation,
    PairSentenceTokens,
    PredictionResult,
    ProbingLayerResult,
    ProbingRun,
    TrainingRun,
)
from evaluations.syntaxgym.services import evaluation_create
from gym.artifacts import artifact_storage
from suites.corpora.services import corpus_import
from suites.minimal_pairs import sets as pair_sets
from suites.models import PairSetSentence, ProbingInstance, Suite
from suites.probing.services import probing_task_import
from suites.syntaxgym import services as suite_services
from tests.conftest import EXAMPLES, manage, small_suite

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

CORPUS_TEXT = "the dog barks\nthe dogs bark\nthe cat that the dogs chase sleeps\n"
POSTGRES = connection.vendor == "postgresql"


@pytest.fixture
def site(settings, tmp_path, alice) -> dict[str, Any]:
    """A site in its own var folder with two suites, a pair set, a probing task, a corpus,
    three models (a hub id, a local folder, a trained model), a done run of every kind
    with its results, and a result file on its way to the database."""
    var = tmp_path / "site"
    settings.VAR_DIR = var
    settings.GYM_CORPUS_DIR = var / "corpora"
    settings.GYM_MODEL_DIRS = [var / "models"]
    settings.GYM_TRAINING_DIR = ""
    settings.GYM_RUN_RESULTS_DIR = str(var / "results")
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    # The artifact store as the embedded default keeps it: var/artifacts.
    settings.GYM_ARTIFACTS_DIR = var / "artifacts"
    store = artifact_storage("", var / "artifacts", endpoint="", region="us-east-1")
    settings.STORAGES = {**settings.STORAGES, "artifacts": store}

    agreement = suite_services.suite_import(
        source=small_suite("agreement kept", tags=["agreement"]), owner=alice
    ).suite
    suite_services.suite_import(source=small_suite("second suite"), owner=None)
    pair_set = pair_sets.minimal_pair_set_import(
        data=(EXAMPLES / "minimal_pairs" / "agreement_minimal_pairs.tsv").read_bytes(),
        name="pairs kept",
        owner=alice,
        filename="agreement_minimal_pairs.tsv",
    ).pair_set
    task = probing_task_import(
        source=(EXAMPLES / "probing" / "subject_number_attractors.txt").read_text(),
        name="probing kept",
        owner=alice,
    )
    text = tmp_path / "corpus.txt"
    text.write_text(CORPUS_TEXT)
    corpus = corpus_import(source=text, name="corpus kept", owner=alice)

    local = var / "models" / "local-lm"
    local.mkdir(parents=True)
    (local / "config.json").write_text('{"model_type": "gpt2"}')
    trained = var / "models" / "trained" / "run-1"
    (trained / "checkpoint-64").mkdir(parents=True)
    (trained / "checkpoint-64" / "weights.bin").write_bytes(bytes(range(256)) * 4)
    hub = LanguageModel.objects.create(name="hub-lm", display_name="Hub LM", source="org/hub-lm")
    folder = LanguageModel.objects.create(
        name="local-lm", display_name="Local LM", source=str(local), kind="causal"
    )
    made = LanguageModel.objects.create(
        name="trained-lm", display_name="Trained LM", source=str(trained), kind="causal"
    )

    evaluation = evaluation_create(
        model=hub,
        suite=agreement,
        content_hash=agreement.content_hash,
        snapshot={"meta": {"name": agreement.name}},
        status="done",
        accuracy=0.625,
        ties=1,
    )
    PredictionResult.objects.create(
        evaluation=evaluation, position=0, formula="(2;%mismatch%) > (2;%match%)", accuracy=0.5
    )
    for n in (1, 2):
        ItemResult.objects.create(
            evaluation=evaluation,
            item_number=n,
            position=n - 1,
            values={"match": {"sum": [1.5 * n, 2.25, 0.5]}},
            outcomes=[n == 1],
            passed=n == 1,
        )
    pair_run = PairEvaluation.objects.create(
        model=folder,
        pair_set=pair_set,
        content_hash=pair_set.content_hash,
        status="done",
        accuracy=0.75,
    )
    PairSentenceTokens.objects.create(
        evaluation=pair_run, position=0, sentid="1", tokens={"t": ["The", " dog"], "s": [3.5, 7.25]}
    )
    probing_run = ProbingRun.objects.create(
        model=folder, task=task, content_hash=task.content_hash, status="done", best_te=0.875
    )
    for layer, te in ((0, 0.5), (1, 0.875)):
        ProbingLayerResult.objects.create(
            run=probing_run, layer=layer, va_accuracy=te - 0.125, te_accuracy=te
        )
    TrainingRun.objects.create(
        model=made,
        corpus=corpus,
        content_hash=corpus.content_hash,
        training_kind="causal",
        legacy_out_dir=str(trained),
        status="done",
        checkpoints=[{"step": 1, "tokens": 64, "model": "trained-lm@64"}],
    )
    (var / "results").mkdir()
    (var / "results" / "suite-9-1-abc.json").write_text('{"sentences": []}')
    # Not users' data: the broker's folder, the cache, beat's schedule.
    (var / "redis").mkdir()
    (var / "redis" / "appendonly.aof").write_text("*1\r\n")
    (var / "cache").mkdir()
    (var / "cache" / "x.djcache").write_text("cached")
    (var / "celerybeat-schedule").write_text("beat")
    return {"var": var, "corpus": corpus, "local": local, "trained": trained}


def site_env(var: Path, database_url: str | None) -> dict[str, str]:
    """The environment of a separate site in `var`, with no setting of this one's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GYM_") and k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    env |= {"GYM_VAR_DIR": str(var), "GYM_RUN_RESULTS_DIR": str(var / "results")}
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


# Read in the restored site: what a person would look for.
INSPECT = """
import json
from django.contrib.auth import get_user_model
from evaluations.models import *
from suites.models import *
alice = get_user_model().objects.get(username="alice")
evaluation = Evaluation.objects.get()
corpus = Corpus.objects.get()
local = LanguageModel.objects.get(name="local-lm")
training = TrainingRun.objects.get()
print(json.dumps({
    "counts": {
        "users": get_user_model().objects.count(),
        "suites": Suite.objects.count(),
        "items": Item.objects.count(),
        "pair_sets": MinimalPairSet.objects.count(),
        "pair_sentences": PairSetSentence.objects.count(),
        "probing_tasks": ProbingTask.objects.count(),
        "probing_instances": ProbingInstance.objects.count(),
        "corpora": Corpus.objects.count(),
        "models": LanguageModel.objects.count(),
        "evaluations": Evaluation.objects.count(),
        "item_results": ItemResult.objects.count(),
        "prediction_results": PredictionResult.objects.count(),
        "pair_evaluations": PairEvaluation.objects.count(),
        "pair_tokens": PairSentenceTokens.objects.count(),
        "probing_runs": ProbingRun.objects.count(),
        "probing_layers": ProbingLayerResult.objects.count(),
        "training_runs": TrainingRun.objects.count(),
    },
    "alice_password": alice.check_password("alice-pass-1234"),
    "suites": sorted(Suite.objects.values_list("name", flat=True)),
    "suite_owner": Suite.objects.get(name="agreement kept").owner.username,
    "suite_tags": sorted(Suite.objects.get(name="agreement kept").tags.values_list("name", flat=True)),
    "accuracy": [evaluation.accuracy, evaluation.ties, evaluation.suite.name, evaluation.model.name],
    "snapshot": evaluation.snapshot,
    "item_values": list(ItemResult.objects.order_by("item_number").values_list("values", flat=True)),
    "pair_accuracy": PairEvaluation.objects.get().accuracy,
    "pair_tokens": PairSentenceTokens.objects.get().tokens,
    "probing": [ProbingRun.objects.get().best_te, list(ProbingLayerResult.objects.order_by("layer").values_list("te_accuracy", flat=True))],
    "corpus": [corpus.name, corpus.line_count, corpus.path.read_text()],
    "local_source": local.source,
    "local_config": (Path(local.source) / "config.json").read_text(),
    "training": [training.legacy_out_dir, training.checkpoints, training.corpus.name],
}))
"""


def inspect(env: dict[str, str]) -> dict[str, Any]:
    answer = manage(env, "shell", "--no-imports", "-c", "from pathlib import Path\n" + INSPECT)
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout.strip().splitlines()[-1])


@pytest.fixture
def empty_database() -> Iterator[str | None]:
    """The DATABASE_URL of an empty site's database: None (SQLite, a file in its var
    folder), or a throw-away PostgreSQL database dropped afterwards."""
    if not POSTGRES:
        yield None
        return
    db = connection.settings_dict
    name = f"gymrestore_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    user = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    try:
        yield f"postgres://{user}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_restore_into_an_empty_site_finds_everything(site, tmp_path, empty_database) -> None:
    backup = tmp_path / "backup"
    call_command("gym_backup", str(backup))
    manifest = json.loads((backup / "manifest.json").read_text())
    assert manifest["database"]["engine"] == connection.vendor
    assert manifest["counts"] | {"runs": None} == {
        "users": 1,
        "suites": 2,
        "pair_sets": 1,
        "probing_tasks": 1,
        "corpora": 1,
        "models": 3,
        "runs": None,
    }
    assert manifest["counts"]["runs"] == {
        "evaluations.Evaluation": 1,
        "evaluations.PairEvaluation": 1,
        "evaluations.ProbingRun": 1,
        "evaluations.TrainingRun": 1,
    }
    assert "0008_training_runs" in manifest["migrations"]["evaluations"]
    assert manifest["gym"]["version"]
    files = {(f["store"], f["path"]): f for f in manifest["files"]}
    assert set(files) == {
        ("corpora", site["corpus"].file_name),
        # The artifact store, a local folder here: the corpus as the workers read it.
        ("artifacts", site["corpus"].artifact_key),
        ("results", "suite-9-1-abc.json"),
        ("models", "local-lm/config.json"),
        ("models", "trained/run-1/checkpoint-64/weights.bin"),
    }
    assert files[("models", "trained/run-1/checkpoint-64/weights.bin")]["bytes"] == 1024

    restored = tmp_path / "restored"
    env = site_env(restored, empty_database)
    answer = manage(env, "gym_restore", str(backup))
    assert answer.returncode == 0, answer.stderr
    assert "restored 2 suites, 1 pair sets, 1 probing tasks, 1 corpora, 3 models, 4 runs" in (
        answer.stdout
    )
    assert "differs from the backup" not in answer.stderr

    found = inspect(env)
    assert PairSetSentence.objects.count() > 0 and ProbingInstance.objects.count() > 0
    assert found["counts"] == {
        "users": 1,
        "suites": 2,
        "items": 4,
        "pair_sets": 1,
        "pair_sentences": PairSetSentence.objects.count(),
        "probing_tasks": 1,
        "probing_instances": ProbingInstance.objects.count(),
        "corpora": 1,
        "models": 3,
        "evaluations": 1,
        "item_results": 2,
        "prediction_results": 1,
        "pair_evaluations": 1,
        "pair_tokens": 1,
        "probing_runs": 1,
        "probing_layers": 2,
        "training_runs": 1,
    }
    assert found["alice_password"] is True
    assert found["suites"] == ["agreement kept", "second suite"]
    assert found["suite_owner"] == "alice" and found["suite_tags"] == ["agreement"]
    assert found["accuracy"] == [0.625, 1, "agreement kept", "hub-lm"]
    assert found["snapshot"] == {"meta": {"name": "agreement kept"}}
    assert found["item_values"] == [
        {"match": {"sum": [1.5, 2.25, 0.5]}},
        {"match": {"sum": [3.0, 2.25, 0.5]}},
    ]
    assert found["pair_accuracy"] == 0.75
    assert found["pair_tokens"] == {"t": ["The", " dog"], "s": [3.5, 7.25]}
    assert found["probing"] == [0.875, [0.5, 0.875]]
    assert found["corpus"] == ["corpus kept", 3, CORPUS_TEXT]
    # Local models' paths now point into this site's folders, where their files are.
    assert found["local_source"] == str(restored / "models" / "local-lm")
    assert found["local_config"] == '{"model_type": "gpt2"}'
    assert found["training"] == [
        str(restored / "models" / "trained" / "run-1"),
        [{"step": 1, "tokens": 64, "model": "trained-lm@64"}],
        "corpus kept",
    ]
    weights = restored / "models" / "trained" / "run-1" / "checkpoint-64" / "weights.bin"
    assert weights.read_bytes() == bytes(range(256)) * 4
    assert (restored / "results" / "suite-9-1-abc.json").read_text() == '{"sentences": []}'
    # The broker's queue, the cache and beat's schedule stayed behind.
    assert not (restored / "redis").exists() and not (restored / "cache").exists()
    assert not (restored / "celerybeat-schedule").exists()

    # A second restore into the now populated site is refused, and changes nothing.
    again = manage(env, "gym_restore", str(backup))
    assert again.returncode == 1
    assert "this site is not empty: its database holds 1 users" in again.stderr
    assert "--force" in again.stderr
    # Forced, it replaces what the site holds with the backup's (in one transaction on
    # PostgreSQL: the tables go and come together).
    (restored / "corpora" / site["corpus"].file_name).write_text("changed\n")
    forced = manage(env, "gym_restore", str(backup), "--force")
    assert forced.returncode == 0, forced.stderr
    assert inspect(env) == found


def test_damaged_backup_is_refused_before_anything_changes(site, tmp_path) -> None:
    backup = tmp_path / "backup"
    call_command("gym_backup", str(backup))
    corpus_copy = backup / "files" / "corpora" / site["corpus"].file_name
    damaged = bytearray(corpus_copy.read_bytes())
    damaged[4] ^= 0x20  # same size, one letter's case
    corpus_copy.write_bytes(bytes(damaged))
    (backup / "files" / "models" / "local-lm" / "config.json").unlink()

    restored = tmp_path / "restored"
    answer = manage(site_env(restored, None), "gym_restore", str(backup))
    assert answer.returncode == 1
    assert "does not match its manifest" in answer.stderr
    assert f"files/corpora/{site['corpus'].file_name}: its sha256 differs" in answer.stderr
    assert "files/models/local-lm/config.json: missing" in answer.stderr
    # Nothing was restored: no database, no files.
    assert (
        not (restored / "db.sqlite3").exists()
        or not sqlite3.connect(restored / "db.sqlite3")
        .execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        .fetchall()
    )
    assert not (restored / "corpora").exists() and not (restored / "models").exists()

    # The same in this process (whichever engine): the checksum is checked first.
    with pytest.raises(CommandError, match="its sha256 differs"):
        call_command("gym_restore", str(backup))


def test_a_site_with_data_is_refused(site, tmp_path) -> None:
    backup = tmp_path / "backup"
    call_command("gym_backup", str(backup))
    with pytest.raises(CommandError) as refused:
        call_command("gym_restore", str(backup))
    message = str(refused.value)
    assert message.startswith("this site is not empty: its database holds 1 users")
    assert "2 suites" in message and "3 language models" in message
    # The files are this site's own, the same as the backup's: no conflict named.
    assert "would be overwritten" not in message
    assert Suite.objects.count() == 2


def test_backup_folder_must_be_empty_unless_forced(site, tmp_path) -> None:
    backup = tmp_path / "backup"
    backup.mkdir()
    (backup / "notes.txt").write_text("mine")
    with pytest.raises(CommandError, match=r"backup is not empty \(1 entries: notes.txt\)"):
        call_command("gym_backup", str(backup))
    assert sorted(p.name for p in backup.iterdir()) == ["notes.txt"]
    with pytest.raises(CommandError, match="is a file, not a folder"):
        call_command("gym_backup", str(backup / "notes.txt"))

    call_command("gym_backup", str(backup), "--force")
    first = json.loads((backup / "manifest.json").read_text())
    # Again over the first backup: replaced whole, the other file left alone.
    LanguageModel.objects.filter(name="hub-lm").delete()
    call_command("gym_backup", str(backup), "--force")
    second = json.loads((backup / "manifest.json").read_text())
    assert (first["counts"]["models"], second["counts"]["models"]) == (3, 2)
    assert (backup / "notes.txt").read_text() == "mine"

    # --force never deletes what a backup did not make.
    other = tmp_path / "other"
    (other / "files").mkdir(parents=True)
    (other / "files" / "keep.txt").write_text("kept")
    with pytest.raises(CommandError, match="holds files but is no Gym backup's folder"):
        call_command("gym_backup", str(other), "--force")
    assert (other / "files" / "keep.txt").read_text() == "kept"


def test_restore_refuses_a_folder_that_is_no_backup(tmp_path) -> None:
    with pytest.raises(CommandError, match="no such folder"):
        call_command("gym_restore", str(tmp_path / "nowhere"))
    with pytest.raises(CommandError, match="holds no manifest.json: not a Gym backup"):
        call_command("gym_restore", str(tmp_path))
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(CommandError, match="is not valid JSON"):
        call_command("gym_restore", str(tmp_path))
    unsafe = {
        "format": "gym-backup",
        "format_version": 1,
        "database": {"file": "database.sqlite3"},
        "migrations": {},
        "counts": {},
        "stores": {"var": {}},
        "files": [{"store": "var", "path": "../../etc/passwd", "bytes": 1, "sha256": "0"}],
    }
    (tmp_path / "manifest.json").write_text(json.dumps(unsafe))
    with pytest.raises(CommandError, match="unsafe path"):
        call_command("gym_restore", str(tmp_path))


@pytest.mark.skipif(POSTGRES, reason="SQLite's online backup API")
def test_sqlite_backup_while_another_process_writes(site, tmp_path) -> None:
    """The copy is consistent although another connection commits all the while."""
    database = connection.settings_dict["NAME"]
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        other = sqlite3.connect(database, timeout=30)
        n = 0
        while not stop.is_set() or n < 20:
            with other:
                other.execute("INSERT INTO auth_group (name) VALUES (?)", (f"group {n}",))
            n += 1
            written.append(n)
        other.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while len(written) < 5:
            stop.wait(0.01)
        call_command("gym_backup", str(tmp_path / "backup"))
    finally:
        stop.set()
        writer.join()
    copy = sqlite3.connect(tmp_path / "backup" / "database.sqlite3")
    assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    groups = copy.execute("SELECT COUNT(*) FROM auth_group").fetchone()[0]
    assert 5 <= groups <= len(written)
    assert copy.execute("SELECT COUNT(*) FROM suites_suite").fetchone()[0] == 2


@pytest.mark.skipif(POSTGRES, reason="one engine is enough to show the schema moving forward")
def test_backup_of_an_older_schema_is_migrated_forward(tmp_path) -> None:
    old = site_env(tmp_path / "old", None)
    assert manage(old, "migrate", "-v0").returncode == 0
    # The site as it was before training runs came (their migration undone).
    assert manage(old, "migrate", "evaluations", "0007", "-v0").returncode == 0
    made = manage(
        old | {"DJANGO_SUPERUSER_PASSWORD": "erin-pass-1234"},
        "createsuperuser",
        "--noinput",
        "--username",
        "erin",
        "--email",
        "erin@example.org",
    )
    assert made.returncode == 0, made.stderr
    backed_up = manage(old, "gym_backup", str(tmp_path / "backup"))
    assert backed_up.returncode == 0, backed_up.stderr
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert manifest["migrations"]["evaluations"][-1] == "0007_run_parts"
    assert manifest["counts"]["runs"]["evaluations.TrainingRun"] is None  # no table yet

    new = site_env(tmp_path / "new", None)
    restored = manage(new, "gym_restore", str(tmp_path / "backup"))
    assert restored.returncode == 0, restored.stderr
    assert "differs from the backup" not in restored.stderr
    database = sqlite3.connect(tmp_path / "new" / "db.sqlite3")
    applied = {
        name
        for (name,) in database.execute(
            "SELECT name FROM django_migrations WHERE app = 'evaluations'"
        )
    }
    assert "0008_training_runs" in applied
    assert database.execute("SELECT username FROM auth_user").fetchall() == [("erin",)]
    assert database.execute("SELECT COUNT(*) FROM evaluations_trainingrun").fetchone() == (0,)


def test_backups_kept_in_the_var_folder_are_not_backed_up_again(site) -> None:
    first, second = site["var"] / "backups" / "one", site["var"] / "backups" / "two"
    call_command("gym_backup", str(first))
    call_command("gym_backup", str(second))
    manifest = json.loads((second / "manifest.json").read_text())
    assert not [f for f in manifest["files"] if f["path"].startswith("backups/")]
    assert {f["store"] for f in manifest["files"]} == {"corpora", "results", "models", "artifacts"}
