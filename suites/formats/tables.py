"""Suites as CSV, one row per (item, condition, region): export for spreadsheets, import
for the grid editor. A CSV holds no meta and no predictions; the caller supplies them."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from typing import Any

from suites.formats.report import FormatResult, SuiteError, failed
from suites.formats.syntaxgym import parse_suite_data

CSV_FORMAT = "csv"
CSV_HEADER = ("item_number", "condition_name", "region_number", "region_name", "content")

_ITEM_PATH = re.compile(
    r"^\$\.items\[(\d+)\](?:\.conditions\[(\d+)\](?:\.regions\[(\d+)\])?)?(?:\.(\w+))?"
)
_REGION_META_PATH = re.compile(r'^\$\.region_meta(?:\["(\d+)"\])?')
_WHOLE_NUMBER = re.compile(r"^[+-]?\d+$")


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
) -> FormatResult:
    """Build a suite from CSV rows (the columns of CSV_HEADER, in any order) plus `meta` and
    `predictions` (any form parse_suite_data accepts), then check it like a JSON upload.
    Errors point at CSV rows: `csv line 7, column content`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = exc.object[: exc.start].count(b"\n") + 1
            return _failed(f"csv line {line}", "the CSV is not UTF-8 text; save it as UTF-8")
    rows, problem = _read_rows(text.removeprefix("\ufeff"))
    if problem is not None:
        return failed([problem], source_format=CSV_FORMAT)
    if not rows:
        return _failed(
            "csv line 1",
            "the CSV is empty; it needs a header row (" + ",".join(CSV_HEADER) + ") and one row "
            "per item, condition and region",
        )
    header_line, header = rows[0]
    columns = [name.strip().lower() for name in header]
    errors: list[SuiteError] = []
    warnings: list[str] = []
    for name in CSV_HEADER:
        if name not in columns:
            errors.append(
                SuiteError(
                    f"csv line {header_line}",
                    f"the header row has no {name!r} column; the CSV needs the columns "
                    f"{', '.join(CSV_HEADER)} (in any order)",
                )
            )
        elif columns.count(name) > 1:
            errors.append(
                SuiteError(
                    f"csv line {header_line}", f"the header row has {name!r} twice; keep one"
                )
            )
    if errors:
        return failed(errors, source_format=CSV_FORMAT)
    for name in columns:
        if name not in CSV_HEADER:
            warnings.append(
                f"ignored the CSV column {name!r}: Gym reads only {', '.join(CSV_HEADER)}"
            )
    if len(rows) == 1:
        return _failed(
            f"csv line {header_line + 1}",
            "the CSV has a header but no rows; add one row per item, condition and region",
        )
    index = {name: columns.index(name) for name in CSV_HEADER}

    items: list[dict[str, Any]] = []
    item_index: dict[int, int] = {}
    condition_index: dict[tuple[int, str], int] = {}
    region_meta: dict[int, tuple[str, int]] = {}
    lines = _Lines()
    for line, row in rows[1:]:
        if len(row) != len(columns):
            errors.append(
                SuiteError(
                    f"csv line {line}",
                    f"this row has {len(row)} fields but the header has {len(columns)}; put any "
                    "field that holds a comma, a double quote or a line break in double quotes",
                )
            )
            continue
        values = {name: row[index[name]] for name in CSV_HEADER}
        item_number = _whole_number(values["item_number"])
        region_number = _whole_number(values["region_number"])
        if item_number is None:
            errors.append(
                SuiteError(
                    f"csv line {line}, column item_number",
                    f"item_number must be a whole number, not {values['item_number']!r}",
                )
            )
        if region_number is None or region_number < 1:
            errors.append(
                SuiteError(
                    f"csv line {line}, column region_number",
                    f"region_number must be a whole number from 1 up, not {values['region_number']!r}",
                )
            )
            region_number = None
        if region_number is not None:
            region_name = values["region_name"]
            if region_number not in region_meta:
                region_meta[region_number] = (region_name, line)
                lines.region_numbers[region_number] = line
            elif region_meta[region_number][0] != region_name:
                first_name, first_line = region_meta[region_number]
                errors.append(
                    SuiteError(
                        f"csv line {line}, column region_name",
                        f"region {region_number} is called {first_name!r} on line {first_line} "
                        f"but {region_name!r} here; a region has the same name in every row",
                    )
                )
        if item_number is None or region_number is None:
            continue
        i = item_index.get(item_number)
        if i is None:
            i = item_index[item_number] = len(items)
            items.append({"item_number": item_number, "conditions": []})
            lines.items[i] = line
        name = values["condition_name"]
        j = condition_index.get((item_number, name))
        if j is None:
            j = condition_index[(item_number, name)] = len(items[i]["conditions"])
            items[i]["conditions"].append({"condition_name": name, "regions": []})
            lines.conditions[(i, j)] = line
        regions = items[i]["conditions"][j]["regions"]
        lines.regions[(i, j, len(regions))] = line
        regions.append({"region_number": region_number, "content": values["content"]})
    numbers = sorted(region_meta)
    if not errors and numbers != list(range(1, len(numbers) + 1)):
        gaps = [n for n in range(1, numbers[-1] + 1) if n not in region_meta]
        errors.append(
            SuiteError(
                "csv column region_number",
                f"the rows number their regions {', '.join(map(str, numbers))}, but region "
                f"numbers must run from 1 without gaps: no row has region "
                f"{', '.join(map(str, gaps))}; add rows for it or renumber the regions",
            )
        )
    if errors:
        return failed(errors, source_format=CSV_FORMAT)

    data = {
        "meta": dict(meta),
        "region_meta": {str(n): region_meta[n][0] for n in sorted(region_meta)},
        "predictions": list(predictions) if predictions is not None else [],
        "items": items,
    }
    result = parse_suite_data(data)
    result.errors = [SuiteError(_csv_path(e.path, lines), e.message) for e in result.errors]
    result.warnings = warnings + result.warnings
    result.source_format = CSV_FORMAT
    return result


def _read_rows(text: str) -> tuple[list[tuple[int, list[str]]], SuiteError | None]:
    """Non-blank rows, each with the line it starts on (a quoted field may span lines)."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[int, list[str]]] = []
    last = 0
    try:
        for row in reader:
            start, last = last + 1, reader.line_num
            if any(value.strip() for value in row):
                rows.append((start, row))
    except csv.Error as exc:
        return rows, SuiteError(
            f"csv line {reader.line_num}",
            f"the CSV cannot be read here ({exc}); a field with a double quote in it must be "
            'quoted, with each " inside written twice ("")',
        )
    return rows, None


def _whole_number(text: str) -> int | None:
    text = text.strip()
    return int(text) if _WHOLE_NUMBER.match(text) else None


def _csv_path(path: str, lines: _Lines) -> str:
    """Turn a JSON path into the CSV row (and column) it came from."""
    match = _ITEM_PATH.match(path)
    if match:
        i, j, k, key = (int(g) if g and g.isdigit() else g for g in match.groups())
        if k is not None:
            line = lines.regions.get((i, j, k))
        elif j is not None:
            line = lines.conditions.get((i, j))
        else:
            line = lines.items.get(i)
        if line is None:
            return path
        return f"csv line {line}, column {key}" if key in CSV_HEADER else f"csv line {line}"
    match = _REGION_META_PATH.match(path)
    if match:
        number = match.group(1)
        line = lines.region_numbers.get(int(number)) if number else None
        if line is None:
            return "csv column region_number"
        return f"csv line {line}, column region_number"
    return path


def _failed(path: str, message: str) -> FormatResult:
    return failed([SuiteError(path, message)], source_format=CSV_FORMAT)
