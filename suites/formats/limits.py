"""What one uploaded file may hold, counted while it is read.

An upload's bytes are capped before any reader sees them (GYM_MAX_UPLOAD_BYTES), but what
a reader builds from them is not: 20 MB of tiny rows, of `{}`, or a Parquet column
that unpacks to gigabytes would each take a web worker's memory. Every reader of user
files (suites, minimal-pair sets, probing tasks, predictions) takes an `InputLimits`
and stops at the first limit reached, before building more, with a `LimitExceeded`
that names the limit and the setting that raises it.

Pure Python, no Django: the services build `InputLimits` from the settings
(`suites.catalog_services.upload_limits`); a command line without settings uses the
defaults here, which are the settings' defaults.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, AnyStr

MB = 1024 * 1024


@dataclass(frozen=True)
class InputLimits:
    """The most one upload may hold. See SETTINGS for the setting of each."""

    rows: int = 500_000  # lines of a text file, rows of a table, records of a data set
    line_chars: int = 1_000_000  # one line (one row of a table, quoted line breaks and all)
    field_chars: int = 100_000  # one field: a sentence, a cell, a text in JSON
    values: int = 3_000_000  # JSON values (objects, lists, texts, numbers), or table cells
    json_depth: int = 64  # JSON objects and lists inside one another
    unpacked_bytes: int = 128 * MB  # what a Parquet file holds once unpacked
    parquet_meta_bytes: int = 1 * MB  # a Parquet file's description of itself (its footer)


# The setting behind each limit (gym/settings.py), named in every refusal.
SETTINGS = {
    "rows": "GYM_UPLOAD_MAX_ROWS",
    "line_chars": "GYM_UPLOAD_MAX_LINE_CHARS",
    "field_chars": "GYM_UPLOAD_MAX_FIELD_CHARS",
    "values": "GYM_UPLOAD_MAX_VALUES",
    "json_depth": "GYM_UPLOAD_MAX_JSON_DEPTH",
    "unpacked_bytes": "GYM_UPLOAD_MAX_UNPACKED_BYTES",
    "parquet_meta_bytes": "GYM_UPLOAD_MAX_PARQUET_META_BYTES",
}
DEFAULT_LIMITS = InputLimits()
# For files a person chose on their own machine (the command line's): no limit but memory.
_NONE = 2**62
UNLIMITED = InputLimits(_NONE, _NONE, _NONE, _NONE, _NONE, _NONE, _NONE)


class LimitExceeded(ValueError):
    """A file holds more than a limit allows. `row` (a line number) and `column` (a name,
    or `#n` for the n-th field) say where, when they apply; `limit` is the field of
    InputLimits, `setting` its setting."""

    def __init__(
        self, limit: str, message: str, *, row: int | None = None, column: str | None = None
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.setting = SETTINGS[limit]
        self.message = message
        self.row = row
        self.column = column


def exceeded(
    limits: InputLimits,
    limit: str,
    found: str,
    advice: str,
    *,
    row: int | None = None,
    column: str | None = None,
) -> LimitExceeded:
    """The refusal for `limit`: what was found, the limit and its setting, what to do."""
    most = getattr(limits, limit)
    message = (
        f"{found}; Gym reads at most {most:,} {_UNITS[limit]} (the site's setting "
        f"{SETTINGS[limit]}): {advice}"
    )
    return LimitExceeded(limit, message, row=row, column=column)


_UNITS = {
    "rows": "lines (rows, records) of one upload",
    "line_chars": "characters on one line",
    "field_chars": "characters in one field",
    "values": "values in one upload (JSON objects, lists, texts and numbers, or the cells "
    "of the table a data set makes)",
    "json_depth": "levels of JSON objects and lists inside one another",
    "unpacked_bytes": "bytes of a Parquet file once unpacked",
    "parquet_meta_bytes": "bytes of a Parquet file's metadata (its schema and the places of "
    "its columns)",
}
SPLIT = "split the file into smaller ones"


def too_many_rows(limits: InputLimits, row: int) -> LimitExceeded:
    return exceeded(limits, "rows", f"the file has more than {limits.rows:,} lines", SPLIT, row=row)


def field_too_long(
    limits: InputLimits, length: int, *, row: int | None = None, column: str | None = None
) -> LimitExceeded:
    return exceeded(
        limits,
        "field_chars",
        f"this field is {length:,} characters long",
        "a sentence or a cell this long is not one; check the file's quotes and separators",
        row=row,
        column=column,
    )


# Where lines end: what io.StringIO(newline="") hands a csv reader (\r\n, \r, \n), what
# str.splitlines() splits at, and a byte file's lines (\n only, as iterating it gives).
CSV_ENDS = re.compile(r"\r\n|\r|\n")
TEXT_ENDS = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
BYTE_ENDS = re.compile(rb"\n")


def pieces(
    text: AnyStr, limits: InputLimits, ends: re.Pattern[AnyStr], *, first: int = 1
) -> Iterator[tuple[int, AnyStr]]:
    """(line number, line with its end) of `text`, each line held to `limits.line_chars`
    and the number of lines to `limits.rows`, checked before the line is copied out."""
    position, size, number = 0, len(text), first - 1
    while position < size:
        number += 1
        if number - first + 1 > limits.rows:
            raise too_many_rows(limits, number)
        # A line end further than the limit is not looked for.
        window = position + limits.line_chars + 2
        found = ends.search(text, position, window)
        stop = found.start() if found else min(size, window)
        if stop - position > limits.line_chars:
            raise line_too_long(limits, number)
        end = found.end() if found else size
        yield number, text[position:end]
        position = end


def line_too_long(limits: InputLimits, row: int) -> LimitExceeded:
    return exceeded(
        limits,
        "line_chars",
        f"line {row:,} is longer than {limits.line_chars:,} characters",
        "check that the file has its line breaks (a file saved with old Mac line ends, or "
        "one JSON document on one line, has one very long line)",
        row=row,
    )


def text_lines(text: str, limits: InputLimits) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) as `enumerate(text.splitlines(), 1)` gives,
    held to the limits."""
    for number, line in pieces(text, limits, TEXT_ENDS):
        yield number, line.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def file_lines(handle: IO[bytes], limits: InputLimits) -> Iterator[bytes]:
    """The lines of a binary file as iterating it gives them, held to the limits: no line
    is read further than the limit."""
    number = 0
    while True:
        line = handle.readline(limits.line_chars + 2)
        if not line:
            return
        number += 1
        if number > limits.rows:
            raise too_many_rows(limits, number)
        if len(line.rstrip(b"\r\n")) > limits.line_chars:
            raise line_too_long(limits, number)
        yield line


class LineFeed:
    """A text's lines for a csv reader, held to the limits as the reader takes them: no
    more than `rows` lines, no line and no record (a quoted field may span lines) longer
    than `line_chars`. After each record the caller hands its fields to `record`, which
    checks each field's length."""

    def __init__(self, text: str, limits: InputLimits) -> None:
        self.limits = limits
        self._lines = pieces(text, limits, CSV_ENDS)
        self._record_chars = 0
        self._line = 0
        # The csv module's own limit on a field would speak first, in its words; ours does.
        if csv.field_size_limit() < limits.line_chars + 2:
            csv.field_size_limit(limits.line_chars + 2)

    def __iter__(self) -> Iterator[str]:
        for number, line in self._lines:
            self._line = number
            self._record_chars += len(line)
            if self._record_chars > self.limits.line_chars + 2:
                raise line_too_long(self.limits, number)
            yield line

    def record(self, fields: list[str], columns: list[str] | None = None) -> None:
        """One record read: the next starts afresh; a field over the limit is refused
        (named by `columns`, the header, where given)."""
        self._record_chars = 0
        for index, value in enumerate(fields):
            if len(value) > self.limits.field_chars:
                name = columns[index] if columns and index < len(columns) else f"#{index + 1}"
                raise field_too_long(self.limits, len(value), row=self._line, column=name)


def check_field(
    value: str, limits: InputLimits, *, row: int | None = None, column: str | None = None
) -> None:
    if len(value) > limits.field_chars:
        raise field_too_long(limits, len(value), row=row, column=column)


def json_census(text: str, limits: InputLimits) -> None:
    """Refuse JSON text with more values than `limits.values`, before it is decoded.
    Every value but the first of each list or object follows a comma, so commas plus
    brackets plus one bounds the values from above; only when that bound is over the
    limit are the values counted exactly (commas and brackets inside texts left out)."""
    bound = text.count(",") + text.count("[") + text.count("{") + 1
    if bound <= limits.values or _exact_values(text) <= limits.values:
        return
    raise too_many_values(limits, f"the file holds more than {limits.values:,} JSON values")


def too_many_values(limits: InputLimits, found: str, row: int | None = None) -> LimitExceeded:
    return exceeded(limits, "values", found, SPLIT, row=row)


def count_values(value: object, budget: int) -> int:
    """The JSON values in `value` (itself, and all it holds), counted up to `budget + 1`."""
    count = 0
    stack = [value]
    while stack and count <= budget:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _exact_values(text: str) -> int:
    """Commas and opening brackets outside JSON texts, plus one (the census's bound),
    counted between one text and the next by str.count."""
    count, position = 1, 0
    while True:
        quote = text.find('"', position)
        end = len(text) if quote < 0 else quote
        for char in ",[{":
            count += text.count(char, position, end)
        if quote < 0:
            return count
        position = _string_end(text, quote + 1)


def _string_end(text: str, position: int) -> int:
    """Where the JSON text that opened before `position` ends (past its closing quote)."""
    while True:
        quote = text.find('"', position)
        if quote < 0:
            return len(text)
        backslashes = 0
        while text[quote - 1 - backslashes] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return quote + 1
        position = quote + 1
