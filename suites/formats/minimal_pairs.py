"""Minimal-pair sets: NLPScholar data TSVs and BLiMP JSONL <-> one plain form.

An NLPScholar data TSV has the required columns `sentid` and `sentence`; `pairid` and
`comparison` (`expected` / `unexpected`) make pairs; an optional `ROI` column holds
comma-separated zero-based word positions (a blank cell means the whole sentence); every
other column is a condition column whose values may be any text. A BLiMP JSONL file has
one pair per line (`sentence_good`, `sentence_bad`, `pairID` and condition fields).

Words are model-independent: whitespace chunks, with their leading and trailing
punctuation characters split off as punctuation words of one character each. ROI
positions and the evaluate table's `wordpos` count these words.

Pure Python, no Django: the command line and the analysis use it without a database.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from suites.formats.limits import (
    DEFAULT_LIMITS,
    InputLimits,
    LimitExceeded,
    LineFeed,
    count_values,
    field_too_long,
    text_lines,
    too_many_values,
)

EXPECTED = "expected"
UNEXPECTED = "unexpected"
LABELS = (EXPECTED, UNEXPECTED)

SENTID = "sentid"
SENTENCE = "sentence"
PAIRID = "pairid"
COMPARISON = "comparison"
ROI = "ROI"
RESERVED = (SENTID, PAIRID, COMPARISON, SENTENCE, ROI)

NLPSCHOLAR_TSV = "nlpscholar-tsv"
BLIMP_JSONL = "blimp-jsonl"
LM_EVAL_TASK = "lm-eval-task"

# The metric each format's publishers report by default, which a set's runs take unless
# asked otherwise (docs/minimal-pairs.md, "Metrics"): NLPScholar's TSV comes with its
# analysis; an lm-eval task folder with the harness's own string (a leading space after
# the end-of-text token); every other format (`<shape>-<container>`: the BLiMP family,
# JBLiMP, MultiBLiMP, Zorro, CLAMS, LM_syneval) is published with whole-sentence log
# probabilities.
FORMAT_METRICS = {NLPSCHOLAR_TSV: "nlpscholar", LM_EVAL_TASK: "lm_eval"}


def format_metric(source_format: str) -> str:
    """The metric of a set read from `source_format` (a recorded format name)."""
    if not source_format:
        return "nlpscholar"  # no recorded format: sets from before formats were named
    return FORMAT_METRICS.get(source_format, "sentence")


# A broken file can produce an error per row; the first few usually share one cause.
MAX_ERRORS = 200
# The left-out pairs a warning names before it says how many more there are.
DROPPED_SHOWN = 50


class MinimalPairFormatError(ValueError):
    """The file cannot be read as a minimal-pair set; `errors` lists every problem."""

    def __init__(self, errors: list[PairSetError]) -> None:
        self.errors = cap_errors(errors)
        super().__init__("\n".join(str(error) for error in self.errors))

    @classmethod
    def of(cls, exc: LimitExceeded) -> MinimalPairFormatError:
        """The refusal of a file over a limit, where the limit was met."""
        return cls([PairSetError(exc.row, exc.column, exc.message)])


@dataclass(frozen=True)
class PairSetError:
    """One problem, located by row (the file's line number, header = row 1; a JSONL
    line number) and column (a TSV column or a JSON field), when they apply."""

    row: int | None
    column: str | None
    message: str

    @property
    def path(self) -> str:
        parts = []
        if self.row is not None:
            parts.append(f"row {self.row}")
        if self.column is not None:
            parts.append(f"column {self.column}")
        return ", ".join(parts) or "file"

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "row": self.row, "column": self.column, "message": self.message}

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ErrorList(list[PairSetError]):
    """A file's errors as a reader finds them: the first MAX_ERRORS kept, every one
    counted (`total`), so that a file of a million bad rows builds two hundred errors."""

    def __init__(self, errors: Iterable[PairSetError] = ()) -> None:
        super().__init__()
        self.total = 0
        self.extend(errors)

    def append(self, error: PairSetError) -> None:
        self.total += 1
        if len(self) < MAX_ERRORS:
            super().append(error)

    def extend(self, errors: Iterable[PairSetError]) -> None:
        for error in errors:
            self.append(error)


def error_count(errors: list[PairSetError]) -> int:
    """How many errors were found (an ErrorList keeps only the first of them)."""
    return errors.total if isinstance(errors, ErrorList) else len(errors)


def cap_errors(errors: list[PairSetError], limit: int = MAX_ERRORS) -> list[PairSetError]:
    total = error_count(errors)
    if total <= limit:
        return list(errors)
    rest = total - limit
    return [*errors[:limit], PairSetError(None, None, f"... and {rest} more errors not shown")]


@dataclass(frozen=True)
class Word:
    text: str
    start: int  # character offsets in the sentence
    end: int
    punctuation: bool


@dataclass(frozen=True)
class PairSentence:
    sentid: str
    sentence: str
    pairid: str | None
    comparison: str | None
    roi: tuple[int, ...] | None  # None: the whole sentence
    conditions: dict[str, str]
    row: int  # where it came from (TSV row or JSONL line)


@dataclass
class MinimalPairSet:
    sentences: list[PairSentence]
    columns: list[str]  # the TSV's columns in file order (export writes them back so)
    condition_columns: list[str]
    source_format: str
    warnings: list[str] = field(default_factory=list)
    dropped_pairs: list[str] = field(default_factory=list)
    # The metric its publishers report where the data says so (an lm-eval task's
    # delimiter); "" for the format's own (format_metric).
    metric: str = ""

    @property
    def has_pairs(self) -> bool:
        return PAIRID in self.columns

    def pairs(self) -> dict[str, list[PairSentence]]:
        """Sentences by pairid, pairs in first-seen order."""
        out: dict[str, list[PairSentence]] = {}
        for sentence in self.sentences:
            if sentence.pairid is not None:
                out.setdefault(sentence.pairid, []).append(sentence)
        return out


def is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def split_words(sentence: str) -> list[Word]:
    """Whitespace chunks, each chunk's leading and trailing punctuation characters split
    off as one-character punctuation words; a chunk of punctuation only is all
    punctuation words. Punctuation inside a chunk ("don't", "U.S") stays in the word."""
    words: list[Word] = []
    position = 0
    length = len(sentence)
    while position < length:
        if sentence[position].isspace():
            position += 1
            continue
        start = position
        while position < length and not sentence[position].isspace():
            position += 1
        end = position
        left = start
        while left < end and is_punctuation(sentence[left]):
            left += 1
        right = end
        while right > left and is_punctuation(sentence[right - 1]):
            right -= 1
        for pos in range(start, left):
            words.append(Word(sentence[pos], pos, pos + 1, True))
        if left < right:
            words.append(Word(sentence[left:right], left, right, False))
        for pos in range(right, end):
            words.append(Word(sentence[pos], pos, pos + 1, True))
    return words


def word_of_tokens(words: list[Word], offsets: Iterable[tuple[int, int]], text: str) -> list[int]:
    """The word of each token: the one holding the token's first non-space character
    (a token of spaces only goes with the word after it, else the one before)."""
    owner = [-1] * len(text)
    for index, word in enumerate(words):
        for pos in range(word.start, word.end):
            owner[pos] = index
    result: list[int] = []
    for start, end in offsets:
        anchor = next((p for p in range(start, min(end, len(text))) if owner[p] >= 0), None)
        if anchor is None:
            anchor = next((p for p in range(end, len(text)) if owner[p] >= 0), None)
        if anchor is None:
            anchor = next(
                (p for p in range(min(start, len(text)) - 1, -1, -1) if owner[p] >= 0), None
            )
        result.append(owner[anchor] if anchor is not None else -1)
    return result


# ---------------------------------------------------------------- reading


def decode_text(data: str | bytes) -> str:
    """A file's text: UTF-8, a byte order mark dropped."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = exc.object[: exc.start].count(b"\n") + 1
            message = (
                f"the file is not UTF-8 text: the byte 0x{exc.object[exc.start]:02x} (byte "
                f"{exc.start + 1} of the file) is not valid UTF-8; save the file as UTF-8 and "
                "upload it again"
            )
            raise MinimalPairFormatError([PairSetError(line, None, message)]) from None
    return data.removeprefix("\ufeff")


def parse_minimal_pairs(
    data: str | bytes,
    *,
    filename: str = "",
    drop_incomplete_pairs: bool = False,
    limits: InputLimits = DEFAULT_LIMITS,
) -> MinimalPairSet:
    """Read an NLPScholar TSV or a BLiMP JSONL file (chosen by the name's suffix, else by
    whether the first non-blank character is `{`). Raises MinimalPairFormatError with
    every problem found; `drop_incomplete_pairs` leaves pairs without both labels out
    with a warning, as NLPScholar does, instead of failing."""
    text = decode_text(data)
    lowered = filename.lower()
    if lowered.endswith((".jsonl", ".json")) or (
        not lowered.endswith((".tsv", ".txt")) and text.lstrip().startswith("{")
    ):
        return parse_blimp_jsonl(text, drop_incomplete_pairs=drop_incomplete_pairs, limits=limits)
    return parse_nlpscholar_tsv(text, drop_incomplete_pairs=drop_incomplete_pairs, limits=limits)


def parse_nlpscholar_tsv(
    data: str | bytes, *, drop_incomplete_pairs: bool = False, limits: InputLimits = DEFAULT_LIMITS
) -> MinimalPairSet:
    header, rows = _tsv_rows(decode_text(data), limits)
    errors = ErrorList()
    seen: set[str] = set()
    for index, name in enumerate(header):
        if not name:
            errors.append(PairSetError(1, f"#{index + 1}", "a column has no name in the header"))
        elif name in seen:
            errors.append(PairSetError(1, name, "the column name appears twice in the header"))
        seen.add(name)
    for required in (SENTID, SENTENCE):
        if required not in header:
            errors.append(
                PairSetError(
                    1, required, f"the required column `{required}` is missing from the header"
                )
            )
    if (PAIRID in header) != (COMPARISON in header):
        present, absent = (PAIRID, COMPARISON) if PAIRID in header else (COMPARISON, PAIRID)
        errors.append(
            PairSetError(1, absent, f"`{present}` needs a `{absent}` column too (pairs need both)")
        )
    if errors:
        raise MinimalPairFormatError(errors)
    records: list[tuple[int, dict[str, str]]] = []
    for line, fields in rows:
        if len(fields) != len(header):
            errors.append(
                PairSetError(
                    line,
                    None,
                    f"{len(fields)} fields where the header has {len(header)}; "
                    "a tab inside a cell needs the cell in double quotes",
                )
            )
            continue
        records.append((line, dict(zip(header, fields, strict=True))))
    conditions = [name for name in header if name not in RESERVED]
    return _build(
        records,
        header,
        conditions,
        NLPSCHOLAR_TSV,
        errors,
        drop_incomplete_pairs=drop_incomplete_pairs,
        limits=limits,
    )


def _tsv_rows(text: str, limits: InputLimits) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the other rows that are not blank (each with its line), held to
    `limits` as they are read."""
    feed = LineFeed(text, limits)
    reader = csv.reader(feed, delimiter="\t", quotechar='"')
    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    try:
        for fields in reader:
            feed.record(fields, header)
            if not any(cell.strip() for cell in fields):
                continue  # blank lines, as pandas skips them
            if header is None:
                header = [cell.strip() for cell in fields]
                continue
            rows.append((reader.line_num, fields))
    except LimitExceeded as exc:
        raise MinimalPairFormatError.of(exc) from None
    except csv.Error as exc:
        raise MinimalPairFormatError(
            [PairSetError(reader.line_num, None, f"cannot read the TSV here: {exc}")]
        ) from None
    if header is None:
        raise MinimalPairFormatError([PairSetError(None, None, "the file is empty")])
    return header, rows


def jsonl_records(
    text: str, limits: InputLimits = DEFAULT_LIMITS
) -> tuple[list[tuple[int, dict[str, object]]], list[PairSetError]]:
    """(line number, object) of every non-blank line, and an error for each line that
    is not one JSON object. Lines and values are held to `limits` as they are read."""
    records: list[tuple[int, dict[str, object]]] = []
    errors = ErrorList()
    values = 0
    try:
        for number, line in text_lines(text, limits):
            if not line.strip():
                continue
            value = _json_line(line, number, errors)
            if value is None:
                continue
            values += count_values(value, limits.values - values)
            if values > limits.values:
                found = f"line {number:,} takes the file past {limits.values:,} JSON values"
                raise too_many_values(limits, found, row=number)
            records.append((number, value))
    except LimitExceeded as exc:
        raise MinimalPairFormatError.of(exc) from None
    return records, errors


def _json_line(line: str, number: int, errors: list[PairSetError]) -> dict[str, object] | None:
    """The object on one line, or None with an error added."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        errors.append(
            PairSetError(number, None, f"not valid JSON: {exc.msg} at column {exc.colno}")
        )
        return None
    except RecursionError:
        errors.append(PairSetError(number, None, "the JSON is nested too deeply to be a pair"))
        return None
    except ValueError:  # what json.loads raises for a number of over 4,300 digits
        errors.append(PairSetError(number, None, "a number on this line has over 4,300 digits"))
        return None
    if not isinstance(value, dict):
        errors.append(PairSetError(number, None, "each line must be one JSON object (a pair)"))
        return None
    return value


def parse_blimp_jsonl(
    data: str | bytes, *, drop_incomplete_pairs: bool = False, limits: InputLimits = DEFAULT_LIMITS
) -> MinimalPairSet:
    """One pair per line: sentence_good -> expected, sentence_bad -> unexpected, pairID ->
    pairid (the line number when absent), every other field -> a condition column."""
    objects, errors = jsonl_records(decode_text(data), limits)
    if not objects and not errors:
        errors.append(PairSetError(None, None, "the file holds no pairs"))
    conditions = condition_fields(objects, ("sentence_good", "sentence_bad", "pairID"), limits)
    bad = [name for name in conditions if name in RESERVED]
    for name in bad:
        errors.append(
            PairSetError(None, name, f"`{name}` is a reserved column name; rename the field")
        )
    records: list[tuple[int, dict[str, str]]] = []
    sentid = 0
    for number, value in objects:
        pairid = value.get("pairID", number)
        shared = {name: cell_text(value.get(name)) for name in conditions if name not in RESERVED}
        for key, label in (("sentence_good", EXPECTED), ("sentence_bad", UNEXPECTED)):
            if not isinstance(value.get(key), str):
                errors.append(PairSetError(number, key, f"`{key}` is missing or not a string"))
                continue
            sentid += 1
            records.append(
                (
                    number,
                    {
                        SENTID: str(sentid),
                        PAIRID: cell_text(pairid),
                        COMPARISON: label,
                        SENTENCE: str(value[key]),
                        **shared,
                    },
                )
            )
    columns = [SENTID, PAIRID, COMPARISON, SENTENCE, *[c for c in conditions if c not in RESERVED]]
    result = _build(
        records,
        columns,
        [c for c in conditions if c not in RESERVED],
        BLIMP_JSONL,
        errors,
        drop_incomplete_pairs=drop_incomplete_pairs,
        one_pair_per_row=True,
        limits=limits,
    )
    return result


def _too_many_cells(limits: InputLimits, columns: int, line: int) -> LimitExceeded:
    found = (
        f"row {line:,} takes the set past {limits.values // max(1, columns):,} sentences of "
        f"{columns} columns"
    )
    return too_many_values(limits, found, row=line)


def condition_fields(
    records: list[tuple[int, dict[str, object]]], taken: Iterable[str], limits: InputLimits
) -> list[str]:
    """The fields of `records` that are not in `taken`, in first-seen order: the set's
    condition columns. Refused when the table they make (two sentences a record, a cell
    for each column) would have more cells than `limits.values`."""
    skip = set(taken)
    fields = list(dict.fromkeys(key for _, record in records for key in record if key not in skip))
    cells = 2 * len(records) * (len(fields) + len(RESERVED))
    if cells > limits.values:
        found = (
            f"the records make a table of {2 * len(records):,} sentences by "
            f"{len(fields) + len(RESERVED):,} columns, {cells:,} cells"
        )
        raise MinimalPairFormatError.of(too_many_values(limits, found))
    return fields


def cell_text(value: object) -> str:
    """A field's value (from JSON or a table) as the text a condition cell holds (what
    pandas would write); a value JSON cannot hold is written as its str()."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _build(
    records: Iterable[tuple[int, dict[str, str]]],
    columns: list[str],
    conditions: list[str],
    source_format: str,
    errors: list[PairSetError],
    *,
    drop_incomplete_pairs: bool,
    one_pair_per_row: bool = False,
    limits: InputLimits = DEFAULT_LIMITS,
) -> MinimalPairSet:
    has_pairs = PAIRID in columns
    has_roi = ROI in columns
    sentences: list[PairSentence] = []
    first_row: dict[str, int] = {}
    pair_rows: dict[str, int] = {}
    # The table the set makes, held to `limits.values` cells as it grows.
    most_rows = limits.values // max(1, len(columns))
    for line, record in records:
        if len(sentences) >= most_rows:
            raise MinimalPairFormatError.of(_too_many_cells(limits, len(columns), line))
        sentid = record[SENTID].strip()
        sentence = record[SENTENCE].strip()
        row_errors = error_count(errors)
        _check_fields(record, line, limits, errors)
        _check_sentid(sentid, line, first_row, errors)
        if not sentence:
            errors.append(PairSetError(line, SENTENCE, "the sentence is empty"))
        pairid = comparison = None
        if has_pairs:
            pairid, comparison = _read_pair(record, line, pair_rows, one_pair_per_row, errors)
        roi = None
        if has_roi and record[ROI].strip():
            roi = _parse_roi(record[ROI], sentence, line, errors)
        if error_count(errors) > row_errors:
            continue
        sentences.append(
            PairSentence(
                sentid=sentid,
                sentence=sentence,
                pairid=pairid,
                comparison=comparison,
                roi=roi,
                conditions={name: record[name] for name in conditions},
                row=line,
            )
        )
    dropped: list[str] = []
    if has_pairs and not errors:
        dropped = _incomplete_pairs(sentences, drop_incomplete_pairs, errors)
    if errors:
        raise MinimalPairFormatError(errors)
    return MinimalPairSet(
        sentences=sentences,
        columns=list(columns),
        condition_columns=list(conditions),
        source_format=source_format,
        warnings=_dropped_warnings(dropped),
        dropped_pairs=dropped,
    )


def _dropped_warnings(dropped: list[str]) -> list[str]:
    if not dropped:
        return []
    more = len(dropped) - DROPPED_SHOWN
    return [
        "pairs left out because they lack an expected or an unexpected sentence: "
        + ", ".join(dropped[:DROPPED_SHOWN])
        + (f" and {more:,} more" if more > 0 else "")
    ]


def _check_fields(
    record: dict[str, str], line: int, limits: InputLimits, errors: list[PairSetError]
) -> None:
    """Every cell of a record within `limits.field_chars`."""
    for name, value in record.items():
        if len(value) > limits.field_chars:
            errors.append(PairSetError(line, name, field_too_long(limits, len(value)).message))


def _check_sentid(
    sentid: str, line: int, first_row: dict[str, int], errors: list[PairSetError]
) -> None:
    """A sentid must be there and unique; `first_row` remembers where each was first."""
    if not sentid:
        errors.append(PairSetError(line, SENTID, "the sentid is empty; give every row a unique id"))
    elif sentid in first_row:
        errors.append(
            PairSetError(
                line,
                SENTID,
                f"sentid {sentid!r} is used again (first on row {first_row[sentid]})",
            )
        )
    else:
        first_row[sentid] = line


def _read_pair(
    record: dict[str, str],
    line: int,
    pair_rows: dict[str, int],
    one_pair_per_row: bool,
    errors: list[PairSetError],
) -> tuple[str, str]:
    """(pairid, comparison) of a row, checked; with `one_pair_per_row` (BLiMP) a
    pairID may stand on one line only."""
    pairid = record[PAIRID].strip()
    comparison = record[COMPARISON].strip()
    if not pairid:
        errors.append(PairSetError(line, PAIRID, "the pairid is empty"))
    elif one_pair_per_row and pairid in pair_rows and pair_rows[pairid] != line:
        errors.append(
            PairSetError(
                line,
                "pairID",
                f"pairID {pairid!r} is used again (first on line {pair_rows[pairid]})",
            )
        )
    else:
        pair_rows.setdefault(pairid, line)
    if comparison not in LABELS:
        errors.append(
            PairSetError(
                line,
                COMPARISON,
                f"the comparison is {comparison!r}; it must be `expected` or `unexpected`",
            )
        )
    return pairid, comparison


def _incomplete_pairs(
    sentences: list[PairSentence], drop: bool, errors: list[PairSetError]
) -> list[str]:
    """The pairs that lack an expected or an unexpected sentence: returned to be left
    out when `drop`, an error each otherwise."""
    members: dict[str, list[PairSentence]] = {}
    for sentence in sentences:
        members.setdefault(sentence.pairid or "", []).append(sentence)
    dropped: list[str] = []
    for pairid, group in members.items():
        labels = {s.comparison for s in group}
        if labels == set(LABELS):
            continue
        missing = UNEXPECTED if EXPECTED in labels else EXPECTED
        if drop:
            dropped.append(pairid)
        else:
            errors.append(
                PairSetError(
                    group[0].row,
                    COMPARISON,
                    f"pair {pairid!r} has no `{missing}` sentence; every pair needs at "
                    "least one expected and one unexpected sentence (add it, or ask to "
                    "leave incomplete pairs out)",
                )
            )
    return dropped


def _parse_roi(
    cell: str, sentence: str, line: int, errors: list[PairSetError]
) -> tuple[int, ...] | None:
    positions: dict[int, None] = {}  # in the cell's order, each once
    count = len(split_words(sentence))
    for part in cell.split(","):
        item = part.strip()
        if not item.isdigit():
            errors.append(
                PairSetError(
                    line,
                    ROI,
                    f"{item!r} is not a word position; write zero-based positions separated "
                    "by commas, e.g. 3,4 (leave the cell blank for the whole sentence)",
                )
            )
            return None
        value = int(item)
        if value >= count:
            errors.append(
                PairSetError(
                    line,
                    ROI,
                    f"word position {value} does not exist: the sentence has {count} words "
                    f"(0-{count - 1}, punctuation marks counted as words)",
                )
            )
            return None
        positions[value] = None
    return tuple(positions)


# ---------------------------------------------------------------- writing


def to_tsv_text(pair_set: MinimalPairSet) -> str:
    """The set as an NLPScholar data TSV with its columns in their original order."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n", quotechar='"')
    writer.writerow(pair_set.columns)
    for sentence in pair_set.sentences:
        writer.writerow([cell_value(sentence, column) for column in pair_set.columns])
    return out.getvalue()


def cell_value(sentence: PairSentence, column: str) -> str:
    """The text of one cell of the data TSV."""
    if column == SENTID:
        return sentence.sentid
    if column == SENTENCE:
        return sentence.sentence
    if column == PAIRID:
        return sentence.pairid or ""
    if column == COMPARISON:
        return sentence.comparison or ""
    if column == ROI:
        return ",".join(str(p) for p in sentence.roi) if sentence.roi is not None else ""
    return sentence.conditions.get(column, "")


def content_hash(pair_set: MinimalPairSet) -> str:
    """SHA-256 of the exported TSV: equal content, equal hash, whatever the source format."""
    return hashlib.sha256(to_tsv_text(pair_set).encode("utf-8")).hexdigest()


def load_minimal_pairs_file(
    path: str, *, drop_incomplete_pairs: bool = False, limits: InputLimits = DEFAULT_LIMITS
) -> MinimalPairSet:
    with open(path, "rb") as handle:
        data = handle.read()
    return parse_minimal_pairs(
        data, filename=str(path), drop_incomplete_pairs=drop_incomplete_pairs, limits=limits
    )
