"""A worker's local cache of the artifact store (gym.artifacts).

A worker never reads a file where another machine wrote it: it asks for a key and gets a
path in its own cache folder (GYM_ARTIFACT_CACHE_DIR), fetched from the store on first
use and checked by SHA-256 on arrival, before it appears in the cache: against the hash
the caller gives, else the one its key names (corpora/<sha256>), else the one recorded
beside it in the store (gym.artifacts.put_file's record_hash), else the manifest's for a
folder's file. The cache holds at most GYM_ARTIFACT_CACHE_BYTES:
after each fetch, the entries used least recently are removed until it fits again, except
an entry some process is using (`using`), and the entry just fetched (a single artifact
larger than the bound is kept, and said in the log).

Layout, each entry a folder renamed into place whole, so a reader never sees half of one:

    entries/<name>/          a file (`entries/<sha256>/data`) or a folder's files
    locks/<name>.lock        flock: exclusive while fetching or removing, shared while used
    tmp/                     fetches under way (a dead process's leftovers are removed)

Two processes asking for the same key at once: one fetches, the other waits on the lock
and finds the entry there. Nothing here knows a kind of artifact.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gym import artifacts, processes

log = logging.getLogger(__name__)

DATA = "data"


class CorruptArtifact(Exception):
    """A fetched file whose hash or size is not the one it was stored with."""


def cache_dir() -> Path:
    from django.conf import settings

    return Path(settings.GYM_ARTIFACT_CACHE_DIR)


def cache_bound() -> int:
    from django.conf import settings

    return int(settings.GYM_ARTIFACT_CACHE_BYTES)


def _folders(root: Path) -> tuple[Path, Path, Path]:
    entries, locks, tmp = root / "entries", root / "locks", root / "tmp"
    for folder in (entries, locks, tmp):
        folder.mkdir(parents=True, exist_ok=True)
    return entries, locks, tmp


@contextmanager
def _locked(path: Path, mode: int) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def _entry_name(key: str) -> str:
    """The entry's folder name: the key's hash (keys may hold slashes)."""
    return hashlib.sha256(artifacts.check_key(key).encode()).hexdigest()


# --- fetching --------------------------------------------------------------------------------


def _download(key: str, target: Path, *, sha256: str | None, size: int | None) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if _link_local(key, target):
        # A local-folder store on this filesystem: the same file, not a second copy
        # (checked all the same: a store file changed behind the manifest is caught).
        found, written = artifacts.sha256_of(target)
    else:
        digest, written = hashlib.sha256(), 0
        with target.open("wb") as out:
            for chunk in artifacts.stream(key):
                digest.update(chunk)
                written += len(chunk)
                out.write(chunk)
        found = digest.hexdigest()
    if sha256 is not None and found != sha256:
        raise CorruptArtifact(
            f"The stored object {key} is damaged: it arrived from the store at "
            f"{artifacts.where()} with SHA-256 {found}, not {sha256}, the hash it was "
            "stored with. Store it again."
        )
    if size is not None and written != size:
        raise CorruptArtifact(
            f"The stored object {key} is damaged: it arrived with {written} bytes, not {size}."
        )


def _link_local(key: str, target: Path) -> bool:
    local = artifacts.local_file(key)
    if local is None:
        return False
    try:
        os.link(local, target)
    except OSError:  # another filesystem: copy it as from any store
        return False
    return True


def _fill_file(key: str, staging: Path, sha256: str | None) -> None:
    size = None
    if sha256 is None:
        sha256, size = _expected(key)
    _download(key, staging / DATA, sha256=sha256, size=size)


def _expected(key: str) -> tuple[str | None, int | None]:
    """The hash (and size) a file stored under key must arrive with, when the caller
    gives none: the one its key names, else the one recorded beside it."""
    named = artifacts.content_hash_of(key)
    if named is not None:
        return named, None
    record = artifacts.hash_record(key)
    if record is None:
        log.warning("%s was stored without its hash (by an older version): not checked", key)
        return None, None
    try:
        parsed = json.loads(record)
        return str(parsed["sha256"]), int(parsed["size"])
    except (ValueError, KeyError, TypeError):
        raise CorruptArtifact(
            f"The stored object {key} is damaged: the hash recorded beside it "
            f"({key}{artifacts.HASH_SUFFIX}) cannot be read. Store it again."
        ) from None


def _fill_folder(prefix: str, staging: Path) -> None:
    for entry in artifacts.read_manifest(prefix):
        relative = Path(str(entry["path"]))
        if relative.is_absolute() or ".." in relative.parts:
            raise CorruptArtifact(f"{prefix}: the manifest names {relative}, outside the folder.")
        _download(
            f"{prefix}/files/{relative.as_posix()}",
            staging / relative,
            sha256=str(entry["sha256"]),
            size=int(entry["size"]),
        )


def _fetch(key: str, fill: Any) -> tuple[Path, bool]:
    """The entry for key (fetched by fill(staging) when absent): its folder, and whether
    this call fetched it."""
    entries, locks, tmp = _folders(cache_dir())
    name = _entry_name(key)
    entry = entries / name
    fetched = False
    with _locked(locks / f"{name}.lock", fcntl.LOCK_EX):
        if not entry.is_dir():
            staging = Path(tempfile.mkdtemp(prefix=f"{name}.{os.getpid()}.", dir=tmp))
            try:
                fill(staging)
                os.rename(staging, entry)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            fetched = True
            _note_fetch(key)
        os.utime(entry)  # its place in the least-recently-used order
    if fetched:
        evict(keep={name})
    return entry, fetched


# Fetches made by this process, by key: what the tests and the benchmark count.
FETCHES: dict[str, int] = {}


def _note_fetch(key: str) -> None:
    FETCHES[key] = FETCHES.get(key, 0) + 1
    log.info("fetched %s from the artifact store into %s", key, cache_dir())


def fetch_file(key: str, *, sha256: str | None = None) -> Path:
    """The stored file `key` as a local path (fetched if not cached; checked against
    `sha256`, or the hash the store knows it by: see the module's docstring). Raises
    CorruptArtifact, and keeps nothing, when the bytes that arrive are not those."""
    entry, _ = _fetch(key, lambda staging: _fill_file(key, staging, sha256))
    return entry / DATA


def fetch_folder(prefix: str) -> Path:
    """The stored folder `prefix` (gym.artifacts.put_folder) as a local folder, every
    file checked against its manifest."""
    entry, _ = _fetch(prefix.rstrip("/"), lambda staging: _fill_folder(prefix, staging))
    return entry


@contextmanager
def using(key: str, *, folder: bool = False, sha256: str | None = None) -> Iterator[Path]:
    """The cached file (or folder) of key, kept from eviction while the block runs."""
    _, locks, _ = _folders(cache_dir())
    name = _entry_name(key.rstrip("/") if folder else key)
    while True:
        path = fetch_folder(key) if folder else fetch_file(key, sha256=sha256)
        with _locked(locks / f"{name}.lock", fcntl.LOCK_SH):
            if path.exists():  # not evicted between the fetch and the lock
                yield path
                return


# --- the bound -------------------------------------------------------------------------------


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def cache_report() -> dict[str, int]:
    entries, _, _ = _folders(cache_dir())
    sizes = [_size(e) for e in entries.iterdir() if e.is_dir()]
    return {"entries": len(sizes), "bytes": sum(sizes), "bound": cache_bound()}


def evict(*, keep: set[str] | frozenset[str] = frozenset(), bound: int | None = None) -> list[str]:
    """Remove the least recently used entries until the cache holds at most `bound`
    bytes (GYM_ARTIFACT_CACHE_BYTES), skipping those in use and those in `keep`.
    Returns the names removed."""
    root = cache_dir()
    entries, locks, tmp = _folders(root)
    limit = cache_bound() if bound is None else bound
    removed: list[str] = []
    with _locked(root / "evict.lock", fcntl.LOCK_EX):
        _clear_dead_staging(tmp)
        present = [(e.stat().st_mtime, e.name, _size(e)) for e in entries.iterdir() if e.is_dir()]
        total = sum(size for *_, size in present)
        for _mtime, name, size in sorted(present):
            if total <= limit:
                break
            if name in keep:
                continue
            fd = os.open(locks / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # in use, or being fetched again
                doomed = tmp / f"evicted-{name}-{os.getpid()}"
                os.rename(entries / name, doomed)
                shutil.rmtree(doomed, ignore_errors=True)
            finally:
                os.close(fd)
            total -= size
            removed.append(name)
        if total > limit:
            log.warning(
                "the artifact cache %s holds %d bytes, over its bound of %d: what is left "
                "is in use or was just fetched",
                root,
                total,
                limit,
            )
    return removed


def _clear_dead_staging(tmp: Path) -> None:
    """Remove what a fetch left behind when its process died (its pid is gone)."""
    for leftover in tmp.iterdir():
        parts = leftover.name.split(".")
        if leftover.name.startswith("evicted-"):
            pid_text = leftover.name.rsplit("-", 1)[-1]
        elif len(parts) >= 3:
            pid_text = parts[1]
        else:
            continue
        if pid_text.isdigit() and not processes.alive(int(pid_text)):
            shutil.rmtree(leftover, ignore_errors=True)


def forget(key: str) -> bool:
    """Remove the cached copy of key (a file or a folder), waiting while one is in use.
    True when there was one."""
    entries, locks, tmp = _folders(cache_dir())
    name = _entry_name(key.rstrip("/"))
    with _locked(locks / f"{name}.lock", fcntl.LOCK_EX):
        if not (entries / name).is_dir():
            return False
        doomed = tmp / f"evicted-{name}-{os.getpid()}"
        os.rename(entries / name, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    return True


def model_path(key: str) -> str:
    """The local path of a model stored under key: a stored folder (one with a manifest)
    or a single file (an ARPA model), fetched into the cache if it is not there."""
    if artifacts.exists(f"{key.rstrip('/')}/manifest.json"):
        return str(fetch_folder(key))
    return str(fetch_file(key))
