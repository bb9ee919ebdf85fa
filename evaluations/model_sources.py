"""Where a registered model may come from, checked before anything reads it.

A model is a hub id (`gpt2`, `EleutherAI/pythia-160m`), checked by syntax only, or a local
folder or file, which must lie under one of the configured model folders
(settings.GYM_MODEL_DIRS) once symlinks and `..` are resolved. The resolved path is what
is stored, so one folder written two ways is one model. Messages never tell whether a
path outside the model folders exists.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Hugging Face's rules: an optional owner and a name, each of letters, digits, "-", "_"
# and ".", starting and ending with a letter or digit, no "--" or "..", 96 at most.
_HUB_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_HUB_ID = re.compile(rf"(?:{_HUB_PART}/)?{_HUB_PART}", re.ASCII)
HUB_ID_MAX_LENGTH = 96 * 2 + 1
# A config.json larger than this is no config: reading it would only cost memory.
CONFIG_MAX_BYTES = 1024 * 1024
# Files that hold a tokenizer's vocabulary, as save_pretrained writes them (fast
# tokenizers, GPT-2 BPE, WordPiece, SentencePiece): a model folder needs one of them.
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
    "tokenizer.model",
    "sentencepiece.bpe.model",
)


class ModelSourceError(ValueError):
    """The source cannot be registered; the message says why, for the person registering."""


@dataclass(frozen=True)
class ModelSource:
    source: str  # the hub id, or the resolved absolute path
    local: bool


def _looks_local(raw: str, cwd: Path) -> bool:
    if raw.startswith(("/", "~", ".")) or "\\" in raw or raw.count("/") > 1:
        return True
    # "var/models" is a valid hub id too; where it names something on this machine,
    # transformers would read that, so it is checked as a path.
    return _exists(cwd / raw)


def _exists(path: Path) -> bool:
    """Whether `path` exists; False for a name the file system cannot hold (too long)."""
    try:
        return path.exists()
    except OSError:
        return False


def _inside(path: Path, folders: Sequence[Path]) -> bool:
    return any(path == folder or folder in path.parents for folder in folders)


def model_source_check(
    raw: str, *, model_dirs: Sequence[Path], cwd: Path | None = None
) -> ModelSource:
    """The source to store for `raw`, or ModelSourceError."""
    raw = raw.strip()
    cwd = cwd or Path.cwd()
    if not raw:
        raise ModelSourceError(
            "give a hub id (e.g. gpt2 or EleutherAI/pythia-160m) or the path of a model "
            "folder under the model folders"
        )
    if not _looks_local(raw, cwd):
        if len(raw) > HUB_ID_MAX_LENGTH or not _HUB_ID.fullmatch(raw) or ".." in raw or "--" in raw:
            raise ModelSourceError(
                f"{raw[:100]!r} is not a hub id: write owner/name or name, with letters, "
                "digits, '-', '_' and '.', each part starting and ending with a letter or "
                "digit (at most 96 characters)"
            )
        return ModelSource(source=raw, local=False)

    folders = [Path(d).expanduser().resolve() for d in model_dirs]
    listing = ", ".join(str(f) for f in folders) or "(none configured)"
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = cwd / path
    # Containment is decided on the resolved path, before anything is said about
    # existence, so that the answer for /etc/shadow and /no/such/file is the same.
    resolved = path.resolve()
    if not _inside(resolved, folders):
        raise ModelSourceError(
            f"local models must be saved under a model folder ({listing}); copy the model "
            "folder there (save_pretrained), or ask the site's administrators to add its "
            "folder to GYM_MODEL_DIRS"
        )
    if not _exists(resolved):
        raise ModelSourceError(
            f"nothing named {resolved.relative_to(_base(resolved, folders))} in the model "
            f"folder {_base(resolved, folders)}; save the model there first"
        )
    if resolved.is_dir():
        folder_check(resolved)
    return ModelSource(source=str(resolved), local=True)


def folder_check(folder: Path) -> None:
    """A transformers model folder: a config and a tokenizer (the weights are the
    worker's to read)."""
    if not (folder / "config.json").is_file():
        raise ModelSourceError(
            "that folder holds no config.json: save the model with save_pretrained "
            "(model and tokenizer) into it"
        )
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelSourceError(
            "that folder holds a config.json but no tokenizer files (one of "
            f"{', '.join(TOKENIZER_FILES)}): save the tokenizer into it too, "
            "with tokenizer.save_pretrained(folder)"
        )


def _base(path: Path, folders: Sequence[Path]) -> Path:
    return next(f for f in folders if path == f or f in path.parents)


def config_is_readable(source: ModelSource) -> bool:
    """Whether the web process may look at this model to learn its kind: a local folder
    with a small config.json, or a file (whose first bytes alone are sniffed for an n-gram
    format). Never weights: a file may be gigabytes, and only its head is read. Never a
    hub id: a page does not wait on the network (the worker learns its kind)."""
    if not source.local:
        return False
    path = Path(source.source)
    if path.is_file():
        return True
    config = path / "config.json"
    return path.is_dir() and config.is_file() and config.stat().st_size <= CONFIG_MAX_BYTES


# An absolute path (POSIX or Windows) inside a message: `/home/x/y`, `C:\\x\\y`.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])(?:/[^\s'\"`()<>,;]+|[A-Za-z]:\\[^\s'\"`()<>,;]+)")


def public_source(source: str, *, model_dirs: Sequence[Path]) -> str:
    """A model's source as others may read it: a hub id as it is; a local path relative to
    the model folder that holds it (`models/gpt2-small`), or else only its last two parts
    (a package's own file), so that no page tells how the server's file system looks."""
    if not source.startswith("/"):
        return source
    path = Path(source)
    for folder in model_dirs:
        for base in {folder, folder.resolve()}:
            if path == base or base in path.parents:
                return str(Path(base.name) / path.relative_to(base))
    return str(Path("…", *path.parts[-2:]))


def public_error(text: str) -> str:
    """A worker's failure reason as others may read it: absolute paths replaced, so that
    no page tells how the server's file system looks."""
    return _ABSOLUTE_PATH.sub("<path on the server>", text)
