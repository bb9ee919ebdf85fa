"""Suites as CSV, one row per (item, condition, region): export for spreadsheets, import
for the grid editor. A CSV holds no meta and no predictions; the caller supplies them."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from typing import Any

from suites.formats.limits import (
    DEFAULT_LIMITS,
    InputLimits,
    LimitExceeded,
    LineFeed,
    too_many_values,
)
from suites.formats.report import (
    MAX_ERRORS,
    FormatResult,
    SuiteError,
    failed,
    first_gaps,
    listed,
    more_gaps,
)
from suites.formats.syntaxgym import parse_suite_data

CSV_FORMAT = "csv"
CSV_HEADER = ("item_number", "condition_name", "region_number", "region_name", "content")

# Whole numbers as Python reads them at any size (an item number past the database's
# range is refused as a suite's is); past a few thousand digits int() would refuse.
_WHOLE_NUMBER = re.compile(r"^[+-]?\d{1,100}$")


def to_csv_text(suite: dict[str, Any]) -> str:
    """Header plus one row per (item, condition, region) in canonical order; RFC 4180
    quoting and CRLF line ends, so that spreadsheets read contents with commas, quotes and
    line breaks intact."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_HEADER)
    names = suite["region_meta"]
    for item in suite["items"]:
        for condition in item["conditions"]:
            for region in sorted(condition["regions"], key=lambda r: r["region_number"]):
                writer.writerow(
                    [
                        item["item_number"],
                        condition["condition_name"],
                        region["region_number"],
                        names.get(str(region["region_number"]), ""),
                        region["content"],
                    ]
                )
    return out.getvalue()


@dataclass
class _Lines:
    """Where each part of the suite built from a CSV came from, to point errors at rows."""

    items: dict[int, int] = field(default_factory=dict)
    conditions: dict[tuple[int, int], int] = field(default_factory=dict)
    regions: dict[tuple[int, int, int], int] = field(default_factory=dict)
    region_numbers: dict[int, int] = field(default_factory=dict)


def parse_suite_csv(
    text: str | bytes,
    *,
    meta: dict[str, Any],
    predictions: list[Any] | None = None,
    limits: InputLimits = DEFAULT_LIMITS,
) -> FormatResult:
    """Build a suite from CSV rows (the columns of CSV_HEADER, in any order) plus `meta` and
    `predictions` (any form parse_suite_data accepts), then check it like a JSON upload.
    Errors point at CSV rows: `csv line 7, column content`. Rows, lines, fields and the
    values the rows make are held to `limits` while they are read."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = exc.object[: exc.start].count(b"\n") + 1
            problem = SuiteError.at_row(line, None, "the CSV is not UTF-8 text; save it as UTF-8")
            return failed([problem], source_format=CSV_FORMAT)
    table, problems = _read_table(text.removeprefix("\ufeff"), limits)
    if problems or table is None:
        return failed(problems, source_format=CSV_FORMAT)
    table.check_region_numbers()
    if table.errors:
        return failed(table.errors, source_format=CSV_FORMAT, unlisted=table.unlisted)
    return _check_as_suite(table, meta=meta, predictions=predictions, limits=limits)


def _read_table(text: str, limits: InputLimits) -> tuple[_Table | None, list[SuiteError]]:
    """The CSV's rows gathered into a table as they are read (each with the line it starts
    on: a quoted field may span lines), or what keeps the file from being one: no
    header, a bad header, no rows, a line the csv module cannot read, a limit met."""
    feed = LineFeed(text, limits)
    reader = csv.reader(feed, strict=True)
    header: list[str] | None = None
    problems: list[SuiteError] = []
    table: _Table | None = None
    last = rows = 0
    try:
        for row in reader:
            feed.record(row, header)
            start, last = last + 1, reader.line_num
            if not any(value.strip() for value in row):
                continue
            if header is None:
                header = [name.strip().lower() for name in row]
                problems = _header_errors(header, start)
                table = None if problems else _Table(header, limits, start)
            elif table is not None:
                rows += 1
                table.add_row(start, row)
    except LimitExceeded as exc:
        return None, [SuiteError.at_row(exc.row, exc.column, exc.message)]
    except csv.Error as exc:
        return None, [
            SuiteError.at_row(
                reader.line_num,
                None,
                f"the CSV cannot be read here ({exc}); a field with a double quote in it must "
                'be quoted, with each " inside written twice ("")',
            )
        ]
    if header is None:
        return None, [
            SuiteError.at_row(
                1,
                None,
                "the CSV is empty; it needs a header row (" + ",".join(CSV_HEADER) + ") and one "
                "row per item, condition and region",
            )
        ]
    if table is not None and not rows:
        problems = [
            SuiteError.at_row(
                table.header_line + 1,
                None,
                "the CSV has a header but no rows; add one row per item, condition and region",
            )
        ]
    return table, problems


def _check_as_suite(
    table: _Table, *, meta: dict[str, Any], predictions: list[Any] | None, limits: InputLimits
) -> FormatResult:
    """The gathered rows plus meta and predictions, checked like a JSON upload; errors
    pointed back at the rows they came from."""
    data = {
        "meta": dict(meta),
        "region_meta": {str(n): table.region_meta[n][0] for n in sorted(table.region_meta)},
        "predictions": list(predictions) if predictions is not None else [],
        "items": table.items,
    }
    result = parse_suite_data(data, limits)
    result.errors = [_row_error(e, table.lines) for e in result.errors]
    ignored = [name for name in table.columns if name not in CSV_HEADER]
    result.warnings = [
        f"ignored the CSV column {name!r}: Gym reads only {', '.join(CSV_HEADER)}"
        for name in ignored
    ] + result.warnings
    result.source_format = CSV_FORMAT
    return result


def _header_errors(columns: list[str], line: int) -> list[SuiteError]:
    """Each of CSV_HEADER's columns must be there, once."""
    errors: list[SuiteError] = []
    for name in CSV_HEADER:
        if name not in columns:
            errors.append(
                SuiteError.at_row(
                    line,
                    None,
                    f"the header row has no {name!r} column; the CSV needs the columns "
                    f"{', '.join(CSV_HEADER)} (in any order)",
                )
            )
        elif columns.count(name) > 1:
            errors.append(
                SuiteError.at_row(line, None, f"the header row has {name!r} twice; keep one")
            )
    return errors


class _Table:
    """The rows of a CSV gathered into items, conditions and regions, in the order they
    first appear, with the row each came from; errors collected on the way."""

    def __init__(self, columns: list[str], limits: InputLimits, header_line: int) -> None:
        self.columns = columns
        self.limits = limits
        self.header_line = header_line
        # The JSON values the suite built from the rows will hold, held to limits.values:
        # CSV rows are ten times denser than the JSON they become.
        self.values = 0
        self.index = {name: columns.index(name) for name in CSV_HEADER}
        self.items: list[dict[str, Any]] = []
        self.item_index: dict[int, int] = {}
        self.condition_index: dict[tuple[int, str], int] = {}
        # Region number -> (name, the line that first named it).
        self.region_meta: dict[int, tuple[str, int]] = {}
        self.lines = _Lines()
        self.errors: list[SuiteError] = []
        self.unlisted = 0  # errors past MAX_ERRORS, counted only

    def error(self, error: SuiteError) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(error)
        else:
            self.unlisted += 1

    def add_row(self, line: int, row: list[str]) -> None:
        if len(row) != len(self.columns):
            self.error(
                SuiteError.at_row(
                    line,
                    None,
                    f"this row has {len(row)} fields but the header has {len(self.columns)}; "
                    "put any field that holds a comma, a double quote or a line break in "
                    "double quotes",
                )
            )
            return
        values = {name: row[self.index[name]] for name in CSV_HEADER}
        item_number = self._item_number(line, values["item_number"])
        region_number = self._region_number(line, values["region_number"])
        if region_number is not None:
            self._name_region(line, region_number, values["region_name"])
        if item_number is not None and region_number is not None:
            self._place(line, item_number, values["condition_name"], region_number, values)

    def _item_number(self, line: int, text: str) -> int | None:
        number = _whole_number(text)
        if number is None:
            self.error(
                SuiteError.at_row(
                    line,
                    "item_number",
                    f"item_number must be a whole number, not {text!r}",
                )
            )
        return number

    def _region_number(self, line: int, text: str) -> int | None:
        number = _whole_number(text)
        if number is None or number < 1:
            self.error(
                SuiteError.at_row(
                    line,
                    "region_number",
                    f"region_number must be a whole number from 1 up, not {text!r}",
                )
            )
            return None
        return number

    def _name_region(self, line: int, number: int, name: str) -> None:
        """A region has one name: the first row that mentions it sets it."""
        if number not in self.region_meta:
            self.region_meta[number] = (name, line)
            self.lines.region_numbers[number] = line
        elif self.region_meta[number][0] != name:
            first_name, first_line = self.region_meta[number]
            self.error(
                SuiteError.at_row(
                    line,
                    "region_name",
                    f"region {number} is called {first_name!r} on line {first_line} "
                    f"but {name!r} here; a region has the same name in every row",
                )
            )

    def _place(
        self, line: int, item_number: int, name: str, region_number: int, values: dict[str, str]
    ) -> None:
        """Append the row's region to its item and condition, creating them on first use."""
        self._count(line, 3)  # the region: an object, its number, its content
        i = self.item_index.get(item_number)
        if i is None:
            self._count(line, 3)  # the item: an object, its number, its conditions
            i = self.item_index[item_number] = len(self.items)
            self.items.append({"item_number": item_number, "conditions": []})
            self.lines.items[i] = line
        conditions = self.items[i]["conditions"]
        j = self.condition_index.get((item_number, name))
        if j is None:
            self._count(line, 3)  # the condition: an object, its name, its regions
            j = self.condition_index[(item_number, name)] = len(conditions)
            conditions.append({"condition_name": name, "regions": []})
            self.lines.conditions[(i, j)] = line
        regions = conditions[j]["regions"]
        self.lines.regions[(i, j, len(regions))] = line
        regions.append({"region_number": region_number, "content": values["content"]})

    def _count(self, line: int, values: int) -> None:
        self.values += values
        if self.values > self.limits.values:
            found = f"line {line:,} takes the suite past {self.limits.values:,} JSON values"
            raise too_many_values(self.limits, found, row=line)

    def check_region_numbers(self) -> None:
        """Region numbers run from 1 without gaps (checked only on otherwise clean rows)."""
        numbers = sorted(self.region_meta)
        if self.errors or not numbers or numbers[-1] == len(numbers):
            return
        gaps = first_gaps(numbers)
        self.errors.append(
            SuiteError.at_row(
                None,
                "region_number",
                f"the rows number their regions {listed(numbers)}, but region numbers must "
                f"run from 1 without gaps: no row has region {', '.join(map(str, gaps))}"
                f"{more_gaps(numbers, gaps)}; add rows for it or renumber the regions",
            )
        )


def _whole_number(text: str) -> int | None:
    text = text.strip()
    return int(text) if _WHOLE_NUMBER.match(text) else None


def _row_error(error: SuiteError, lines: _Lines) -> SuiteError:
    """The error moved from the JSON built from the rows to the CSV row (and column) it
    came from; left as it is when no row made that part of the suite."""
    at = error.location
    column = at.key if at.key in CSV_HEADER else None
    if at.section == "items" and at.item is not None:
        if at.condition is not None and at.region is not None:
            line = lines.regions.get((at.item, at.condition, at.region))
        elif at.condition is not None:
            line = lines.conditions.get((at.item, at.condition))
        else:
            line = lines.items.get(at.item)
        return error if line is None else SuiteError.at_row(line, column, error.message)
    if at.section == "region_meta":
        line = lines.region_numbers.get(at.region_number) if at.region_number else None
        return SuiteError.at_row(line, "region_number", error.message)
    return error
