"""What reading a suite gives back: the canonical suite, or every error found, plus notes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# A broken upload can produce thousands of errors (one per item); a page or an API reply
# that lists them all helps nobody, and the first few usually share one cause.
MAX_ERRORS = 200


@dataclass(frozen=True)
class SuiteError:
    """One problem with a suite. `path` says where (a JSON path such as
    `$.items[3].conditions[1].regions[0].content`, or `csv line 7, column content`);
    `message` says what is wrong and how to fix it, in plain English."""

    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}

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


def cap_errors(errors: Iterable[SuiteError], limit: int = MAX_ERRORS) -> list[SuiteError]:
    """The first `limit` errors, plus one line that counts the rest."""
    errors = list(errors)
    if len(errors) <= limit:
        return errors
    rest = len(errors) - limit
    return [
        *errors[:limit],
        SuiteError(
            "$",
            f"… and {rest} more error{'s' if rest != 1 else ''} not shown; fix the ones above first",
        ),
    ]


def failed(errors: list[SuiteError], *, source_format: str = "") -> FormatResult:
    return FormatResult(suite=None, errors=cap_errors(errors), source_format=source_format)
