"""manage.py artifacts_migrate: move an existing install's files into the artifact store.

Copies what the database references and the store lacks (corpora, uploaded models,
trained models with their checkpoints and training states, and models an administrator
registered by a path on this machine, the baselines included), checks each copy by its hash,
points the model rows at the store, and reports what it could not find. What the store
holds already is read back and checked too (a folder against its manifest: a folder half
copied by an interrupted run has no manifest, and is copied again); a damaged copy is
replaced from this machine's file when that checks out, else reported. Idempotent: a
second run copies nothing and changes nothing. The files stay where they were (remove
them by hand once every machine reads the store)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from evaluations.language_models.uploads import UPLOADED_PREFIX
from evaluations.models import LanguageModel
from evaluations.scoring import sources
from evaluations.training import causal
from evaluations.training import stored as in_store
from evaluations.training.models import TrainingRun
from evaluations.training.options import LOSS_FILE
from evaluations.training.services import model_artifact_source, store_folder
from gym import artifacts
from suites.corpora.models import Corpus


@dataclass
class Report:
    copied: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    repointed: list[str] = field(default_factory=list)
    # In the store but not what the database names, with no good copy here to replace it.
    damaged: list[str] = field(default_factory=list)


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="say what would be copied and changed, and copy or change nothing",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        dry = bool(options["dry_run"])
        report = Report()
        try:
            _corpora(report, dry)
            _uploads(report, dry)
            _trained(report, dry)
            _local_models(report, dry)
        except artifacts.StoreUnavailable as exc:
            raise CommandError(f"{exc} Nothing more was copied; run the command again.") from None
        verb = "would copy" if dry else "copied"
        self.stdout.write(
            f"artifacts_migrate into {artifacts.where()}: {verb} {len(report.copied)}, "
            f"{len(report.present)} there already, {len(report.repointed)} model row(s) "
            f"{'to point' if dry else 'pointed'} at the store, {len(report.missing)} missing, "
            f"{len(report.damaged)} damaged"
        )
        for line in report.copied:
            self.stdout.write(f"  {verb}: {line}")
        for line in report.repointed:
            self.stdout.write(f"  {'would point' if dry else 'pointed'}: {line}")
        for line in report.missing:
            self.stdout.write(f"  missing: {line}")
        for line in report.damaged:
            self.stdout.write(f"  damaged: {line}")
        if report.missing:
            self.stderr.write(
                f"{len(report.missing)} file(s) the database names were found neither here nor "
                "in the store: run the command on the machine that has them, or restore them "
                "from a backup."
            )
        if report.damaged:
            self.stderr.write(
                f"{len(report.damaged)} stored copy(ies) failed their hash check and this "
                "machine has no good file to replace them: run the command where the files "
                "are, or restore them from a backup."
            )


def _corpora(report: Report, dry: bool) -> None:
    for corpus in Corpus.objects.order_by("pk"):
        key = corpus.artifact_key
        what = f"corpus {corpus.name} ({key})"
        have = corpus.path.is_file()
        if artifacts.exists_file(key):
            problem = artifacts.stored_problem(key)
            if not problem:
                report.present.append(what)
                continue
            if not have or artifacts.sha256_of(corpus.path)[0] != artifacts.content_hash_of(key):
                report.damaged.append(f"{what}: {problem}")
                continue
            what += f", replacing a stored copy whose {problem.removeprefix('its ')}"
            if not dry:
                artifacts.delete(key)
        elif not have:
            report.missing.append(f"{what}: no file {corpus.file_name} in GYM_CORPUS_DIR")
            continue
        if not dry:
            put = artifacts.put_content(corpus.path, "corpora", link=True)
            if put.key != key:  # the file is not the text the row describes
                artifacts.delete(put.key)
                report.missing.append(f"{what}: the file's hash is {put.sha256}")
                continue
        report.copied.append(what)


def _uploads(report: Report, dry: bool) -> None:
    for model in LanguageModel.objects.exclude(upload_key="").order_by("pk"):
        key = sources.artifact_key(model.source)
        if key is not None:
            _check_present(report, key, f"uploaded model {model.name}")
            continue
        path = Path(model.source)
        key = f"{UPLOADED_PREFIX}/{model.content_hash}"
        key = f"{key}/{path.name}" if path.is_file() else key
        _put_and_point(report, dry, model, path, key, f"uploaded model {model.name}")


# Models registered by their path on this host, once in the store.
LOCAL_PREFIX = "models/local"


def _local_models(report: Report, dry: bool) -> None:
    """Models registered by a path (a folder or an ARPA file under GYM_MODEL_DIRS, the
    baselines): stored under models/local/<sha256 of the content> and pointed at, so that
    no row names a path of this host. Uploads and trained models were handled above."""
    trained = TrainingRun.objects.values("model_id")
    for model in (
        LanguageModel.objects.filter(upload_key="", source__startswith="/")
        .exclude(pk__in=trained)
        .order_by("pk")
    ):
        path = Path(model.source)
        what = f"local model {model.name}"
        if path.is_file():
            key = f"{LOCAL_PREFIX}/{artifacts.sha256_of(path)[0]}/{path.name}"
        elif path.is_dir():
            key = f"{LOCAL_PREFIX}/{_folder_digest(path)}"
        else:
            report.missing.append(f"{what}: nothing at {path}")
            continue
        _put_and_point(report, dry, model, path, key, what)


def _folder_digest(folder: Path) -> str:
    """One hash of a model folder's files (those a copy holds): their paths and hashes."""
    lines = [
        f"{p.relative_to(folder).as_posix()}\t{artifacts.sha256_of(p)[0]}\n"
        for p in sorted(folder.rglob("*"))
        if p.is_file() and _model_file(p.relative_to(folder))
    ]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def _trained(report: Report, dry: bool) -> None:
    for run in (
        TrainingRun.objects.select_related("model").exclude(legacy_out_dir="").order_by("pk")
    ):
        _trained_run(report, dry, run)


def _trained_run(report: Report, dry: bool, run: TrainingRun) -> None:
    """A run from before the store: its folder on this host (the row's legacy path)
    copied, and the path dropped from the row once nothing of it is missing."""
    folder = store_folder(run)
    out_dir = Path(run.legacy_out_dir)
    missing = len(report.missing)
    _trained_files(report, dry, run, folder, out_dir)
    loss = out_dir / LOSS_FILE
    if loss.is_file() and not artifacts.exists(in_store.loss_key(folder)):
        if not dry:
            artifacts.put_file(in_store.loss_key(folder), loss)
        report.copied.append(f"loss log of {run.model.name}")
    if len(report.missing) == missing and not dry:
        TrainingRun.objects.filter(pk=run.pk).update(legacy_out_dir="")


def _trained_files(report: Report, dry: bool, run: TrainingRun, folder: str, out_dir: Path) -> None:
    for record in run.checkpoints:
        if record.get("removed") or record["model"] == run.model.name:
            continue
        model = LanguageModel.objects.filter(name=record["model"]).first()
        name = f"{causal.CHECKPOINT_PREFIX}{record['tokens']}"
        if model is not None and sources.artifact_key(model.source) is None:
            checkpoint = out_dir / name
            key = in_store.checkpoint_key(folder, name)
            _put_and_point(report, dry, model, checkpoint, key, f"checkpoint {model.name}")
            state = checkpoint / causal.STATE_NAME
            if state.is_file() and not dry:
                artifacts.put_file(
                    in_store.state_key(folder, name, causal.STATE_NAME), state, link=True
                )
    if run.status != TrainingRun.Status.DONE:
        return
    stored_key = sources.artifact_key(run.model.source)
    if stored_key:
        _check_present(report, stored_key, f"trained model {run.model.name}")
        return
    key = sources.artifact_key(model_artifact_source(run)) or ""
    if run.training_kind == TrainingRun.Kind.NGRAM:
        _put_and_point(report, dry, run.model, out_dir / Path(key).name, key, run.model.name)
    else:
        _put_and_point(report, dry, run.model, out_dir, key, f"trained model {run.model.name}")


def _check_present(report: Report, key: str, what: str) -> None:
    """Something already in the store, with no file here to copy again: checked."""
    problem = artifacts.stored_problem(key)
    if problem:
        report.damaged.append(f"{what} ({key}): {problem}")
    else:
        report.present.append(what)


def _put_and_point(
    report: Report, dry: bool, model: LanguageModel, path: Path, key: str, what: str
) -> None:
    """Store `path` (a file, or a model folder without its checkpoints and token files)
    under `key` unless a copy that checks out is there, then point the model's row at
    it. A folder counts as there only with its manifest, which is written last."""
    folder = artifacts.exists(f"{key}/manifest.json")
    there = folder or artifacts.exists_file(key)
    problem = artifacts.stored_problem(key, sha256=_file_sha(path)) if there else ""
    if there and not problem:
        report.present.append(what)
    elif not (path.is_file() or path.is_dir()):
        if there:
            report.damaged.append(f"{what} ({key}): {problem}")
        else:
            report.missing.append(f"{what}: nothing at {path}")
        return
    else:
        if problem:
            what += f", replacing a stored copy whose {problem.removeprefix('its ')}"
        if not dry:
            if problem and folder:
                artifacts.delete_prefix(key)
            elif problem:
                artifacts.delete(key)
            if path.is_file():
                artifacts.put_file(key, path, link=True)
                _check_file(key, path)
            else:
                artifacts.put_folder(key, path, link=True, include=_model_file)
                _check_folder(key, path)
        report.copied.append(f"{what} ({key})")
    report.repointed.append(f"{model.name} -> {sources.artifact_source(key)}")
    if not dry:
        with transaction.atomic():
            LanguageModel.objects.filter(pk=model.pk).update(source=sources.artifact_source(key))


def _file_sha(path: Path) -> str | None:
    return artifacts.sha256_of(path)[0] if path.is_file() else None


def _model_file(relative: Path) -> bool:
    """What a model folder's copy holds: not the checkpoints, the token files, a training
    state or a stop request."""
    top = relative.parts[0]
    return not (
        top.startswith(causal.CHECKPOINT_PREFIX)
        or top == causal.DATA_DIR
        or relative.name in (causal.STATE_NAME, "STOP")
    )


def _check_file(key: str, path: Path) -> None:
    if artifacts.stored_problem(key, sha256=artifacts.sha256_of(path)[0]):
        raise CommandError(f"{key}: the stored copy's hash differs from {path}'s; run again.")


def _check_folder(key: str, path: Path) -> None:
    for entry in artifacts.read_manifest(key):
        if artifacts.sha256_of(path / entry["path"])[0] != entry["sha256"]:
            raise CommandError(f"{key}: {entry['path']} changed while it was copied; run again.")
    problem = artifacts.stored_problem(key)
    if problem:
        raise CommandError(f"{key}: the stored copy is damaged ({problem}); run again.")
