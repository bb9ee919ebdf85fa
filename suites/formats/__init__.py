"""SyntaxGym test suites in every version found in the wild <-> one canonical form.

The canonical form is a plain dict in the current SyntaxGym format (see canonical.py).
Pure Python, no database and no settings (of Django only `slugify`, so that tags read here
are the ones the site stores): the scoring worker and management commands use it too.
"""

from __future__ import annotations

from suites.formats.canonical import (
    condition_names,
    content_hash,
    region_names,
    sentences,
    to_json_text,
)
from suites.formats.report import MAX_ERRORS, FormatResult, Location, SuiteError
from suites.formats.schema import SCHEMA_PATH, load_schema
from suites.formats.syntaxgym import (
    BRACKET_FORMULAS,
    CURRENT,
    NO_PREDICTIONS,
    RELATIONS_2019,
    RESULTS,
    SOURCE_FORMATS,
    STRING_PREDICTIONS,
    detect_source_format,
    load_suite_file,
    parse_suite_data,
    parse_suite_text,
)
from suites.formats.tables import CSV_FORMAT, CSV_HEADER, parse_suite_csv, to_csv_text

__all__ = [
    "BRACKET_FORMULAS",
    "CSV_FORMAT",
    "CSV_HEADER",
    "CURRENT",
    "MAX_ERRORS",
    "NO_PREDICTIONS",
    "RELATIONS_2019",
    "RESULTS",
    "SCHEMA_PATH",
    "SOURCE_FORMATS",
    "STRING_PREDICTIONS",
    "FormatResult",
    "Location",
    "SuiteError",
    "condition_names",
    "content_hash",
    "detect_source_format",
    "load_schema",
    "load_suite_file",
    "parse_suite_csv",
    "parse_suite_data",
    "parse_suite_text",
    "region_names",
    "sentences",
    "to_csv_text",
    "to_json_text",
]
