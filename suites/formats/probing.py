"""SentEval probing files: one instance per line, read as a stream and checked.

A line is `partition <TAB> label [<TAB> extra ...] <TAB> sentence`: the partition is
`tr`, `va` or `te`, the label is the class, the sentence (space-tokenised) is the last
field, and any fields in between are kept as extra columns. Sentences hold raw double
quotes (`" Preston , is that you ? "`), so lines are split on tabs only: CSV quoting
would swallow them.

Pure Python, no Django: the import service, the `probe` command and the probing worker
all read files through `ProbingReader`, which holds only counts and the label set,
never the instances themselves, so a 120,000-line file streams through in constant
memory.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from suites.formats.limits import (
    BYTE_ENDS,
    DEFAULT_LIMITS,
    InputLimits,
    LimitExceeded,
    field_too_long,
    file_lines,
    line_too_long,
    pieces,
    too_many_rows,
)
from suites.formats.report import MAX_ERRORS, SuiteError

PARTITIONS = ("tr", "va", "te")
PARTITION_NAMES = {"tr": "training", "va": "validation", "te": "test"}
CUSTOM = "custom"

_TOP_CONSTITUENTS = frozenset(
    {
        "ADVP_NP_VP_.",
        "CC_ADVP_NP_VP_.",
        "CC_NP_VP_.",
        "IN_NP_VP_.",
        "NP_ADVP_VP_.",
        "NP_NP_VP_.",
        "NP_PP_.",
        "NP_VP_.",
        "OTHER",
        "PP_NP_VP_.",
        "RB_NP_VP_.",
        "SBAR_NP_VP_.",
        "SBAR_VP_.",
        "S_CC_S_.",
        "S_NP_VP_.",
        "S_VP_.",
        "VBD_NP_VP_.",
        "VP_.",
        "WHADVP_SQ_.",
        "WHNP_SQ_.",
    }
)

# The label sets SentEval's data/probing README documents, task by task. word_content
# has no fixed list (1000 target words chosen from the corpus), so it gets a rule instead.
SENTEVAL_LABELS: dict[str, frozenset[str] | None] = {
    "bigram_shift": frozenset({"O", "I"}),
    "coordination_inversion": frozenset({"O", "I"}),
    "obj_number": frozenset({"NN", "NNS"}),
    "odd_man_out": frozenset({"O", "C"}),
    "past_present": frozenset({"PAST", "PRES"}),
    "sentence_length": frozenset(str(n) for n in range(6)),
    "subj_number": frozenset({"NN", "NNS"}),
    "top_constituents": _TOP_CONSTITUENTS,
    "tree_depth": frozenset(str(n) for n in range(5, 13)),
    "word_content": None,
}
TASK_TYPES: tuple[str, ...] = (*SENTEVAL_LABELS, CUSTOM)
WORD_CONTENT_MAX_WORDS = 1000
LABEL_MAX_LENGTH = 200  # what the database keeps
# More classes than any probing task has; the bound keeps a hostile file's label table small.
MAX_LABELS = 10_000

# sentence_length's classes are bins of the token count (SentEval README).
SENTENCE_LENGTH_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28))

_WHITESPACE = re.compile(r"\s")


@dataclass(frozen=True)
class ProbingInstance:
    line: int  # 1-based line number in the file
    partition: str
    label: str
    sentence: str
    extra: tuple[str, ...] = ()

    @property
    def n_words(self) -> int:
        return len(self.sentence.split())


@dataclass
class ProbingSummary:
    """What a whole file held, without its instances (see `ProbingReader`)."""

    task_type: str
    errors: list[SuiteError]
    counts: dict[str, Counter[str]]  # partition -> label -> instances
    n_extra: int  # extra columns per line (the most seen)
    content_hash: str  # sha256 of the instance lines as read, newline-terminated

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def labels(self) -> list[str]:
        """Every label of the training partition, in sorted order (numeric labels by value)."""
        return sort_labels(self.counts["tr"])

    @property
    def total(self) -> int:
        return sum(sum(counter.values()) for counter in self.counts.values())


@dataclass
class ProbingFile:
    """A file read whole: the instances plus its summary (`instances` is empty on error)."""

    summary: ProbingSummary
    instances: list[ProbingInstance] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.summary.ok

    @property
    def errors(self) -> list[SuiteError]:
        return self.summary.errors

    def partition(self, name: str) -> list[ProbingInstance]:
        return [instance for instance in self.instances if instance.partition == name]


class ProbingFormatError(ValueError):
    """A probing file that cannot be used; `errors` lists every problem found."""

    def __init__(self, errors: list[SuiteError], source: str = "") -> None:
        self.errors = errors
        self.source = source
        head = "; ".join(str(error) for error in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        where = f"{source}: " if source else ""
        super().__init__(f"{where}not a valid probing file: {head}{more}")


def sort_labels(labels: Iterable[str]) -> list[str]:
    """Numeric labels (sentence_length, tree_depth) by value, then the others by name."""
    unique = set(labels)

    def key(label: str) -> tuple[int, int, str]:
        return (0, int(label), "") if label.isdigit() else (1, 0, label)

    return sorted(unique, key=key)


def check_task_type(task_type: str) -> str:
    if task_type not in TASK_TYPES:
        raise ValueError(
            f"unknown probing task type '{task_type}'; use one of {', '.join(TASK_TYPES)}"
        )
    return task_type


def guess_task_type(name: str) -> str:
    """The SentEval task a file name such as `past_present.txt` stands for, else custom."""
    stem = Path(name).name.split(".")[0].lower().replace("-", "_")
    return stem if stem in SENTEVAL_LABELS else CUSTOM


class ProbingReader:
    """Checks lines one at a time and collects every error, with its line number.

    `feed` returns the instance a good line holds (None for a bad or blank line);
    `finish` runs the checks that need the whole file (partitions present, va/te labels
    seen in tr, the label set of the task type) and returns the summary.
    """

    def __init__(self, task_type: str = CUSTOM, limits: InputLimits = DEFAULT_LIMITS) -> None:
        self.task_type = check_task_type(task_type)
        self.limits = limits
        self.allowed = SENTEVAL_LABELS.get(task_type)
        self.errors: list[SuiteError] = []
        self.counts: dict[str, Counter[str]] = {name: Counter() for name in PARTITIONS}
        # First line of each (partition, label): where to point an unseen-label error.
        self.first_line: dict[tuple[str, str], int] = {}
        self.n_extra = 0
        self._hash = hashlib.sha256()
        self._n_fields: int | None = None
        # Partitions named by any line, good or bad: a bad line's partition is not "missing".
        self._named: set[str] = set()
        # Only the first MAX_ERRORS line errors are kept (a 20 MB file of bad lines would
        # otherwise hold millions); the rest are counted.
        self._unlisted = 0
        self._labels: set[str] = set()

    def _error(self, line: int, message: str, column: str = "") -> None:
        if len(self.errors) >= MAX_ERRORS:
            self._unlisted += 1
            return
        where = f"line {line}" + (f", {column}" if column else "")
        self.errors.append(SuiteError(where, message))

    def feed(self, number: int, raw: str | bytes) -> ProbingInstance | None:
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self._error(
                    number,
                    f"not UTF-8 text (byte {exc.start + 1} of the line); save the file as UTF-8",
                )
                return None
        text = raw.rstrip("\r\n")
        if number == 1:
            text = text.removeprefix("\ufeff")
        if not text.strip():
            return None  # blank lines (a final empty line, say) carry no instance
        if "\x00" in text:
            # No text column of PostgreSQL holds one (the import failed there with a 500).
            self._error(
                number,
                f"a NUL byte at character {text.index(chr(0)) + 1}; remove it (is this a text file?)",
            )
            return None
        self._hash.update(text.encode("utf-8") + b"\n")
        fields = self._fields(number, text)
        if fields is None:
            return None
        if len(fields) < 3:
            self._error(
                number,
                f"has {len(fields)} tab-separated field{'s' if len(fields) != 1 else ''}; "
                "expected at least 3: partition, label, sentence (separated by tabs, not spaces)",
            )
            return None
        partition, label, sentence = fields[0].strip(), fields[1].strip(), fields[-1].strip()
        extra = tuple(fields[2:-1])
        good = True
        if self._n_fields is None:
            self._n_fields = len(fields)
        elif len(fields) != self._n_fields:
            self._error(
                number,
                f"has {len(fields)} fields where the lines before have {self._n_fields}; "
                "every line needs the same columns",
            )
            good = False
        if partition in PARTITIONS:
            self._named.add(partition)
        else:
            self._error(
                number,
                f"partition '{partition[:40]}' is not one of tr, va, te",
                "field 1",
            )
            good = False
        if not label:
            self._error(number, "the label is empty", "field 2")
            good = False
        elif len(label) > LABEL_MAX_LENGTH:
            self._error(
                number, f"the label is longer than {LABEL_MAX_LENGTH} characters", "field 2"
            )
            good = False
        elif not self._label_ok(number, label, sentence):
            good = False
        elif label not in self._labels:
            if len(self._labels) >= MAX_LABELS:
                self._error(
                    number,
                    f"more than {MAX_LABELS:,} different labels; a probing task's labels "
                    "are classes (check that the label is the second field)",
                    "field 2",
                )
                good = False
            else:
                self._labels.add(label)
        if not sentence:
            self._error(number, "the sentence is empty", f"field {len(fields)}")
            good = False
        if not good:
            return None
        self.counts[partition][label] += 1
        self.first_line.setdefault((partition, label), number)
        self.n_extra = max(self.n_extra, len(extra))
        return ProbingInstance(number, partition, label, sentence, extra)

    def _fields(self, number: int, text: str) -> list[str] | None:
        """The line's fields, or None (an error) for a line or a field over the limits
        (a line from an iterable of lines was held to no limit before)."""
        if len(text) > self.limits.line_chars:
            self.limit_met(line_too_long(self.limits, number))
            return None
        fields = text.split("\t")
        longest = max(map(len, fields))
        if longest > self.limits.field_chars:
            self.limit_met(field_too_long(self.limits, longest, row=number))
            return None
        return fields

    def limit_met(self, exc: LimitExceeded) -> None:
        """A limit met (a line or a field too long: that line is left out; too many
        lines: the reader stops) is an error of the file."""
        where = f"line {exc.row}" if exc.row is not None else "file"
        if len(self.errors) >= MAX_ERRORS:
            self._unlisted += 1
        else:
            self.errors.append(SuiteError(where, exc.message))

    def _label_ok(self, number: int, label: str, sentence: str) -> bool:
        if self.allowed is not None:
            if label not in self.allowed:
                shown = ", ".join(sort_labels(self.allowed))
                self._error(
                    number,
                    f"label '{label[:40]}' is not one of {self.task_type}'s labels "
                    f"(SentEval's labels: {shown}); use type 'custom' for other labels",
                    "field 2",
                )
                return False
            return True
        if self.task_type == "word_content":
            if _WHITESPACE.search(label) or label != label.lower():
                self._error(
                    number,
                    f"word_content label '{label[:40]}' must be one lower-case word",
                    "field 2",
                )
                return False
            hits = [word for word in sentence.lower().split() if word == label]
            if len(hits) != 1:
                self._error(
                    number,
                    f"word_content label '{label}' occurs {len(hits)} times in the sentence; "
                    "the target word occurs exactly once",
                    "field 2",
                )
                return False
        return True

    def finish(self) -> ProbingSummary:
        errors = list(self.errors)
        for name in PARTITIONS:
            if name not in self._named:
                errors.append(
                    SuiteError(
                        "file",
                        f"no {PARTITION_NAMES[name]} instances (partition '{name}'); "
                        "a probing task needs tr, va and te lines",
                    )
                )
        seen = set(self.counts["tr"])
        if seen:
            unseen = sorted(
                (line, name, label)
                for (name, label), line in self.first_line.items()
                if name != "tr" and label not in seen
            )
            for line, name, label in unseen:
                count = self.counts[name][label]
                errors.append(
                    SuiteError(
                        f"line {line}",
                        f"label '{label}' occurs in '{name}' ({count} line"
                        f"{'s' if count != 1 else ''}, the first here) but never "
                        "in 'tr': a probe cannot learn a class it never sees",
                    )
                )
        if self.task_type == "word_content" and len(seen) > WORD_CONTENT_MAX_WORDS:
            errors.append(
                SuiteError(
                    "file",
                    f"word_content has {len(seen)} target words in 'tr'; "
                    f"SentEval's task has at most {WORD_CONTENT_MAX_WORDS}",
                )
            )
        unlisted = self._unlisted + max(0, len(errors) - MAX_ERRORS)
        errors = errors[:MAX_ERRORS]
        if unlisted:
            errors.append(
                SuiteError(
                    "file",
                    f"… and {unlisted} more error{'s' if unlisted != 1 else ''} not shown; "
                    "fix the ones above first",
                )
            )
        return ProbingSummary(
            task_type=self.task_type,
            errors=errors,
            counts=self.counts,
            n_extra=self.n_extra,
            content_hash=self._hash.hexdigest(),
        )


LineSource = str | bytes | Path | Iterable[str] | Iterable[bytes]


_NEWLINE = re.compile("\n")


def _lines(source: LineSource, limits: InputLimits) -> Iterator[str | bytes]:
    """The lines of `source` (split at newlines only), a path's, a text's and bytes'
    held to `limits` before a line is copied out."""
    if isinstance(source, Path):
        with source.open("rb") as handle:
            yield from file_lines(handle, limits)
    elif isinstance(source, bytes):
        yield from (line for _, line in pieces(source, limits, BYTE_ENDS))
    elif isinstance(source, str):
        yield from (line for _, line in pieces(source, limits, _NEWLINE))
    else:
        for number, line in enumerate(cast(Iterable[str | bytes], source), start=1):
            if number > limits.rows:
                raise too_many_rows(limits, number)
            yield line


def iter_probing(
    source: LineSource,
    reader: ProbingReader,
) -> Iterator[ProbingInstance]:
    """Stream the good instances of `source` (a path, text, bytes, or lines) through
    `reader`; call `reader.finish()` afterwards to learn whether the file is valid. The
    first limit met (`reader.limits`) is an error, and the file is read no further."""
    try:
        for number, raw in enumerate(_lines(source, reader.limits), start=1):
            instance = reader.feed(number, raw)
            if instance is not None:
                yield instance
    except LimitExceeded as exc:
        reader.limit_met(exc)


def read_probing(
    source: LineSource,
    *,
    task_type: str = CUSTOM,
    keep: Callable[[ProbingInstance], bool] | None = None,
    limits: InputLimits = DEFAULT_LIMITS,
) -> ProbingFile:
    """Read and check a whole probing file; `instances` holds those `keep` accepts."""
    reader = ProbingReader(task_type, limits)
    instances = [
        instance for instance in iter_probing(source, reader) if keep is None or keep(instance)
    ]
    summary = reader.finish()
    return ProbingFile(summary, instances if summary.ok else [])


def load_probing_file(path: str | Path, *, task_type: str | None = None) -> ProbingFile:
    """Read a probing file whose type, unless given, is guessed from its name; raise
    ProbingFormatError listing every problem when it is not valid."""
    path = Path(path)
    result = read_probing(path, task_type=task_type or guess_task_type(path.name))
    if not result.ok:
        raise ProbingFormatError(result.errors, str(path))
    return result


def sentence_length_label(n_words: int) -> str | None:
    """The sentence_length class of a sentence of `n_words` tokens (None outside 5-28)."""
    for index, (low, high) in enumerate(SENTENCE_LENGTH_BINS):
        if low <= n_words <= high:
            return str(index)
    return None
