"""The artifact store: files every machine of a site shares, addressed by key.

Corpora, uploaded models and what runs make live here, never under a host path that a
payload or a row would carry. The store is Django's named storage "artifacts"
(settings.STORAGES): a local folder by default (GYM_ARTIFACTS_DIR, no process of its own),
or an S3-compatible object store when GYM_ARTIFACTS_URL is s3://bucket/prefix.

Keys are slash-separated names. Immutable content is keyed by its SHA-256
(`corpora/<sha256>`); a folder (a model, a checkpoint) is a manifest
(`<prefix>/manifest.json`, each file's relative path, size and hash) beside its files
(`<prefix>/files/<path>`), so that a worker can fetch, check and cache each file alone and
two folders that share a file cost nothing more to check. A single file that is not
keyed by its hash (a training state, a run's inputs, an ARPA model) may have its hash
recorded beside it (`put_file(..., record_hash=True)`: `<key>.sha256`), so that a worker's
cache checks it on arrival as it checks the others. This module knows no kind of
artifact: the kinds import it.

Every call that reaches the store raises StoreUnavailable when the store cannot be reached,
with a message that names where it was looked for. A worker's own writes (what a run made)
go through `patiently`, which tries again for a while before it gives up; `reachable`
says whether the store answers now (the sweep asks it before it sends again the runs that
failed for an outage).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, TypeVar
from urllib.parse import urlparse

log = logging.getLogger(__name__)
T = TypeVar("T")

CHUNK = 1024 * 1024
# Beside a file whose key does not name its hash: {"sha256": ..., "size": ...}.
HASH_SUFFIX = ".sha256"
_SHA256 = re.compile(r"[0-9a-f]{64}")


class StoreUnavailable(Exception):
    """The artifact store could not be reached (a network fault, a server down)."""


class BadKey(ValueError):
    """A key that is not a plain relative slash-separated name."""


def artifact_storage(url: str, folder: Path, *, endpoint: str, region: str) -> dict[str, Any]:
    """The STORAGES entry for GYM_ARTIFACTS_URL ("" or s3://bucket/prefix)."""
    if not url:
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(folder), "base_url": None},
        }
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"GYM_ARTIFACTS_URL={url!r}: expected s3://bucket/prefix, or nothing for the "
            "local folder GYM_ARTIFACTS_DIR."
        )
    options: dict[str, Any] = {
        "bucket_name": parsed.netloc,
        "location": parsed.path.strip("/"),
        "region_name": region,
        "file_overwrite": True,
        "querystring_auth": False,
    }
    if endpoint:
        options["endpoint_url"] = endpoint
    # A store out of reach is said within seconds (StoreUnavailable), not after boto3's
    # minute of waiting; the run core retries the work with back-off instead.
    from botocore.config import Config  # type: ignore[import-untyped]

    options["client_config"] = Config(
        connect_timeout=5, read_timeout=60, retries={"max_attempts": 3, "mode": "standard"}
    )
    return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}


def check_key(key: str) -> str:
    path = PurePosixPath(key)
    if (
        not key
        or key.startswith("/")
        or "\\" in key
        or any(p in ("", ".", "..") for p in key.split("/"))
    ):
        raise BadKey(f"Artifact key {key!r}: expected a relative name such as corpora/<sha256>.")
    return str(path)


def _storage() -> Any:
    from django.core.files.storage import storages

    return storages["artifacts"]


def where() -> str:
    """Where the store is, for messages: its endpoint and bucket, or its folder."""
    from django.conf import settings

    if settings.GYM_ARTIFACTS_URL:
        endpoint = getattr(_storage(), "endpoint_url", None) or "the default AWS endpoint"
        return f"{settings.GYM_ARTIFACTS_URL} ({endpoint})"
    return str(settings.GYM_ARTIFACTS_DIR)


def _unreachable(error: BaseException) -> StoreUnavailable:
    return StoreUnavailable(
        f"The artifact store at {where()} could not be reached: {type(error).__name__}: {error}"
    )


def _guarded_errors() -> tuple[type[Exception], ...]:
    errors: list[type[Exception]] = [OSError]
    try:
        from botocore.exceptions import (  # type: ignore[import-untyped]
            BotoCoreError,
            ClientError,
        )

        errors += [BotoCoreError, ClientError]
    except ImportError:  # pragma: no cover - boto3 is in requirements.txt
        pass
    return tuple(errors)


@dataclass(frozen=True)
class Stored:
    key: str
    sha256: str
    size: int


def sha256_of(source: str | Path | IO[bytes]) -> tuple[str, int]:
    """The SHA-256 and size of a file or a binary stream, read in chunks."""
    digest, size = hashlib.sha256(), 0
    with _opened(source) as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


class _opened:
    """A path opened for reading, or a stream rewound and left open."""

    def __init__(self, source: str | Path | IO[bytes]) -> None:
        self.source = source
        self.stream: IO[bytes] | None = None

    def __enter__(self) -> IO[bytes]:
        if isinstance(self.source, str | Path):
            stream = open(self.source, "rb")  # noqa: SIM115 - closed in __exit__
            self.stream = stream
            return stream
        self.source.seek(0)
        return self.source

    def __exit__(self, *exc: object) -> None:
        if self.stream is not None:
            self.stream.close()


def put_file(
    key: str, source: str | Path | IO[bytes], *, link: bool = False, record_hash: bool = False
) -> Stored:
    """Write a file or stream under key, streamed, replacing what was there. `link`: the
    source file is never changed again (a checkpoint's file), so a local-folder store on
    its filesystem may hold it as a hard link. `record_hash`: its hash is stored beside
    it (after it: a reader who finds the hash finds the file), for a cache to check."""
    key = check_key(key)
    stored = _put(key, source, *sha256_of(source), link=link)
    if record_hash:
        record = json.dumps({"sha256": stored.sha256, "size": stored.size}).encode()
        _put(key + HASH_SUFFIX, io.BytesIO(record), *sha256_of(io.BytesIO(record)), link=False)
    return stored


def content_hash_of(key: str) -> str | None:
    """The SHA-256 a content-addressed key names (put_content's <prefix>/<sha256>), else
    None."""
    last = check_key(key).rsplit("/", 1)[-1]
    return last if _SHA256.fullmatch(last) else None


def hash_record(key: str) -> bytes | None:
    """What put_file(..., record_hash=True) stored beside key (JSON: sha256, size), or
    None when nothing was (a file stored without its hash, by an older version)."""
    record_key = key + HASH_SUFFIX
    if not exists(record_key):
        return None
    with open_file(record_key) as handle:
        try:
            return bytes(handle.read())
        except _guarded_errors() as error:
            raise _unreachable(error) from error


def _put(key: str, source: str | Path | IO[bytes], sha: str, length: int, *, link: bool) -> Stored:
    from django.core.files import File

    if link and isinstance(source, str | Path):
        target = local_file(key)
        if target is not None:
            target.unlink()
        if _linked(key, Path(source)):
            return Stored(key, sha, length)
    storage = _storage()
    try:
        with _opened(source) as stream:
            if storage.exists(key):
                storage.delete(key)
            saved = storage.save(key, File(stream, name=PurePosixPath(key).name))
    except _guarded_errors() as error:
        raise _unreachable(error) from error
    if saved != key:  # a local folder renames rather than overwrite; we deleted first
        raise StoreUnavailable(f"The artifact store at {where()} kept {key} as {saved}.")
    return Stored(key, sha, length)


def put_content(source: str | Path | IO[bytes], prefix: str, *, link: bool = False) -> Stored:
    """Write immutable content under <prefix>/<sha256>; a second put of it writes nothing.
    `link`: the source file never changes, so a local-folder store on its filesystem may
    hold it as a hard link instead of a second copy (a laptop keeps a corpus once)."""
    sha, length = sha256_of(source)
    key = check_key(f"{prefix.rstrip('/')}/{sha}")
    if exists(key):
        return Stored(key, sha, size(key))
    return _put(key, source, sha, length, link=link)


def local_file(key: str) -> Path | None:
    """The file of key on this machine's disk when the store is a local folder (a cache
    can then hard-link it instead of copying it), else None."""
    from django.core.files.storage import FileSystemStorage

    storage = _storage()
    if not isinstance(storage, FileSystemStorage):
        return None
    path = Path(storage.path(check_key(key)))
    return path if path.is_file() else None


def _linked(key: str, source: Path) -> bool:
    """Hard-link source as key in a local-folder store (False where it cannot)."""
    from django.core.files.storage import FileSystemStorage

    storage = _storage()
    if not isinstance(storage, FileSystemStorage):
        return False
    target = Path(storage.path(key))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(source, target)
    except FileExistsError:
        return True
    except OSError:  # another filesystem, or links not allowed: copy instead
        return False
    return True


def _call(method: str, *args: Any) -> Any:
    try:
        return getattr(_storage(), method)(*args)
    except _guarded_errors() as error:
        raise _unreachable(error) from error


def exists(key: str) -> bool:
    return bool(_call("exists", check_key(key)))


# A name no artifact has: asking for it only tells whether the store answers.
_PROBE_KEY = "gym-probe/reachable"


def reachable() -> bool:
    """Whether the store answers now."""
    try:
        exists(_PROBE_KEY)
    except StoreUnavailable:
        return False
    return True


def patiently(
    call: Callable[[], T],
    *,
    what: str,
    patience: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`call()` (a write of what a worker made), tried again while the store cannot be
    reached: after 1, 2, 4 ... s (at most 30 s apart) for up to `patience` seconds
    (GYM_STORE_WRITE_PATIENCE), so that a store that restarts or a network that blinks
    costs a run a pause, not its work. Past that the last StoreUnavailable is raised,
    saying how long it was tried. `call` must be safe to repeat (a put of the same key)."""
    from django.conf import settings

    budget = settings.GYM_STORE_WRITE_PATIENCE if patience is None else patience
    deadline = time.monotonic() + max(0.0, budget)
    wait, tries = 1.0, 0
    while True:
        tries += 1
        try:
            return call()
        except StoreUnavailable as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                if tries == 1:
                    raise
                raise StoreUnavailable(
                    f"{exc} (writing {what}: tried {tries} times over {budget:g} s)"
                ) from exc
            log.warning("writing %s: %s; trying again in %.0f s", what, exc, min(wait, left))
            sleep(min(wait, left))
            wait = min(wait * 2, 30.0)


def exists_file(key: str) -> bool:
    """Whether a file is stored under key: not a folder of keys below it, which a
    local-folder store also says exists (a half-copied folder has files, no manifest)."""
    from django.core.files.storage import FileSystemStorage

    if isinstance(_storage(), FileSystemStorage):
        return local_file(key) is not None
    return exists(key)


def stored_problem(key: str, *, sha256: str | None = None) -> str:
    """What is wrong with what is stored under key ("" when it checks out), read back
    whole: a folder (a manifest under key) file by file against its manifest; a file
    against `sha256`, else the hash its key names, else the one recorded beside it (a
    file with none of them only has to be there)."""
    if exists(f"{check_key(key)}/manifest.json"):
        for entry in read_manifest(key):
            name = f"{key}/files/{entry['path']}"
            if not exists_file(name):
                return f"its file {entry['path']} is missing"
            if _stored_sha(name) != entry["sha256"]:
                return f"its file {entry['path']} does not match its manifest's hash"
        return ""
    if not exists_file(key):
        return "nothing is stored there"
    expected = sha256 or content_hash_of(key)
    record = hash_record(key) if expected is None else None
    if record is not None:
        expected = str(json.loads(record).get("sha256", "")) or None
    if expected is not None and _stored_sha(key) != expected:
        return f"its content's hash is not {expected}"
    return ""


def _stored_sha(key: str) -> str:
    with open_file(key) as handle:
        try:
            return sha256_of(handle)[0]
        except _guarded_errors() as error:
            raise _unreachable(error) from error


def size(key: str) -> int:
    return int(_call("size", check_key(key)))


def open_file(key: str) -> IO[bytes]:
    """The stored file, opened for reading in binary (a stream, not read whole)."""
    key = check_key(key)
    if not exists(key):
        raise FileNotFoundError(f"No artifact {key} in the store at {where()}.")
    stream: IO[bytes] = _call("open", key, "rb")
    return stream


def stream(key: str) -> Iterator[bytes]:
    """The stored file's bytes in chunks."""
    handle = open_file(key)
    try:
        while True:
            try:
                chunk = handle.read(CHUNK)
            except _guarded_errors() as error:
                raise _unreachable(error) from error
            if not chunk:
                return
            yield chunk
    finally:
        handle.close()


def delete(key: str) -> None:
    _call("delete", check_key(key))


def delete_prefix(prefix: str) -> int:
    """Delete every key under prefix (a stored folder: its manifest first, so that no
    reader finds a manifest whose files are going); returns how many."""
    keys = list_prefix(prefix)
    keys.sort(key=lambda k: not k.endswith("/manifest.json"))
    for key in keys:
        delete(key)
    return len(keys)


def list_prefix(prefix: str) -> list[str]:
    """Every key under prefix (a folder name; "" for all), sorted."""
    prefix = check_key(prefix.rstrip("/")) if prefix.strip("/") else ""
    keys: list[str] = []
    pending = [prefix]
    while pending:
        folder = pending.pop()
        try:
            folders, files = _storage().listdir(folder)
        except FileNotFoundError:  # a local folder store: nothing under that name yet
            continue
        except _guarded_errors() as error:
            raise _unreachable(error) from error
        base = f"{folder}/" if folder else ""
        keys += [base + name for name in files]
        pending += [base + name for name in folders]
    return sorted(keys)


# Folders (a model's save_pretrained folder, a checkpoint): a manifest and its files.


def put_folder(
    prefix: str,
    folder: Path,
    *,
    link: bool = False,
    include: Callable[[Path], bool] | None = None,
) -> Stored:
    """Store every file of folder (those `include(relative path)` accepts) under
    <prefix>/files/ and its manifest last, so that a reader who finds the manifest finds
    every file it names. Returns the manifest's entry. `link`: as for put_file."""
    prefix = check_key(prefix.rstrip("/"))
    entries = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if include is not None and not include(path.relative_to(folder)):
            continue
        relative = path.relative_to(folder).as_posix()
        stored = put_file(f"{prefix}/files/{relative}", path, link=link)
        entries.append({"path": relative, "sha256": stored.sha256, "size": stored.size})
    manifest = json.dumps({"files": entries}, indent=1, sort_keys=True).encode()
    return put_file(f"{prefix}/manifest.json", io.BytesIO(manifest))


def read_manifest(prefix: str) -> list[dict[str, Any]]:
    """The files a stored folder holds: path, sha256, size each."""
    with open_file(f"{check_key(prefix.rstrip('/'))}/manifest.json") as handle:
        try:
            files: list[dict[str, Any]] = json.loads(handle.read())["files"]
        except _guarded_errors() as error:
            raise _unreachable(error) from error
    return files
