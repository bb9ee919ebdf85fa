"""Unpacking an uploaded model archive (.tar, .tar.gz or .zip) into a folder, member by
member, refusing on the way whatever a model folder has no need of and an attacker would
use: absolute names, `..`, links, devices and fifos, pickled weights, code, and more
members or bytes than the limits allow. Sizes are counted as the bytes are written, so an
archive that lies about them is held to the limits all the same. No Django here: the
caller gives the limits and the folder, and removes the folder when this refuses."""

from __future__ import annotations

import errno
import lzma
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import IO

# Weights that unpickling would run as code; transformers reads them when no safetensors
# file is there.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
CODE_SUFFIXES = (".py", ".pyc")
WEIGHTS_SUFFIX = ".safetensors"
TO_SAFETENSORS = (
    "convert the weights to safetensors: load the model with transformers and save it "
    "again with model.save_pretrained(folder, safe_serialization=True) (the default since "
    "transformers 4.35), then pack that folder without its .bin/.pt files"
)
NO_CODE = (
    "models that need code of their own cannot be uploaded (nothing sent is ever run "
    "here): save a model of an architecture transformers has, without auto_map"
)
# macOS's archiver adds this folder of resource forks; it is no part of the model.
_MAC_FOLDER = "__MACOSX"
_CHUNK = 1024 * 1024
_NAME_PART_BYTES = 255
# A whole member name; far below the OS's path limit (4,096 bytes with our folder's).
_NAME_BYTES = 1024
# What the archive readers raise on a damaged or hostile archive: reading the upload
# can raise these; writing our own folder is held apart (`_unpack_member`), so a fault of
# ours (a full disk) is not taken for the sender's.
_UNREADABLE = (
    tarfile.TarError,
    zipfile.BadZipFile,
    lzma.LZMAError,
    EOFError,
    zlib.error,
    struct.error,
    ValueError,
    OSError,
)
_DAMAGED = "the archive is damaged or cut short (truncated), or not readable"


@dataclass(frozen=True)
class Limits:
    """How much one archive may unpack to: `files` members (folders too), `unpacked`
    bytes in all, `member` bytes in any member but the weights (.safetensors, held to
    `unpacked` alone); each with the setting that holds it, for the message."""

    files: int
    unpacked: int
    member: int
    files_setting: str = "GYM_MAX_MODEL_FILES"
    unpacked_setting: str = "GYM_MAX_MODEL_UNPACKED_BYTES"
    member_setting: str = "GYM_MAX_MODEL_MEMBER_BYTES"


class ArchiveRefused(ValueError):
    """The archive cannot be a model: `member` (when one member is the cause) and why.
    `too_large` when a limit was reached."""

    def __init__(self, message: str, *, member: str = "", too_large: bool = False) -> None:
        member = shown(member)
        super().__init__(f"member '{member}': {message}" if member else message)
        self.member = member
        self.too_large = too_large


def shown(name: str) -> str:
    """A member's name as it can be shown (and sent as JSON): bytes that are not UTF-8,
    which tarfile keeps as surrogates, written as \\xff."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace").decode()
    return raw.decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class Member:
    """One entry of an archive: its name as written, what it is ("file", "folder", or
    what it is instead: "a symbolic link", ...), its declared size, and how to read it."""

    name: str
    what: str
    size: int
    open: Callable[[], IO[bytes]]


def _tar_what(info: tarfile.TarInfo) -> str:
    if info.isfile():
        return "file"
    if info.isdir():
        return "folder"
    if info.issym():
        return "a symbolic link"
    if info.islnk():
        return "a hard link"
    if info.ischr() or info.isblk():
        return "a device"
    if info.isfifo():
        return "a fifo"
    return "not a plain file or folder"


# Headers that tarfile reads whole, before the member they name: GNU long names and
# links, and pax headers, whose parser in Python < 3.11.10 takes time quadratic in their
# size (CVE-2024-6232: 0.13 s at 8 KB, 21 s at 100 KB). A real one holds a name (ours are
# at most _NAME_BYTES) and a few times and attributes.
_EXTENDED_TYPES = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)
_EXTENDED_BYTES = 8 * 1024
# ... and in all, one archive's (about 2 s of that parser at worst).
_EXTENDED_TOTAL_BYTES = 128 * 1024


def _guarded_info() -> type[tarfile.TarInfo]:
    """A TarInfo that refuses an extended header over the bounds from its header block,
    before tarfile reads what it declares."""
    seen = 0

    class GuardedInfo(tarfile.TarInfo):
        def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
            nonlocal seen
            if self.type in _EXTENDED_TYPES:
                seen += self.size
                if self.size > _EXTENDED_BYTES:
                    raise ArchiveRefused(
                        f"an extended (pax or GNU long name) header of {self.size:,} bytes; "
                        f"none needs more than {_EXTENDED_BYTES:,}",
                        member=self.name,
                    )
                if seen > _EXTENDED_TOTAL_BYTES:
                    raise ArchiveRefused(
                        f"more than {_EXTENDED_TOTAL_BYTES:,} bytes of extended (pax or GNU "
                        "long name) headers in all",
                        member=self.name,
                    )
            return super()._proc_member(tar)  # type: ignore[misc]

    return GuardedInfo


def _tar_members(path: Path, *, gzipped: bool) -> Generator[Member, None, None]:
    # Read as a stream, front to back: a member is unpacked before the next is read.
    guarded = _guarded_info()
    with (
        tarfile.open(path, mode="r|gz", tarinfo=guarded)
        if gzipped
        else tarfile.open(path, mode="r|", tarinfo=guarded)
    ) as tar:
        for info in tar:
            yield Member(info.name, _tar_what(info), info.size, partial(_tar_file, tar, info))


def _tar_file(tar: tarfile.TarFile, info: tarfile.TarInfo) -> IO[bytes]:
    return _opened(tar.extractfile(info))


def _opened(handle: IO[bytes] | None) -> IO[bytes]:
    if handle is None:
        raise ArchiveRefused("a file whose contents cannot be read")
    return handle


def _zip_what(info: zipfile.ZipInfo) -> str:
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if info.flag_bits & 0x1:
        return "an encrypted file"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if kind and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "a device or fifo"
    return "folder" if info.is_dir() else "file"


# The end of a zip: its record (22 bytes, then a comment of up to 64 KB), and before it,
# in a ZIP64 archive, a locator (20 bytes) after the ZIP64 record (56 bytes).
_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
# The most one central directory entry of a model's zip needs: 46 bytes, its name, and
# its extra fields and comment (a few dozen bytes in practice).
_ZIP_ENTRY_BYTES = 46 + _NAME_BYTES + 4 * 1024


def _zip_directory_check(path: Path, limits: Limits) -> None:
    """Refuse a zip whose central directory holds more entries than `limits.files`, or
    is larger than its entries can need, before zipfile reads it (whole, into memory).
    Found where zipfile finds it; a zip without one is left to zipfile to refuse."""
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        handle.seek(max(0, size - _EOCD.size - 0xFFFF))
        tail = handle.read()
        at = len(tail) - _EOCD.size
        if not (tail[at : at + 4] == b"PK\x05\x06" and tail.endswith(b"\x00\x00")):
            at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < _EOCD.size:
            return
        fields = _EOCD.unpack_from(tail, at)
        counts, directory = [fields[3], fields[4]], fields[5]
        start = size - len(tail) + at - _ZIP64_LOCATOR.size
        if start >= _ZIP64_EOCD.size:
            handle.seek(start - _ZIP64_EOCD.size)
            both = handle.read(_ZIP64_EOCD.size + _ZIP64_LOCATOR.size)
            if both[_ZIP64_EOCD.size : _ZIP64_EOCD.size + 4] == b"PK\x06\x07":
                zip64 = _ZIP64_EOCD.unpack_from(both)
                if zip64[0] == b"PK\x06\x06":
                    counts += [zip64[6], zip64[7]]
                    directory = max(directory, zip64[8])
    entries = max(counts)
    if entries > limits.files:
        raise ArchiveRefused(
            f"the archive has more than {limits.files} members ({limits.files_setting})",
            too_large=True,
        )
    if directory > entries * _ZIP_ENTRY_BYTES:
        raise ArchiveRefused(
            f"{_DAMAGED}: its list of members ({directory:,} bytes) is larger than its "
            f"{entries} members can need; send it again whole"
        )


def _zip_archive(path: Path, limits: Limits) -> zipfile.ZipFile:
    _zip_directory_check(path, limits)
    try:
        return zipfile.ZipFile(path)
    except UnicodeDecodeError as exc:  # a name flagged UTF-8 that is not
        name = exc.object if isinstance(exc.object, bytes) else b""
        raise ArchiveRefused(
            "the name is not valid UTF-8, though the archive says it is; name the files in UTF-8",
            member=name.decode("utf-8", "backslashreplace"),
        ) from None


def _zip_members(path: Path, limits: Limits) -> Generator[Member, None, None]:
    with _zip_archive(path, limits) as archive:
        for info in archive.infolist():
            yield Member(
                info.filename, _zip_what(info), info.file_size, partial(archive.open, info)
            )


def _safe_name(name: str) -> PurePosixPath | None:
    """The member's place inside the folder, or None for the folder itself ('.', './').
    Raises ArchiveRefused for a name that would reach outside it."""
    try:
        size = len(name.encode())
    except UnicodeEncodeError:
        raise ArchiveRefused(
            "the name is not valid UTF-8; name the files in UTF-8", member=name
        ) from None
    if size > _NAME_BYTES:
        raise ArchiveRefused(f"a name longer than {_NAME_BYTES:,} bytes", member=name)
    if "\x00" in name or "\\" in name:
        raise ArchiveRefused("a NUL or backslash in the name", member=name)
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveRefused("an absolute path; pack the folder with relative names", member=name)
    parts = [part for part in PurePosixPath(name).parts if part != "."]
    if ".." in parts:
        raise ArchiveRefused("'..' in the name would place it outside the folder", member=name)
    if any(len(part.encode()) > _NAME_PART_BYTES for part in parts):
        raise ArchiveRefused(f"a name longer than {_NAME_PART_BYTES} bytes", member=name)
    return PurePosixPath(*parts) if parts else None


def _content_check(name: str, place: PurePosixPath) -> None:
    suffix = place.suffix.lower()
    if suffix in PICKLE_SUFFIXES:
        raise ArchiveRefused(
            f"pickled weights ({suffix}) are not accepted; {TO_SAFETENSORS}", member=name
        )
    if suffix in CODE_SUFFIXES:
        raise ArchiveRefused(f"Python code; {NO_CODE}", member=name)


class _Counter:
    """Members and bytes unpacked so far, held to the limits."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.members = 0
        self.bytes = 0

    def member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.files:
            raise ArchiveRefused(
                f"the archive has more than {self.limits.files} members "
                f"({self.limits.files_setting})",
                member=name,
                too_large=True,
            )

    def declared(self, name: str, size: int, place: PurePosixPath) -> None:
        """Refuse a member whose declared size is over a limit before a byte is written."""
        self._check(name, size, self.bytes + size, place)

    def wrote(self, name: str, count: int, member_bytes: int, place: PurePosixPath) -> None:
        """Count `count` more bytes of a member now `member_bytes` long."""
        self.bytes += count
        self._check(name, member_bytes, self.bytes, place)

    def _check(self, name: str, member_bytes: int, total: int, place: PurePosixPath) -> None:
        if total > self.limits.unpacked:
            raise ArchiveRefused(
                f"the archive unpacks to more than {self.limits.unpacked:,} bytes "
                f"({self.limits.unpacked_setting})",
                member=name,
                too_large=True,
            )
        if place.suffix.lower() != WEIGHTS_SUFFIX and member_bytes > self.limits.member:
            raise ArchiveRefused(
                f"unpacks to more than {self.limits.member:,} bytes, the limit of any one "
                f"file but the weights ({self.limits.member_setting})",
                member=name,
                too_large=True,
            )


def _write(member: Member, target: Path, place: PurePosixPath, counter: _Counter) -> None:
    counter.declared(member.name, member.size, place)
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with _read_refused(member.name):
        source = member.open()
    # "x": a name that appears twice in the archive is refused, not overwritten.
    with source, target.open("xb") as out:
        while True:
            with _read_refused(member.name):
                chunk = source.read(_CHUNK)
            if not chunk:
                break
            written += len(chunk)
            counter.wrote(member.name, len(chunk), written, place)
            out.write(chunk)


def _unpack_member(member: Member, folder: Path, counter: _Counter) -> None:
    place = _safe_name(member.name)
    counter.member(member.name)
    if place is None or place.parts[0] == _MAC_FOLDER:
        return
    if member.what not in ("file", "folder"):
        raise ArchiveRefused(
            f"{member.what}; only plain files and folders are accepted", member=member.name
        )
    target = folder.joinpath(*place.parts)
    try:
        if member.what == "folder":
            target.mkdir(parents=True, exist_ok=True)
            return
        _content_check(member.name, place)
        _write(member, target, place, counter)
    except (FileExistsError, NotADirectoryError):
        raise ArchiveRefused(
            "the name is given twice, or as a file and a folder", member=member.name
        ) from None
    except OSError as exc:  # writing our folder: only a name the OS refuses is theirs
        if exc.errno != errno.ENAMETOOLONG:
            raise
        raise ArchiveRefused("a name too long to be a file's", member=member.name) from None


@contextmanager
def _read_refused(member: str) -> Iterator[None]:
    """What reading a damaged or hostile archive raises, as ArchiveRefused (at `member`,
    or at none when it is the archive's own records)."""
    try:
        yield
    except ArchiveRefused:
        raise
    except _UNREADABLE as exc:
        # An OSError's text may hold our file's path: its reason alone is said.
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ArchiveRefused(
            f"{_DAMAGED}: {reason or type(exc).__name__}; send it again whole", member=member
        ) from None
    except NotImplementedError as exc:  # a zip compression method Python cannot read
        raise ArchiveRefused(f"{_DAMAGED}: {exc}", member=member) from None


def unpack(path: Path, *, fmt: str, folder: Path, limits: Limits) -> None:
    """Unpack the archive at `path` (`fmt`: "tar", "tar.gz" or "zip") into `folder`,
    which must exist and be empty. Raises ArchiveRefused; what was written before then is
    the caller's to remove."""
    counter = _Counter(limits)
    members = (
        _zip_members(path, limits) if fmt == "zip" else _tar_members(path, gzipped=fmt == "tar.gz")
    )
    with closing(members):
        while True:
            with _read_refused(""):
                member = next(members, None)
            if member is None:
                break
            _unpack_member(member, folder, counter)


def model_root(folder: Path) -> Path:
    """The folder the model's files are in: `folder` itself, or its one subfolder when
    the archive packed a folder (`tar czf model.tar.gz my-model/`)."""
    if (folder / "config.json").exists():
        return folder
    entries = [entry for entry in folder.iterdir() if entry.name != _MAC_FOLDER]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return folder
