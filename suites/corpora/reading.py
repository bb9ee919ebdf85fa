"""Reading a corpus file: NLPScholar's TSV with a `text` column, or plain text with one
sequence per line, either gzipped. No Django: the upload, the import command and the
training worker all read corpora through here.

The reader streams: it holds one line at a time, and a problem names its line. What it
writes out is the normalised corpus (one sequence per line, UTF-8, `\\n` ends each line),
whose SHA-256 is the corpus's content hash.

The held-out validation lines are chosen by a seeded hash of the line number (SplitMix64),
so the same file, fraction and seed always hold out the same lines.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO

import numpy as np

TSV = "tsv"
TEXT = "text"
FORMATS = (TSV, TEXT)

# Lengths (in words) above this share the last bucket of the histogram.
LENGTH_CAP = 256
SAMPLE_LINES = 20
# A sample line is kept to this many characters (the site passes GYM_SAMPLE_LINE_CHARS):
# twenty whole lines of a corpus of long lines would make its row and its page megabytes.
DEFAULT_SAMPLE_CHARS = 500
# The longest line read (bytes, before decoding); the site passes GYM_MAX_CORPUS_LINE_BYTES.
# The reader never holds more than one line and its read buffer, so this bounds its memory.
DEFAULT_MAX_LINE_BYTES = 1024 * 1024
DEFAULT_VALIDATION_FRACTION = 0.01
DEFAULT_VALIDATION_MAX = 10_000
DEFAULT_VALIDATION_SEED = 0
_MASK63 = (1 << 63) - 1


class CorpusError(ValueError):
    """The file is not a corpus Gym can read; `where` says where ("line 7")."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class TooLarge(CorpusError):
    """The corpus (uncompressed), or one of its lines, is larger than the limit it was read
    under."""


# --- the held-out split -------------------------------------------------------------------


def line_hashes(seed: int, start: int, count: int) -> np.ndarray:
    """63-bit hashes of line numbers start .. start+count-1 (counted from 1) under `seed`:
    SplitMix64's finaliser, vectorised."""
    with np.errstate(over="ignore"):
        z = np.arange(start, start + count, dtype=np.uint64)
        z = z + np.uint64((seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(1)).astype(np.int64)


class ValidationChooser:
    """Keeps the `maximum` smallest line hashes seen so far; at the end, `threshold`
    holds out the lines whose hash is at or below it: round(fraction * lines) of them, at
    most `maximum`, at least one when the corpus has two lines or more."""

    def __init__(self, *, fraction: float, maximum: int, seed: int) -> None:
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"the validation fraction must be in [0, 1); got {fraction}")
        if maximum < 0:
            raise ValueError(f"the most validation lines must be 0 or more; got {maximum}")
        self.fraction = fraction
        self.maximum = maximum
        self.seed = seed
        self._kept = np.empty(0, dtype=np.int64)  # the smallest hashes so far
        self.lines = 0

    def add(self, count: int) -> None:
        """The next `count` lines."""
        if self.maximum and count:
            both = np.concatenate([self._kept, line_hashes(self.seed, self.lines + 1, count)])
            if len(both) > self.maximum:
                both = np.partition(both, self.maximum - 1)[: self.maximum]
            self._kept = both
        self.lines += count

    def finish(self) -> tuple[int, int]:
        """(threshold, held-out lines); threshold -1 holds out nothing."""
        wanted = min(round(self.fraction * self.lines), self.maximum)
        if self.fraction > 0 and wanted == 0 and self.lines >= 2 and self.maximum:
            wanted = 1
        if wanted == 0:
            return -1, 0
        return int(np.sort(self._kept)[wanted - 1]), wanted


def held_out(seed: int, threshold: int, start: int, count: int) -> np.ndarray:
    """Which of lines start .. start+count-1 are validation lines (a boolean array)."""
    if threshold < 0:
        return np.zeros(count, dtype=bool)
    return line_hashes(seed, start, count) <= threshold


# --- reading ----------------------------------------------------------------------------


@dataclass
class CorpusSummary:
    source_format: str  # "tsv" or "text"
    gzipped: bool
    content_hash: str = ""
    lines: int = 0
    words: int = 0
    characters: int = 0
    bytes: int = 0  # of the normalised text
    blank_lines: int = 0  # left out
    length_counts: Counter[int] = field(default_factory=Counter)
    sample: list[tuple[int, str]] = field(default_factory=list)
    validation_threshold: int = -1
    validation_lines: int = 0

    def length_histogram(self) -> dict[str, int]:
        return {str(n): self.length_counts[n] for n in sorted(self.length_counts)}


def _decoded(raw: bytes, number: int) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"line {number}",
            f"not UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line); "
            "save the file as UTF-8",
        ) from None
    if "\x00" in text:
        raise CorpusError(
            f"line {number}",
            f"a NUL byte at character {text.index(chr(0)) + 1}; remove it (is this a text file?)",
        )
    return text


def _binary_lines(handle: IO[bytes], gzipped: bool, max_line: int) -> Iterator[bytes]:
    """The file's lines as bytes, each with its line end; a line longer than `max_line`
    bytes is refused as soon as that many bytes of it are read (never read whole)."""
    stream: gzip.GzipFile | IO[bytes] = (
        gzip.GzipFile(fileobj=handle, mode="rb") if gzipped else handle
    )
    # BufferedReader reads through read/readinto, which gzip, open files and Django's
    # uploaded files have; typeshed asks for a full raw stream. Decompression happens one
    # buffer at a time, so what is held is bounded whatever the compression ratio.
    reader = io.BufferedReader(stream, buffer_size=1 << 20)  # type: ignore[type-var]
    number = 0
    try:
        while raw := reader.readline(max_line + 1):
            number += 1
            if len(raw) > max_line and not raw.endswith(b"\n"):
                raise TooLarge(
                    f"line {number}",
                    f"the line is longer than {max_line:,} bytes (GYM_MAX_CORPUS_LINE_BYTES); "
                    "a corpus holds one sequence per line: break long lines at sentence "
                    "ends, or ask the site's administrators to raise the limit",
                )
            yield raw
    except (OSError, EOFError, zlib.error) as exc:
        raise CorpusError("file", f"the gzip stream is damaged or truncated ({exc})") from None


def _is_gzip(handle: IO[bytes]) -> bool:
    if isinstance(handle, io.BufferedReader) and not handle.seekable():
        head = handle.peek(2)[:2]  # a request body as it arrives: look, do not take
    else:
        head = handle.read(2)
        handle.seek(0)
    return head == b"\x1f\x8b"


def iter_corpus(
    handle: IO[bytes],
    *,
    name: str = "",
    limit: int | None = None,
    max_line: int = DEFAULT_MAX_LINE_BYTES,
    summary: CorpusSummary | None = None,
) -> Iterator[tuple[int, str]]:
    """(line number in the file, sequence) for each non-blank sequence of a corpus file.

    `handle` is a seekable binary file, or a buffered stream (a request body), gzipped
    or not. A TSV (a `.tsv` name, or a first
    line with a tab, or a first line that is just `text`) needs a `text` column in its
    header; other columns are ignored. `limit` bounds the uncompressed bytes read and
    `max_line` each line's, both counted as the file is read and decompressed.
    `summary`, when given, learns the format as soon as the header is read.
    """
    gzipped = _is_gzip(handle)
    lower = name.lower().removesuffix(".gz")
    text_column: int | None = None
    columns = 0
    read = 0
    for number, raw in enumerate(_binary_lines(handle, gzipped, max_line), start=1):
        read += len(raw)
        if limit is not None and read > limit:
            raise TooLarge(
                f"line {number}",
                f"the corpus is larger than {limit:,} bytes uncompressed; split it, or ask "
                "the site's administrators to raise GYM_MAX_CORPUS_BYTES",
            )
        line = _decoded(raw, number).rstrip("\r\n")
        if number == 1:
            line = line.removeprefix("\ufeff")
            is_tsv = lower.endswith(".tsv") or "\t" in line or line.strip() == "text"
            if summary is not None:
                summary.source_format = TSV if is_tsv else TEXT
                summary.gzipped = gzipped
            if is_tsv:
                header = [c.strip() for c in line.split("\t")]
                if "text" not in header:
                    shown = ", ".join(repr(c) for c in header[:10])
                    raise CorpusError(
                        "line 1",
                        f"a TSV corpus needs a column named 'text' in its header; found {shown}",
                    )
                text_column = header.index("text")
                columns = len(header)
                continue
        if text_column is not None:
            fields = line.split("\t")
            if len(fields) != columns:
                raise CorpusError(
                    f"line {number}",
                    f"{len(fields)} tab-separated fields; the header has {columns} "
                    "(a tab inside the text? write it as a space)",
                )
            line = fields[text_column]
        line = line.strip()
        if line:
            yield number, line
        elif summary is not None:
            summary.blank_lines += 1


def read_corpus(
    handle: IO[bytes],
    out: BinaryIO,
    *,
    name: str = "",
    limit: int | None = None,
    max_line: int = DEFAULT_MAX_LINE_BYTES,
    sample_chars: int = DEFAULT_SAMPLE_CHARS,
    validation_fraction: float = DEFAULT_VALIDATION_FRACTION,
    validation_max: int = DEFAULT_VALIDATION_MAX,
    validation_seed: int = DEFAULT_VALIDATION_SEED,
) -> CorpusSummary:
    """Check a corpus file, write its normalised text to `out` and count it.

    Raises CorpusError naming the line of the first problem (an empty corpus included).
    """
    summary = CorpusSummary(source_format=TEXT, gzipped=False)
    digest = hashlib.sha256()
    chooser = ValidationChooser(
        fraction=validation_fraction, maximum=validation_max, seed=validation_seed
    )
    # A seeded reservoir: the sample is the same for the same file.
    rng = np.random.default_rng(validation_seed)
    pending = 0
    for number, line in iter_corpus(
        handle, name=name, limit=limit, max_line=max_line, summary=summary
    ):
        data = line.encode("utf-8") + b"\n"
        digest.update(data)
        out.write(data)
        summary.lines += 1
        pending += 1
        if pending >= 65536:
            chooser.add(pending)
            pending = 0
        words = len(line.split())
        summary.words += words
        summary.characters += len(line)
        summary.bytes += len(data)
        summary.length_counts[min(words, LENGTH_CAP)] += 1
        if len(summary.sample) < SAMPLE_LINES:
            summary.sample.append((summary.lines, sample_text(line, sample_chars)))
        else:
            slot = int(rng.integers(summary.lines))
            if slot < SAMPLE_LINES:
                summary.sample[slot] = (summary.lines, sample_text(line, sample_chars))
        del number
    chooser.add(pending)
    if summary.lines == 0:
        raise CorpusError("file", "no text: the corpus has no non-blank sequence")
    summary.sample.sort()
    summary.content_hash = digest.hexdigest()
    summary.validation_threshold, summary.validation_lines = chooser.finish()
    return summary


def sample_text(line: str, chars: int) -> str:
    """A sample line as kept and shown: its first `chars` characters (at least one), and
    "…" after them when it was longer."""
    chars = max(1, chars)
    return line if len(line) <= chars else f"{line[:chars]}…"


def open_normalised(path: Path) -> Iterator[str]:
    """The sequences of a stored (normalised) corpus file, one per line."""
    with path.open("r", encoding="utf-8", newline="\n") as handle:
        for line in handle:
            yield line.rstrip("\n")


@dataclass(frozen=True)
class Split:
    """Which lines of a corpus are held out for validation."""

    seed: int = DEFAULT_VALIDATION_SEED
    threshold: int = -1

    def lines(self, sequences: Iterator[str], *, validation: bool) -> Iterator[str]:
        """The training (validation=False) or validation lines of `sequences`, in order."""
        chunk: list[str] = []
        start = 1
        for line in sequences:
            chunk.append(line)
            if len(chunk) >= 65536:
                yield from self._pick(chunk, start, validation)
                start += len(chunk)
                chunk = []
        yield from self._pick(chunk, start, validation)

    def _pick(self, chunk: list[str], start: int, validation: bool) -> Iterator[str]:
        mask = held_out(self.seed, self.threshold, start, len(chunk))
        for line, out in zip(chunk, mask.tolist(), strict=True):
            if out == validation:
                yield line


def corpus_file_split(
    path: Path,
    *,
    fraction: float = DEFAULT_VALIDATION_FRACTION,
    maximum: int = DEFAULT_VALIDATION_MAX,
    seed: int = DEFAULT_VALIDATION_SEED,
) -> tuple[Split, int]:
    """The split of a normalised corpus file (one pass to count its lines) and how many
    lines it holds out."""
    chooser = ValidationChooser(fraction=fraction, maximum=maximum, seed=seed)
    count = 0
    with path.open("rb") as handle:
        for _line in handle:
            count += 1
    chooser.add(count)
    threshold, held = chooser.finish()
    return Split(seed=seed, threshold=threshold), held
