"""Uploading a model: a folder saved with `save_pretrained` (weights as safetensors),
packed as .tar, .tar.gz or .zip, or a word n-gram model as an ARPA file, gzipped or not.

What is sent is untrusted: nothing in it is run, and it is held to its own limits
(GYM_MAX_MODEL_*). The file streams to a temporary file beside the uploads, hashed and
counted as it comes; an archive is unpacked into a temporary folder beside them
(`archives`), and the model in it checked as far as the web process can without loading
weights: its config, its kind, no custom code, its tokenizer loads. Only then does that
folder take its place, `registry.uploaded_model_dir(content hash)`, and the model's row is
written, status `checking`, with a check for a GPU worker (`checks`). A refusal keeps
nothing: no row, no file."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from evaluations import model_sources
from evaluations.language_models import archives, checks
from evaluations.language_models import registry as model_registry
from evaluations.models import LanguageModel
from evaluations.scoring import kinds, sources
from gym import artifacts
from gym.errors import ApplicationError, UploadTooLarge

_CHUNK = 1024 * 1024
# Uploaded models in the artifact store: <this>/<content hash>[/model.arpa...]
UPLOADED_PREFIX = "models/uploaded"
ARCHIVE_FORMATS = ("tar", "tar.gz", "zip")
# The suffixes a model file's name may end in, longest first: the default name drops them.
_SUFFIXES = (".tar.gz", ".arpa.gz", ".tgz", ".tar", ".zip", ".arpa", ".gz", ".lm")
# A tokenizer's files, as save_pretrained writes them: named when it does not load.
_TOKENIZER_NAMES = {
    *model_sources.TOKENIZER_FILES,
    "merges.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
}
ACCEPTED = (
    "a folder saved with save_pretrained (config.json, the tokenizer's files and the "
    "weights as .safetensors) packed as .tar, .tar.gz or .zip, or an n-gram model as an "
    "ARPA file (plain or gzipped)"
)


class ModelUploadRefused(ApplicationError):
    """The file sent cannot be a model here (400, or 413 when a limit was reached), and
    nothing was kept. Its error names the field `file` and, in an archive, the member."""

    def __init__(self, message: str, *, member: str = "", too_large: bool = False) -> None:
        super().__init__(message)
        self.member = member
        if too_large:
            self.status_code = 413
            self.code = "too_large"

    def error_list(self) -> list[dict[str, Any]]:
        entry: dict[str, Any] = {"code": self.code, "message": str(self), "path": "$.file"}
        if self.member:
            entry["location"] = {"member": self.member}
        return [entry]


def name_from_file(filename: str) -> str:
    """my-model.tar.gz -> my-model"""
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    for suffix in _SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def _received(stream: IO[bytes], folder: Path) -> tuple[Path, str]:
    """The upload written to a temporary file in `folder`, and its SHA-256; held to
    GYM_MAX_MODEL_UPLOAD_BYTES as it comes (413)."""
    limit = settings.GYM_MAX_MODEL_UPLOAD_BYTES
    fd, name = tempfile.mkstemp(prefix=".incoming-", dir=folder)
    path = Path(name)
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise UploadTooLarge(size, limit, "GYM_MAX_MODEL_UPLOAD_BYTES")
                digest.update(chunk)
                out.write(chunk)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    if size == 0:
        path.unlink()
        raise ModelUploadRefused(f"the file is empty; send {ACCEPTED}")
    return path, digest.hexdigest()


def _damaged(exc: Exception) -> ModelUploadRefused:
    return ModelUploadRefused(
        f"the gzip file is damaged or cut short (truncated): {exc}; send it again whole"
    )


def _is_tar(head: bytes) -> bool:
    return head[257:262] == b"ustar"


def _gzip_head(path: Path) -> bytes:
    try:
        with gzip.open(path, "rb") as handle:
            return handle.read(512)
    except (OSError, EOFError, zlib.error) as exc:
        raise _damaged(exc) from None


def _format(path: Path, filename: str) -> str:
    """'tar', 'tar.gz', 'zip', 'arpa' or 'arpa.gz', from the file's first bytes (the name
    only says which refusal a pickle gets)."""
    with path.open("rb") as handle:
        head = handle.read(512)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith(b"\x1f\x8b") and _is_tar(_gzip_head(path)):
        return "tar.gz"
    if _is_tar(head):
        return "tar"
    found = kinds.ngram_format(path)
    if found in (kinds.ARPA, kinds.ARPA_GZ):
        return found
    if found is not None:
        raise ModelUploadRefused(
            "CMU Sphinx binaries cannot be uploaded; upload the model as an ARPA file "
            "(sphinx_lm_convert writes one)"
        )
    suffix = Path(filename.lower()).suffix
    if suffix in archives.PICKLE_SUFFIXES:
        raise ModelUploadRefused(
            f"pickled weights ({suffix}) are not accepted; {archives.TO_SAFETENSORS}"
        )
    raise ModelUploadRefused(f"this is not a model file Gym can take; send {ACCEPTED}")


def _arpa_check(path: Path, gzipped: bool) -> None:
    """An ARPA file whole (it ends in \\end\\), its text within
    GYM_MAX_MODEL_UNPACKED_BYTES: a gzipped one is read through, in bounded memory."""
    limit = settings.GYM_MAX_MODEL_UNPACKED_BYTES
    size, tail = 0, b""
    try:
        with gzip.open(path, "rb") if gzipped else path.open("rb") as text:
            while chunk := text.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise ModelUploadRefused(
                        f"the ARPA file unpacks to more than {limit:,} bytes "
                        "(GYM_MAX_MODEL_UNPACKED_BYTES)",
                        too_large=True,
                    )
                tail = (tail + chunk)[-64:]
    except (OSError, EOFError, zlib.error) as exc:
        raise _damaged(exc) from None
    if b"\\end\\" not in tail:
        raise ModelUploadRefused(
            "the ARPA file does not end with \\end\\: it was cut short (truncated); "
            "send it again whole"
        )


def _limits() -> archives.Limits:
    return archives.Limits(
        files=settings.GYM_MAX_MODEL_FILES,
        unpacked=settings.GYM_MAX_MODEL_UNPACKED_BYTES,
        member=settings.GYM_MAX_MODEL_MEMBER_BYTES,
    )


def _staged(incoming: Path, fmt: str, staging: Path) -> tuple[Path, str]:
    """The model unpacked (or moved) into `staging` and checked: the folder that becomes
    the upload's, and the model's kind."""
    if fmt in (kinds.ARPA, kinds.ARPA_GZ):
        _arpa_check(incoming, gzipped=fmt == kinds.ARPA_GZ)
        os.replace(incoming, staging / f"model.{fmt}")
        return staging, kinds.NGRAM
    try:
        archives.unpack(incoming, fmt=fmt, folder=staging, limits=_limits())
    except archives.ArchiveRefused as refused:
        raise ModelUploadRefused(
            str(refused), member=refused.member, too_large=refused.too_large
        ) from None
    root = archives.model_root(staging)
    return root, _folder_check(root)


def _config(root: Path) -> dict[str, Any]:
    """config.json, read within CONFIG_MAX_BYTES, naming a model type transformers knows."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    path = root / "config.json"
    if not path.is_file():
        raise ModelUploadRefused(
            "the archive holds no config.json at its top (or in its one top folder): pack "
            "the folder that model.save_pretrained(folder) wrote"
        )
    config = _json_file(path, "config.json")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelUploadRefused("config.json names no model_type", member="config.json")
    if model_type not in CONFIG_MAPPING:
        raise ModelUploadRefused(
            f"config.json: model_type {model_type[:100]!r} is not one that transformers "
            "knows here; save a model of an architecture transformers has",
            member="config.json",
        )
    return config


def _json_file(path: Path, member: str) -> dict[str, Any]:
    if path.stat().st_size > model_sources.CONFIG_MAX_BYTES:
        raise ModelUploadRefused(
            f"{member} is larger than {model_sources.CONFIG_MAX_BYTES:,} bytes: no config is",
            member=member,
        )
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, RecursionError) as exc:
        raise ModelUploadRefused(f"{member} is not valid JSON: {exc}", member=member) from None
    if not isinstance(data, dict):
        raise ModelUploadRefused(f"{member} is not a JSON object", member=member)
    return data


def _no_custom_code(root: Path) -> None:
    """No config of the folder asks for code of the model's own (auto_map), or to trust
    it (trust_remote_code)."""
    for path in sorted(root.rglob("*config.json")):
        member = path.relative_to(root).as_posix()
        found = {"auto_map", "trust_remote_code"} & set(_json_file(path, member))
        if found:
            raise ModelUploadRefused(
                f"{member} asks for custom code ({', '.join(sorted(found))}); {archives.NO_CODE}",
                member=member,
            )


def _public(text: str, root: Path) -> str:
    """A library's message about the unpacked folder, without the server's paths."""
    return model_sources.public_error(text.replace(str(root), "<model>"))


def _folder_check(root: Path) -> str:
    """The kind ('causal' or 'masked') of the unpacked model at `root`, checked without
    its weights being read; ModelUploadRefused otherwise."""
    from transformers import AutoConfig, AutoTokenizer

    _config(root)
    _no_custom_code(root)
    if not any(root.glob(f"*{archives.WEIGHTS_SUFFIX}")):
        raise ModelUploadRefused(
            f"the archive holds no weights as .safetensors beside config.json; "
            f"{archives.TO_SAFETENSORS}"
        )
    try:
        kind = kinds.kind_from_config(AutoConfig.from_pretrained(root, local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - any failure is the config's
        raise ModelUploadRefused(
            f"config.json cannot be used: {_public(str(exc), root)}", member="config.json"
        ) from None
    try:
        model_sources.folder_check(root)
        AutoTokenizer.from_pretrained(root, local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - any failure is the tokenizer's
        files = sorted(p.name for p in root.iterdir() if p.name in _TOKENIZER_NAMES)
        raise ModelUploadRefused(
            f"the tokenizer ({', '.join(files) or 'no files'}) does not load: "
            f"{_public(str(exc), root)}; save it into the folder with "
            "tokenizer.save_pretrained(folder)"
        ) from None
    return kind


def _uploaded_before(content_hash: str, user: User) -> None:
    """Refuse a file that is some model's upload already (naming it where the sender may
    see it)."""
    earlier = LanguageModel.objects.filter(content_hash=content_hash).first()
    if earlier is None:
        return
    if checks.refused_for_an_outage(earlier):
        # Refused for the store, not for the model: never the end of this file.
        if earlier.registered_by_id == user.pk:
            earlier.delete()  # the sender's own: this upload takes its place
            return
        checks.model_check_sent_again(earlier.pk)  # someone else's: checked again
    seen = model_registry.visible_models(user).filter(pk=earlier.pk).exists()
    where = f"as the model '{earlier.name}'" if seen else "by someone else, as a hidden model"
    raise ModelUploadRefused(f"this same file was uploaded already, {where}")


@contextmanager
def _workspace() -> Iterator[tuple[Path, Path]]:
    """The uploads folder and a temporary folder in it, removed on leaving."""
    root = model_registry.uploaded_models_root()
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=root))
    try:
        yield root, staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _placed(folder: Path, content_hash: str) -> Path:
    """`folder` moved to the upload's own place, at once (a rename in one file system).
    A folder there without a row is what a killed upload left: it is replaced."""
    final = model_registry.uploaded_model_dir(content_hash)
    if final.exists() and not LanguageModel.objects.filter(content_hash=content_hash).exists():
        shutil.rmtree(final, ignore_errors=True)
    try:
        os.rename(folder, final)
    except OSError:  # there again: the same file, uploaded at this moment
        raise ModelUploadRefused("this same file is being uploaded at this moment") from None
    return final


def model_upload(
    *,
    stream: IO[bytes],
    filename: str,
    user: User,
    name: str = "",
    display_name: str = "",
    description: str = "",
    reference_url: str = "",
    hidden: bool = False,
) -> LanguageModel:
    """Receive, check and keep an uploaded model (see the module's docstring): its row,
    status `checking`, owned by `user`, its check sent to a worker once the row is
    committed. Raises ModelRegistrationError (a field), ModelUploadRefused or
    UploadTooLarge, and keeps nothing then."""
    stem = name_from_file(filename)
    name, errors = model_registry.naming_errors(
        name=name, display_name=display_name, description=description, default=stem or "model"
    )
    if errors:
        raise model_registry.ModelRegistrationError(errors)
    with _workspace() as (root, staging):
        incoming, content_hash = _received(stream, root)
        try:
            _uploaded_before(content_hash, user)
            folder, kind = _staged(incoming, _format(incoming, filename), staging)
        finally:
            incoming.unlink(missing_ok=True)
        final = _placed(folder, content_hash)
        try:
            return _model_create(
                final,
                content_hash=content_hash,
                kind=kind,
                name=name,
                display_name=display_name or stem[:200] or name,
                description=description,
                reference_url=reference_url,
                hidden=hidden,
                user=user,
            )
        except BaseException:
            shutil.rmtree(final, ignore_errors=True)
            raise


def _stored(source: Path, content_hash: str) -> str:
    """The checked upload in the artifact store, where every worker finds it (a hard link
    in a local-folder store, no second copy): its artifact: source. StoreUnavailable
    when the store cannot be reached (the upload is refused; nothing is kept)."""
    key = f"{UPLOADED_PREFIX}/{content_hash}"
    if source.is_file():  # an ARPA model
        key = f"{key}/{source.name}"
        artifacts.put_file(key, source, link=True, record_hash=True)
    else:
        artifacts.put_folder(key, source, link=True)
    return sources.artifact_source(key)


def _model_create(final: Path, *, content_hash: str, hidden: bool, **fields: Any) -> LanguageModel:
    """The upload's row, and its check sent once the row is committed."""
    arpa = [path for path in final.iterdir() if path.name.startswith("model.arpa")]
    source = arpa[0] if arpa else final
    stored = _stored(source, content_hash)
    try:
        with transaction.atomic():
            model = LanguageModel.objects.create(
                source=stored,
                content_hash=content_hash,
                upload_key=source.relative_to(model_registry.uploaded_models_root()).as_posix(),
                status=LanguageModel.Status.CHECKING,
                is_hidden=hidden,
                registered_by=fields.pop("user"),
                **fields,
            )
            transaction.on_commit(lambda: checks.check_send(model.pk))
    except IntegrityError:
        raise model_registry.ModelRegistrationError(
            {"name": "that model was registered a moment ago"}
        ) from None
    return model
