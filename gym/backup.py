"""Back up a whole site, and restore it into an empty one.

A backup is a folder:

    manifest.json        what the backup holds: Gym's version, the database engine, the
                         migrations applied per app, counts of what people keep, and
                         every file with its size and sha256. Written last: a folder
                         without it is not a finished backup.
    database.sqlite3     SQLite: a copy made with SQLite's online backup API, so the site
                         may go on writing while it is made
    database.pgdump      PostgreSQL: `pg_dump --format=custom`, of the same snapshot the
                         counts are read from
    files/<store>/...    each folder of files the site keeps (corpora, models, trained
                         models, results on their way to the database, the rest of the
                         var folder), named by its role, not by its path

Left out: the broker's folder (queued messages are sent again by the sweep), caches,
celery beat's schedule and the secret key (a backup should hold no secret; restored
sessions are signed with the new site's key, so users sign in again; API tokens and
passwords survive).

A restore checks every checksum before it changes anything, refuses a site that already
holds data (unless forced), restores the database, copies the files, migrates forward,
and moves the paths of local models from the old site's folders to this site's.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connections, transaction

from gym.errors import ApplicationError

FORMAT = "gym-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MARK = ".gym-backup"  # in every backup's folder from its start
FILES = "files"
SQLITE_COPY = "database.sqlite3"
PG_DUMP = "database.pgdump"
CHUNK = 1024 * 1024

# What the manifest counts: the things people keep, by model label.
COUNTED = {
    "users": "auth.User",
    "suites": "suites.Suite",
    "pair_sets": "suites.MinimalPairSet",
    "probing_tasks": "suites.ProbingTask",
    "corpora": "suites.Corpus",
    "models": "evaluations.LanguageModel",
}
# Rows every migrated site has, and sessions: a site holding only these is empty.
NOT_USER_DATA = {"contenttypes.ContentType", "auth.Permission", "sessions.Session"}
# Names directly in the var folder that are not users' data.
VAR_LEFT_OUT = ("redis", "cache", "secret_key", ".secret_key.", "celerybeat-schedule", "test-db-")


class BackupError(ApplicationError):
    """A backup or restore that cannot go on; the message says what is wrong."""


@dataclass(frozen=True)
class Store:
    """A folder of files the site keeps, by its role: `name` is the same in every site,
    `root` is where this site keeps it, `setting` what sets it."""

    name: str
    setting: str
    root: Path
    left_out: tuple[Path, ...] = field(default=())


def _absolute(path: Path | str) -> Path:
    # Resolved as local models' paths are (evaluations.model_sources), so that the paths
    # stored in rows are found under the folders they lie in.
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def store_roles() -> list[Store]:
    """Every role this site has a folder for, nested or not, in order of precedence."""
    from evaluations.language_models.registry import training_dir

    var = _absolute(settings.VAR_DIR)
    roles = [Store("corpora", "GYM_CORPUS_DIR", _absolute(settings.GYM_CORPUS_DIR))]
    if settings.GYM_RUN_RESULTS_DIR:
        roles.append(
            Store("results", "GYM_RUN_RESULTS_DIR", _absolute(settings.GYM_RUN_RESULTS_DIR))
        )
    roles.append(Store("models", "GYM_VAR_DIR (its models/)", var / "models"))
    for i, folder in enumerate(settings.GYM_MODEL_DIRS):
        roles.append(Store(f"model-dir-{i}", f"GYM_MODEL_DIRS (entry {i + 1})", _absolute(folder)))
    roles.append(Store("trained", "GYM_TRAINING_DIR", _absolute(training_dir())))
    if not settings.GYM_ARTIFACTS_URL:
        # The artifact store as a local folder (an object store is backed up with its own
        # tools: docs/backup.md); the workers' caches are not, they are fetched again.
        roles.append(Store("artifacts", "GYM_ARTIFACTS_DIR", _absolute(settings.GYM_ARTIFACTS_DIR)))
    roles.append(Store("var", "GYM_VAR_DIR", var))
    return roles


def _var_left_out(var: Path) -> list[Path]:
    """What lies in the var folder but is no user's data: the database (backed up on its
    own), the broker, caches, beat's schedule, the secret key, test databases."""
    left_out: list[Path] = []
    db = connections["default"].settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        name = _absolute(db["NAME"])
        left_out += [name, *(Path(f"{name}{end}") for end in ("-wal", "-shm", "-journal"))]
    cache = settings.CACHES["default"]
    if cache["BACKEND"].endswith("FileBasedCache"):
        left_out.append(_absolute(cache["LOCATION"]))
    if var.is_dir():
        left_out += [p for p in var.iterdir() if p.name.startswith(VAR_LEFT_OUT)]
    return left_out


def site_stores(*, leave_out: Path | None = None) -> list[Store]:
    """The folders a backup copies: each role's folder, except one inside another's
    (its files are copied with the outer folder), leaving out what is not users' data."""
    kept: list[Store] = []
    for store in store_roles():
        # A folder inside (or the same as) one already kept is copied with it; the var
        # folder, last, is the catch-all for what no other role holds.
        if store.name != "var" and any(_inside(store.root, k.root) for k in kept):
            continue
        kept.append(store)
    result: list[Store] = []
    for store in kept:
        left_out = [o.root for o in kept if o is not store and _inside(o.root, store.root)]
        if store.name == "var":
            left_out += _var_left_out(store.root)
        if store.name == "artifacts":
            left_out.append(store.root / STORE_PREFIX)  # backups kept in the store
        if leave_out is not None:
            left_out.append(leave_out)
        result.append(Store(store.name, store.setting, store.root, tuple(left_out)))
    return result


def _walk(store: Store) -> Iterator[tuple[Path, str]]:
    """(absolute path, path relative to the store in POSIX form) of every file; folders
    that are symbolic links are not followed (they may point anywhere)."""
    if not store.root.is_dir():
        return
    for folder, subfolders, names in os.walk(store.root):
        here = Path(folder)
        # Another backup kept in the site's folders is not copied into this one.
        subfolders[:] = sorted(
            s
            for s in subfolders
            if not any(_inside(here / s, o) for o in store.left_out)
            and not (here / s / MARK).exists()
        )
        for name in sorted(names):
            path = here / name
            if any(_inside(path, o) for o in store.left_out) or not path.is_file():
                continue
            yield path, path.relative_to(store.root).as_posix()


def _copy_hashed(source: Path, target: Path) -> tuple[int, str]:
    """Copy a file, returning the size and sha256 of what was written."""
    digest = hashlib.sha256()
    size = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    with source.open("rb") as src, target.open("wb") as out:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
        out.flush()
        os.fsync(out.fileno())
    shutil.copystat(source, target)
    return size, digest.hexdigest()


def _hash(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as data:
        while chunk := data.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def gym_version() -> dict[str, str | None]:
    """This checkout's version (pyproject.toml) and git commit, where known."""
    base = Path(settings.BASE_DIR)
    version = None
    try:
        with (base / "pyproject.toml").open("rb") as project:
            version = tomllib.load(project).get("project", {}).get("version")
    except (OSError, tomllib.TOMLDecodeError):
        pass
    commit = None
    try:
        answer = subprocess.run(
            ["git", "-C", str(base), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if answer.returncode == 0:
            commit = answer.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    return {"version": version, "commit": commit}


def _engine(alias: str = "default") -> str:
    vendor = connections[alias].vendor
    if vendor not in ("sqlite", "postgresql"):
        raise BackupError(f"the database is {vendor}: only SQLite and PostgreSQL are supported")
    return vendor


def _table_counts(cursor: Any, tables: set[str]) -> dict[str, Any]:
    """Counts of what people keep, and the migrations applied per app, read through a
    DB-API cursor (of the SQLite copy, or of the PostgreSQL snapshot)."""
    from evaluations.models import Run

    def count(table: str) -> int | None:
        if table not in tables:
            return None
        cursor.execute(f'SELECT COUNT(*) FROM "{table}"')
        return int(cursor.fetchone()[0])

    counts: dict[str, Any] = {
        key: count(apps.get_model(label)._meta.db_table) for key, label in COUNTED.items()
    }
    counts["runs"] = {
        model._meta.label: count(model._meta.db_table)
        for model in apps.get_models()
        if issubclass(model, Run)
    }
    migrations: dict[str, list[str]] = {}
    if "django_migrations" in tables:
        cursor.execute("SELECT app, name FROM django_migrations ORDER BY app, name")
        for app, name in cursor.fetchall():
            migrations.setdefault(app, []).append(name)
    return {"counts": counts, "migrations": migrations}


def _pg_env(alias: str = "default") -> tuple[dict[str, str], str]:
    """The environment for PostgreSQL's programs, and the database name."""
    db = connections[alias].settings_dict
    env = dict(os.environ)
    for key, variable in (
        ("HOST", "PGHOST"),
        ("PORT", "PGPORT"),
        ("USER", "PGUSER"),
        ("PASSWORD", "PGPASSWORD"),
    ):
        if db.get(key):
            env[variable] = str(db[key])
    options = db.get("OPTIONS") or {}
    if options.get("sslmode"):
        env["PGSSLMODE"] = str(options["sslmode"])
    return env, str(db["NAME"])


def _program(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise BackupError(
            f"{name} is not on PATH: install PostgreSQL's client programs (Debian: "
            "postgresql-client), of the server's major version or newer"
        )
    return found


def _run(command: list[str], env: dict[str, str], what: str) -> None:
    answer = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if answer.returncode != 0:
        detail = (answer.stderr or answer.stdout).strip().splitlines()
        raise BackupError(f"{what} failed (status {answer.returncode}): {' '.join(detail[-5:])}")


def _backup_sqlite(target: Path) -> dict[str, Any]:
    name = _absolute(connections["default"].settings_dict["NAME"])
    if not name.is_file():
        raise BackupError(f"no SQLite database at {name}")
    busy = float(settings.DATABASES["default"].get("OPTIONS", {}).get("timeout", 30))
    # The online backup API copies a consistent snapshot while other processes write.
    source = sqlite3.connect(f"{name.as_uri()}?mode=rw", uri=True, timeout=busy)
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
        # One self-contained file, whatever journal the site uses.
        copy.execute("PRAGMA journal_mode=DELETE")
        cursor = copy.cursor()
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        tables = {row[0] for row in cursor.fetchall()}
        facts = _table_counts(cursor, tables)
    finally:
        copy.close()
        source.close()
    return facts


def _backup_postgresql(target: Path) -> dict[str, Any]:
    pg_dump = _program("pg_dump")
    env, name = _pg_env()
    connection = connections["default"]
    if connection.in_atomic_block:
        raise BackupError("a PostgreSQL backup cannot run inside a transaction")
    # pg_dump dumps the snapshot this transaction exports, and the counts are read in the
    # same transaction: the manifest describes exactly what the dump holds.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursor.execute("SELECT pg_export_snapshot()")
        snapshot = cursor.fetchone()[0]
        _run(
            [pg_dump, "--format=custom", f"--snapshot={snapshot}", f"--file={target}", name],
            env,
            "pg_dump",
        )
        tables = set(connection.introspection.table_names(cursor))
        facts = _table_counts(cursor, tables)
    return facts


def _prepare_folder(folder: Path, *, force: bool) -> None:
    if folder.exists() and not folder.is_dir():
        raise BackupError(f"{folder} is a file, not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    entries = sorted(p.name for p in folder.iterdir())
    if entries and not force:
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise BackupError(
            f"{folder} is not empty ({len(entries)} entries: {shown}); choose an empty or "
            "new folder, or pass --force to replace the backup in it"
        )
    ours = [n for n in (MANIFEST, SQLITE_COPY, PG_DUMP, FILES) if n in entries]
    if ours and MARK not in entries:
        raise BackupError(
            f"{folder} holds {', '.join(ours)} but is no Gym backup's folder: --force replaces "
            "only a backup; choose another folder"
        )
    # The manifest goes first: a half-replaced backup must never look finished.
    (folder / MANIFEST).unlink(missing_ok=True)
    for part in (SQLITE_COPY, PG_DUMP):
        (folder / part).unlink(missing_ok=True)
    shutil.rmtree(folder / FILES, ignore_errors=True)
    (folder / MARK).touch()


def site_backup(*, folder: Path, force: bool = False) -> dict[str, Any]:
    """Back up the database and every store of files into `folder`; returns the manifest.

    The database is copied first: a file made later is an extra in the backup, whereas a
    row whose file was copied before it existed would point at nothing."""
    folder = _absolute(folder)
    _prepare_folder(folder, force=force)
    engine = _engine()
    database = folder / (SQLITE_COPY if engine == "sqlite" else PG_DUMP)
    facts = _backup_sqlite(database) if engine == "sqlite" else _backup_postgresql(database)
    size, digest = _hash(database)

    stores: dict[str, Any] = {}
    files: list[dict[str, Any]] = []
    for store in site_stores(leave_out=folder):
        stores[store.name] = {"root": str(store.root), "setting": store.setting}
        for path, relative in _walk(store):
            try:
                copied, sha = _copy_hashed(path, folder / FILES / store.name / relative)
            except FileNotFoundError:
                continue  # deleted while the backup ran (a temporary upload, a stored result)
            files.append({"store": store.name, "path": relative, "bytes": copied, "sha256": sha})

    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "gym": gym_version(),
        "database": {"engine": engine, "file": database.name, "bytes": size, "sha256": digest},
        "migrations": facts["migrations"],
        "counts": facts["counts"],
        "stores": stores,
        "files": files,
    }
    partial = folder / f".{MANIFEST}.partial"
    with partial.open("w", encoding="utf-8") as out:
        json.dump(manifest, out, indent=1)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, folder / MANIFEST)
    return manifest


# In the artifact store: a site whose machines share no folder keeps its backups where
# every machine reaches (backups/<time>/, a stored folder: its manifest written last).

STORE_PREFIX = "backups"


def backup_to_store(*, name: str = "") -> tuple[str, dict[str, Any]]:
    """A backup made in a scratch folder of this machine, then put into the artifact store
    under backups/<name, by default the time>/ with a sha256 per file, the store's
    manifest last; the scratch folder is removed. Returns the key and the manifest."""
    from gym import artifacts

    stamp = name or datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    key = artifacts.check_key(f"{STORE_PREFIX}/{stamp}")
    if artifacts.exists(f"{key}/manifest.json"):
        raise BackupError(f"The artifact store already holds a backup {key}; give another name.")
    var = _absolute(settings.VAR_DIR)
    var.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".backup-", dir=var))
    try:
        manifest = site_backup(folder=scratch / "backup")
        artifacts.put_folder(key, scratch / "backup")
    except artifacts.StoreUnavailable as exc:
        raise BackupError(f"{exc} The backup was not stored; run the command again.") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return key, manifest


def backups_in_store() -> list[str]:
    """The finished backups in the artifact store (those whose manifest was written)."""
    from gym import artifacts

    return sorted(
        k.removesuffix("/manifest.json")
        for k in artifacts.list_prefix(STORE_PREFIX)
        if k.count("/") == 2 and k.endswith("/manifest.json")
    )


def backup_from_store(key: str, target: Path) -> Path:
    """The stored backup `key` (backups/<name>) copied into the new folder `target`, each
    file checked against the store's manifest; returns the backup's folder."""
    from gym import artifacts

    key = key.rstrip("/")
    if not key.startswith(f"{STORE_PREFIX}/"):
        key = f"{STORE_PREFIX}/{key}"
    try:
        key = artifacts.check_key(key)
    except artifacts.BadKey as exc:
        raise BackupError(f"{key!r} is not a backup's key: {exc}") from None
    if not artifacts.exists(f"{key}/manifest.json"):
        known = ", ".join(backups_in_store()) or "none"
        raise BackupError(f"The artifact store holds no finished backup {key} (it holds: {known}).")
    for entry in artifacts.read_manifest(key):
        relative = _safe_relative("backup", str(entry["path"]))
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with path.open("wb") as out:
            for chunk in artifacts.stream(f"{key}/files/{relative.as_posix()}"):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != entry["sha256"]:
            raise BackupError(f"{key}: the stored {relative} is damaged (its sha256 differs).")
    return target


# Restore


def manifest_read(folder: Path) -> dict[str, Any]:
    folder = _absolute(folder)
    if not folder.is_dir():
        raise BackupError(f"{folder}: no such folder")
    path = folder / MANIFEST
    if not path.is_file():
        raise BackupError(
            f"{folder} holds no {MANIFEST}: not a Gym backup, or one that did not finish"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BackupError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{path} is not a Gym backup's manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise BackupError(
            f"{path} is format version {manifest.get('format_version')!r}; this Gym reads "
            f"version {FORMAT_VERSION}"
        )
    for key in ("database", "migrations", "counts", "stores", "files"):
        if key not in manifest:
            raise BackupError(f"{path} has no '{key}'")
    for entry in manifest["files"]:
        _safe_relative(entry.get("store", ""), entry.get("path", ""))
        if entry["store"] not in manifest["stores"]:
            raise BackupError(f"{path}: file {entry['path']!r} is in an unknown store")
    if manifest["database"].get("file") not in (SQLITE_COPY, PG_DUMP):
        raise BackupError(f"{path}: unknown database file {manifest['database'].get('file')!r}")
    return manifest


def _safe_relative(store: str, relative: str) -> PurePosixPath:
    """A path from the manifest, refused if it could lead outside its store."""
    path = PurePosixPath(relative)
    if (
        not store
        or "/" in store
        or store in (".", "..")
        or not relative
        or path.is_absolute()
        or ".." in path.parts
        or "\\" in relative
    ):
        raise BackupError(f"the manifest names an unsafe path: {store!r}/{relative!r}")
    return path


def backup_verify(folder: Path, manifest: dict[str, Any]) -> list[str]:
    """What in the backup differs from its manifest (missing, size, sha256); empty when
    everything matches."""
    folder = _absolute(folder)
    expected = [(folder / manifest["database"]["file"], manifest["database"])]
    expected += [
        (folder / FILES / entry["store"] / _safe_relative(entry["store"], entry["path"]), entry)
        for entry in manifest["files"]
    ]
    problems = []
    for path, entry in expected:
        shown = path.relative_to(folder).as_posix()
        if not path.is_file():
            problems.append(f"{shown}: missing")
            continue
        size, digest = _hash(path)
        if size != entry.get("bytes"):
            problems.append(f"{shown}: {size} bytes, the manifest says {entry.get('bytes')}")
        elif digest != entry.get("sha256"):
            problems.append(f"{shown}: its sha256 differs from the manifest's (damaged or changed)")
    return problems


def _unknown_migrations(manifest: dict[str, Any]) -> list[str]:
    from django.db.migrations.loader import MigrationLoader

    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    return [
        f"{app}.{name}"
        for app, names in sorted(manifest["migrations"].items())
        for name in names
        if (app, name) not in known
    ]


def site_data(alias: str = "default") -> dict[str, int]:
    """Rows of users' data in this site's database, by model (verbose name), for the
    models whose table exists; {} for an empty site."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        tables = set(connection.introspection.table_names(cursor))
        held: dict[str, int] = {}
        for model in apps.get_models():
            if model._meta.label in NOT_USER_DATA or model._meta.db_table not in tables:
                continue
            cursor.execute(f'SELECT COUNT(*) FROM "{model._meta.db_table}"')
            rows = int(cursor.fetchone()[0])
            if rows:
                held[str(model._meta.verbose_name_plural)] = rows
    return held


@dataclass
class RestorePlan:
    copies: list[tuple[Path, Path]]  # (in the backup, in this site)
    conflicts: list[str]  # files of this site the restore would overwrite
    moves: list[tuple[str, str]]  # (old root, new root) for paths stored in rows


def _plan(folder: Path, manifest: dict[str, Any]) -> RestorePlan:
    here = {store.name: store for store in store_roles()}
    used = {entry["store"] for entry in manifest["files"]}
    missing = [
        f"{name} ({manifest['stores'][name].get('setting', name)})"
        for name in sorted(used)
        if name not in here
    ]
    if missing:
        raise BackupError(
            "the backup holds files for folders this site does not have: "
            + ", ".join(missing)
            + "; set them and restore again"
        )
    copies, conflicts = [], []
    for entry in manifest["files"]:
        relative = _safe_relative(entry["store"], entry["path"])
        source = folder / FILES / entry["store"] / relative
        target = here[entry["store"]].root / relative
        if target.exists():
            if not target.is_file() or _hash(target) != (entry["bytes"], entry["sha256"]):
                conflicts.append(str(target))
                copies.append((source, target))
        else:
            copies.append((source, target))
    moves = [
        (str(_absolute(info["root"])), str(here[name].root))
        for name, info in manifest["stores"].items()
        if name in here and _absolute(info["root"]) != here[name].root
    ]
    # The most specific folder first: var/models/x moves with models, not with var.
    moves.sort(key=lambda move: len(move[0]), reverse=True)
    return RestorePlan(copies, conflicts, moves)


def _restore_sqlite(copy: Path) -> None:
    name = _absolute(connections["default"].settings_dict["NAME"])
    name.parent.mkdir(parents=True, exist_ok=True)
    connections.close_all()
    busy = float(settings.DATABASES["default"].get("OPTIONS", {}).get("timeout", 30))
    source = sqlite3.connect(f"{copy.as_uri()}?mode=ro&immutable=1", uri=True)
    target = sqlite3.connect(name, timeout=busy)
    try:
        # Replaces the whole database in one write transaction of the target.
        source.backup(target)
    except sqlite3.Error as exc:
        raise BackupError(f"restoring the SQLite database into {name} failed: {exc}") from None
    finally:
        target.close()
        source.close()


def _restore_postgresql(dump: Path) -> None:
    pg_restore, psql = _program("pg_restore"), _program("psql")
    env, name = _pg_env()
    connection = connections["default"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        schema = cursor.fetchone()[0]
        tables = connection.introspection.table_names(cursor)
    connections.close_all()
    with tempfile.TemporaryDirectory(prefix="gym-restore-") as scratch:
        script = Path(scratch) / "restore.sql"
        _run(
            [pg_restore, "--no-owner", "--no-privileges", f"--file={script}", str(dump)],
            env,
            "pg_restore",
        )
        # The tables this site has go, and the backup's come, in one transaction: a
        # failure anywhere leaves the database as it was.
        command = [psql, "--no-psqlrc", "--quiet", "--single-transaction"]
        command += ["--set=ON_ERROR_STOP=1", f"--dbname={name}"]
        if tables:
            quoted = ", ".join(f'"{schema}"."{table}"' for table in tables)
            command += [f"--command=DROP TABLE IF EXISTS {quoted} CASCADE"]
        _run([*command, f"--file={script}"], env, "restoring the PostgreSQL dump")


def _copy_in(copies: list[tuple[Path, Path]]) -> None:
    for source, target in copies:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.restoring")
        _copy_hashed(source, partial)
        os.replace(partial, target)


def _paths_move(moves: list[tuple[str, str]]) -> int:
    """Paths of local models (and training runs' output folders) under the old site's
    folders, moved to the same place under this site's; returns how many rows changed."""
    if not moves:
        return 0

    def moved(path: str) -> str | None:
        for old, new in moves:
            if path == old or path.startswith(old + os.sep):
                return new + path[len(old) :]
        return None

    changed = 0
    with transaction.atomic():
        for label, column in (
            ("evaluations.LanguageModel", "source"),
            ("evaluations.TrainingRun", "legacy_out_dir"),
        ):
            model = apps.get_model(label)
            for pk, path in model.objects.values_list("pk", column).iterator():
                new = moved(path)
                if new is not None and new != path:
                    model.objects.filter(pk=pk).update(**{column: new})
                    changed += 1
    return changed


def site_restore(
    *, folder: Path, force: bool = False, log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Restore the backup in `folder` into this site; returns what was restored.

    Nothing is changed until every checksum matches, the backup's engine and migrations
    suit this site, and the site holds no data (or `force`)."""
    say = log or (lambda _message: None)
    folder = _absolute(folder)
    manifest = manifest_read(folder)
    problems = backup_verify(folder, manifest)
    if problems:
        shown = "; ".join(problems[:10]) + (
            f"; and {len(problems) - 10} more" if len(problems) > 10 else ""
        )
        raise BackupError(f"the backup in {folder} does not match its manifest: {shown}")
    engine = _engine()
    if manifest["database"]["engine"] != engine:
        raise BackupError(
            f"the backup is of a {manifest['database']['engine']} database and this site uses "
            f"{engine}: restore it into a site with the same engine"
        )
    unknown = _unknown_migrations(manifest)
    if unknown:
        raise BackupError(
            "the backup's database has migrations this Gym does not know ("
            + ", ".join(unknown[:5])
            + "): it was made by a newer Gym; restore it with that version or a later one"
        )
    plan = _plan(folder, manifest)
    held = site_data()
    if (held or plan.conflicts) and not force:
        parts = []
        if held:
            parts.append(
                "its database holds " + ", ".join(f"{n} {what}" for what, n in held.items())
            )
        if plan.conflicts:
            shown = ", ".join(plan.conflicts[:3]) + (", ..." if len(plan.conflicts) > 3 else "")
            parts.append(f"{len(plan.conflicts)} of its files would be overwritten ({shown})")
        raise BackupError(
            "this site is not empty: "
            + "; ".join(parts)
            + ". Restore into an empty site, or pass --force to replace what it holds"
        )

    say(f"database: restoring the {engine} backup")
    database = folder / manifest["database"]["file"]
    if engine == "sqlite":
        _restore_sqlite(database)
    else:
        _restore_postgresql(database)
    say(f"files: copying {len(plan.copies)} of {len(manifest['files'])}")
    _copy_in(plan.copies)
    say("database: migrating forward")
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    moved = _paths_move(plan.moves)
    with connections["default"].cursor() as cursor:
        tables = set(connections["default"].introspection.table_names(cursor))
        after = _table_counts(cursor, tables)["counts"]
    return {
        "manifest": manifest,
        "copied": len(plan.copies),
        "moved": moved,
        "counts": after,
        "differences": _differences(manifest["counts"], after),
    }


def counts_text(counts: dict[str, Any]) -> str:
    """A manifest's counts as the backup and restore commands report them, the runs of
    every kind together: "3 suites, 2 pair sets, 2 probing tasks, 0 corpora, 4 models,
    9 runs"."""
    runs = sum(n or 0 for n in counts["runs"].values())
    return (
        f"{counts['suites']} suites, {counts['pair_sets']} pair sets, "
        f"{counts['probing_tasks']} probing tasks, {counts['corpora']} corpora, "
        f"{counts['models']} models, {runs} runs"
    )


def _differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Counts the restored site does not share with the manifest (a migration that
    removed rows, a damaged dump); a table the backup did not have yet is no difference."""
    flat = {k: v for k, v in before.items() if k != "runs"} | before.get("runs", {})
    now = {k: v for k, v in after.items() if k != "runs"} | after.get("runs", {})
    return [
        f"{key}: {count} in the backup, {now.get(key)} now"
        for key, count in flat.items()
        if count is not None and now.get(key) != count
    ]
