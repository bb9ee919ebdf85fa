"""What reading a suite gives back: the canonical suite, or every error found, plus notes."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# A broken upload can produce thousands of errors (one per item); a page or an API reply
# that lists them all helps nobody, and the first few usually share one cause.
MAX_ERRORS = 200


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def json_path(parts: Iterable[str | int]) -> str:
    """`$.items[3].conditions[1]` style; keys that are not identifiers go in brackets."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


@dataclass(frozen=True)
class Location:
    """Where an error is, as numbers and names a program can use: the grid editor marks
    the cell, the table importer finds the CSV row. Indices count from 0 in the suite's
    lists; `region_number` is a key of region_meta. A CSV error has `line` and `column`.
    Unset fields are None; an error about the whole suite has none set."""

    section: str | None = None  # meta, region_meta, predictions or items
    item: int | None = None
    condition: int | None = None
    region: int | None = None
    region_number: int | None = None
    prediction: int | None = None
    # The key named right after the deepest index: "content", "condition_name", a meta key.
    key: str | None = None
    line: int | None = None
    column: str | None = None

    @classmethod
    def of(cls, parts: Sequence[str | int]) -> Location:
        """The location of a JSON path given as its parts, such as
        ("items", 3, "conditions", 1, "regions", 0, "content")."""
        if not parts or not isinstance(parts[0], str):
            return cls()
        section, rest = parts[0], list(parts[1:])
        found: dict[str, Any] = {"section": section}
        if section == "items" and rest and isinstance(rest[0], int):
            found["item"] = rest.pop(0)
            # items[i].conditions[j].regions[k]: each index only under the one before.
            for name, key in (("condition", "conditions"), ("region", "regions")):
                if len(rest) < 2 or rest[0] != key or not isinstance(rest[1], int):
                    break
                found[name] = rest[1]
                del rest[:2]
        elif section == "predictions" and rest and isinstance(rest[0], int):
            found["prediction"] = rest.pop(0)
        elif section == "region_meta" and rest:
            number = rest.pop(0)
            # A key of thousands of digits is no region number (and int() would refuse it).
            if isinstance(number, str) and number.isdigit() and len(number) <= 18:
                found["region_number"] = int(number)
        if rest and isinstance(rest[0], str):
            found["key"] = rest[0]
        return cls(**found)

    def as_dict(self) -> dict[str, str | int]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True)
class SuiteError:
    """One problem with a suite. `path` says where for people (a JSON path such as
    `$.items[3].conditions[1].regions[0].content`, or `csv line 7, column content`);
    `location` says the same for programs; `message` says what is wrong and how to fix it,
    in plain English."""

    path: str
    message: str
    location: Location = field(default_factory=Location)

    @classmethod
    def at(cls, parts: Sequence[str | int], message: str) -> SuiteError:
        """An error at a JSON path given as its parts."""
        return cls(json_path(parts), message, Location.of(parts))

    @classmethod
    def at_row(cls, line: int | None, column: str | None, message: str) -> SuiteError:
        """An error at a CSV line, a column, or both."""
        where = [f"line {line}"] * (line is not None) + [f"column {column}"] * (column is not None)
        return cls("csv " + ", ".join(where), message, Location(line=line, column=column))

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "message": self.message, "location": self.location.as_dict()}

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class FormatResult:
    """The outcome of reading one suite.

    `suite` is the canonical dict (current SyntaxGym format), or None when there are errors.
    `source_format` names the version the input was written in; `original_predictions`
    holds each prediction's text as uploaded (2019 relation objects as JSON), in order.
    """

    suite: dict[str, Any] | None
    errors: list[SuiteError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    source_format: str = ""
    original_predictions: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


# How many numbers a message lists before it says how many there are in all.
NUMBERS_SHOWN = 20
GAPS_SHOWN = 10


def listed(numbers: Sequence[int], shown: int = NUMBERS_SHOWN) -> str:
    """'1, 2, 5', or the first `shown` and how many there are in all."""
    text = ", ".join(map(str, numbers[:shown]))
    return text if len(numbers) <= shown else f"{text}, … ({len(numbers):,} in all)"


def first_gaps(numbers: Sequence[int], shown: int = GAPS_SHOWN) -> list[int]:
    """The first `shown` whole numbers from 1 up that `numbers` (sorted, distinct, from
    1 up) lack, found without listing the range: a number such as 10**12 would make
    that list larger than any machine."""
    gaps: list[int] = []
    expected = 1
    for number in numbers:
        while expected < number and len(gaps) < shown:
            gaps.append(expected)
            expected += 1
        if len(gaps) >= shown:
            break
        expected = number + 1
    return gaps


def more_gaps(numbers: Sequence[int], gaps: Sequence[int]) -> str:
    """' (and 12 more)' when `numbers` lack more than `gaps` lists, else ''."""
    rest = numbers[-1] - len(numbers) - len(gaps) if numbers else 0
    return f" (and {rest:,} more)" if rest > 0 else ""


# The last error of a list whose reader stopped looking (what follows was not read).
MORE_NOT_READ = "… and more errors not shown (Gym stopped looking); fix the ones above first"


def cap_errors(
    errors: Iterable[SuiteError], limit: int = MAX_ERRORS, *, unlisted: int = 0
) -> list[SuiteError]:
    """The first `limit` errors, plus one line that counts the rest (`unlisted`: errors
    counted but never kept)."""
    errors = list(errors)
    if errors and errors[-1].message == MORE_NOT_READ:
        return [*errors[: min(limit, len(errors) - 1)], errors[-1]]
    if len(errors) + unlisted <= limit:
        return errors
    rest = len(errors) + unlisted - limit
    return [
        *errors[:limit],
        SuiteError(
            "$",
            f"… and {rest} more error{'s' if rest != 1 else ''} not shown; fix the ones above first",
        ),
    ]


def failed(errors: list[SuiteError], *, source_format: str = "", unlisted: int = 0) -> FormatResult:
    return FormatResult(
        suite=None, errors=cap_errors(errors, unlisted=unlisted), source_format=source_format
    )
