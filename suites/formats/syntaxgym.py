"""Reading SyntaxGym JSON suites, in every version found in the wild, into the canonical form.

Two passes: the JSON Schema checks types (all errors at once); if the types are right,
code checks what a schema cannot (contiguous regions, the same conditions in every item,
formulas that parse and name real regions and conditions) and builds the canonical dict.
The second pass is skipped when the first fails, because its checks would only repeat
the type errors in more confusing words.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from django.utils.text import slugify

from suites.formats import predictions
from suites.formats.canonical import DEFAULT_METRIC, META_KNOWN_KEYS, META_TEXT_KEYS
from suites.formats.limits import (
    DEFAULT_LIMITS,
    InputLimits,
    LimitExceeded,
    exceeded,
    field_too_long,
    json_census,
)
from suites.formats.report import (
    GAPS_SHOWN,
    MAX_ERRORS,
    NUMBERS_SHOWN,
    FormatResult,
    SuiteError,
    cap_errors,
    failed,
    first_gaps,
    json_path,
    listed,
    more_gaps,
)
from suites.formats.schema import describe_value, schema_errors, short

# source_format values: which version of the SyntaxGym format the upload was written in.
CURRENT = "current"  # {"type": "formula", "formula": ...} with parentheses
STRING_PREDICTIONS = "string-predictions"  # "predictions": ["(2;%b%) > (2;%a%)"]
BRACKET_FORMULAS = "bracket-formulas"  # 2020 master branch: [ ... ] grouping
RELATIONS_2019 = "2019-relations"  # {"relation": "greaterthan", "region_number", ...}
NO_PREDICTIONS = "no-predictions"  # no "predictions" key at all
RESULTS = "results"  # an evaluated suite: metric_value per region, meta.model
SOURCE_FORMATS = (
    CURRENT,
    STRING_PREDICTIONS,
    BRACKET_FORMULAS,
    RELATIONS_2019,
    NO_PREDICTIONS,
    RESULTS,
)

# Keys the canonical form keeps, per kind of object. Anything else is reported, never
# dropped silently (meta is the exception: unknown meta keys are kept as they are).
_KNOWN_KEYS = {
    "suite": {"meta", "region_meta", "predictions", "items"},
    "item": {"item_number", "conditions"},
    "condition": {"condition_name", "regions"},
    "region": {"region_number", "content", "metric_value"},  # metric_value: see RESULTS
    "formula": {"type", "formula"},
    "relation": {"relation", "region_number", "l_operand", "r_operand"},
}

# What an item number may be: what the database's column holds (PostgreSQL's integer).
ITEM_NUMBERS = (-(2**31), 2**31 - 1)
# The absent condition names a misspelt one is compared with.
DID_YOU_MEAN_CANDIDATES = 50
# Beyond this many, stripped regions are summarised instead of listed one by one.
STRAY_SPACES_LISTED = 5


def parse_suite_text(text: str | bytes, limits: InputLimits = DEFAULT_LIMITS) -> FormatResult:
    """Read a suite from the text (or bytes, UTF-8 with or without a BOM) of a JSON file,
    held to `limits` (a file with too many JSON values is refused before it is decoded)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = exc.object[: exc.start].count(b"\n") + 1
            return failed(
                [
                    SuiteError(
                        "$",
                        f"the file is not UTF-8 text: the byte 0x{exc.object[exc.start]:02x} on "
                        f"line {line} (byte {exc.start + 1}) is not valid UTF-8; save the file "
                        "as UTF-8 and upload it again",
                    )
                ]
            )
    text = text.removeprefix("\ufeff")
    try:
        json_census(text, limits)
    except LimitExceeded as exc:
        return failed([SuiteError("$", exc.message)])
    duplicates: list[str] = []

    def keep_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        # json.loads keeps the last of two equal keys without a word; record it instead.
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                duplicates.append(key)
            obj[key] = value
        return obj

    try:
        data = json.loads(text, object_pairs_hook=keep_pairs)
    except json.JSONDecodeError as exc:
        return failed(
            [
                SuiteError(
                    "$",
                    f"the file is not valid JSON: {exc.msg} at line {exc.lineno}, column "
                    f"{exc.colno}; fix the JSON there (a missing comma, quote or bracket is "
                    "the usual cause)",
                )
            ]
        )
    except RecursionError:
        return failed([SuiteError("$", "the JSON is nested too deeply to be a suite")])
    except ValueError:  # what json.loads raises for a number of over 4,300 digits
        return failed([SuiteError("$", TOO_MANY_DIGITS)])
    result = parse_suite_data(data, limits)
    result.warnings[:0] = _duplicate_notes(Counter(duplicates))
    return result


def _duplicate_notes(counted: Counter[str]) -> list[str]:
    """A note for each key given twice in one object (the last key first), the first
    MAX_ERRORS of them."""
    notes = []
    for key, count in itertools.islice(counted.items(), MAX_ERRORS):
        times = "twice" if count == 1 else f"{count + 1} times"
        notes.append(
            f"the key {short(key)} appears {times} in one JSON object; only the last value was used"
        )
    notes.reverse()
    if len(counted) > MAX_ERRORS:
        notes.append(
            f"{len(counted) - MAX_ERRORS:,} more keys appear more than once in one JSON object; "
            "only the last value of each was used"
        )
    return notes


def load_suite_file(
    path: str | os.PathLike[str], limits: InputLimits = DEFAULT_LIMITS
) -> FormatResult:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        return failed([SuiteError("$", f"cannot read {os.fspath(path)}: {exc.strerror or exc}")])
    return parse_suite_text(raw, limits)


def parse_suite_data(data: object, limits: InputLimits = DEFAULT_LIMITS) -> FormatResult:
    """Read a suite already decoded from JSON (dicts, lists, strings, numbers); texts
    and nesting held to `limits`."""
    if not isinstance(data, dict):
        return failed(
            [
                SuiteError(
                    "$",
                    "a suite must be one JSON object with meta, region_meta, predictions and "
                    f"items, but this is {describe_value(data)}",
                )
            ]
        )
    unstorable = unstorable_text(data, limits=limits)
    if unstorable:
        return failed(unstorable)
    source_format = detect_source_format(data)
    errors = schema_errors(data)
    if errors:
        return failed(errors, source_format=source_format)
    return _SuiteReader(data, source_format).read()


# Limits on names and descriptions (characters): what the database columns hold, and
# what keeps list pages and API replies small.
LABEL_MAX_LENGTH = 200
TAG_MAX_LENGTH = 40
TAGS_MAX_COUNT = 20
# Every kind's description (suites, minimal-pair sets, probing tasks, corpora, models).
DESCRIPTION_MAX_LENGTH = 10_000
META_TEXT_MAX_LENGTH = {
    "description": DESCRIPTION_MAX_LENGTH,
    "reference": 5_000,
    "author": 500,
    "comment": 10_000,
}

# A lone UTF-16 surrogate ("\udc00" in JSON) cannot be encoded as UTF-8, and NUL cannot be
# stored in a PostgreSQL text column: either would fail deep inside the save.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_text(
    data: object, limit: int = 5, limits: InputLimits = DEFAULT_LIMITS
) -> list[SuiteError]:
    """Strings (keys or values) holding a NUL or a lone surrogate, or longer than
    `limits.field_chars`, and lists or objects nested deeper than `limits.json_depth`,
    with their JSON paths. Iterative, and holding one path per open list or object, so
    that neither a deep nor a wide value can exhaust the stack or the memory."""
    errors: list[SuiteError] = []
    stack: list[tuple[list[str | int], Iterator[tuple[str | int, object]]]] = [
        ([], _children(data))
    ]
    while stack and len(errors) < limit:
        path, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            continue
        key, value = child
        if isinstance(key, str):
            problem = _text_problem(key, limits)
            if problem:
                # Below a bad key the path could not be printed; the key's error suffices.
                errors.append(SuiteError.at(path, problem))
                continue
        where = [*path, key]
        if isinstance(value, str):
            problem = _text_problem(value, limits)
            if problem:
                errors.append(SuiteError.at(where, problem))
        elif isinstance(value, float) and not math.isfinite(value) and where[0] == "meta":
            # Only meta is stored as it is (a results file's NaN scores are dropped).
            errors.append(SuiteError.at(where, NOT_FINITE))
        elif isinstance(value, dict | list):
            if len(stack) + 1 > limits.json_depth:
                errors.append(SuiteError.at(where, _too_deep(limits)))
            else:
                stack.append((where, _children(value)))
    return errors


TOO_MANY_DIGITS = (
    "the file holds a number of more than 4,300 digits, which is no number a suite needs; remove it"
)
NOT_FINITE = (
    "the number is not finite (NaN or Infinity, or too large for a decimal number); "
    "write a number, or the text in quotes"
)


def _children(value: object) -> Iterator[tuple[str | int, object]]:
    if isinstance(value, dict):
        return iter(value.items())
    if isinstance(value, list):
        return enumerate(value)
    return iter(())


def _text_problem(text: str, limits: InputLimits) -> str:
    """Why the text cannot be stored ('' when it can)."""
    if len(text) > limits.field_chars:
        return field_too_long(limits, len(text)).message
    bad = _UNSTORABLE.search(text)
    if bad is None:
        return ""
    what = (
        "a NUL character (\\u0000)"
        if bad.group() == "\x00"
        else f"a lone surrogate (\\u{ord(bad.group()):04x}), which is not a character"
    )
    return f"the text holds {what} at position {bad.start() + 1}; remove it"


def _too_deep(limits: InputLimits) -> str:
    return exceeded(
        limits,
        "json_depth",
        f"lists and objects are nested here more than {limits.json_depth} deep",
        "a suite needs seven levels; flatten what meta holds",
    ).message


def detect_source_format(data: dict[str, Any]) -> str:
    """Which SyntaxGym version `data` is written in. Works on unchecked data."""
    if _is_results(data):
        return RESULTS
    if "predictions" not in data:
        return NO_PREDICTIONS
    raw = data["predictions"]
    if not isinstance(raw, list):
        return CURRENT
    if any(isinstance(p, dict) and "relation" in p for p in raw):
        return RELATIONS_2019
    if any(isinstance(p, str) for p in raw):
        return STRING_PREDICTIONS
    if any(isinstance(p, dict) and "[" in str(p.get("formula", "")) for p in raw):
        return BRACKET_FORMULAS
    return CURRENT


def _is_results(data: dict[str, Any]) -> bool:
    meta = data.get("meta")
    if isinstance(meta, dict) and "model" in meta:
        return True
    return any("metric_value" in region for region in _regions(data))


def _regions(data: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Every region object in possibly malformed data."""
    items = data.get("items")
    for item in items if isinstance(items, list) else []:
        conditions = item.get("conditions") if isinstance(item, dict) else None
        for condition in conditions if isinstance(conditions, list) else []:
            regions = condition.get("regions") if isinstance(condition, dict) else None
            for region in regions if isinstance(regions, list) else []:
                if isinstance(region, dict):
                    yield region


class _SuiteReader:
    """The second pass over one schema-valid suite: checks, then the canonical dict."""

    def __init__(self, data: dict[str, Any], source_format: str) -> None:
        self.data = data
        self.source_format = source_format
        self.errors: list[SuiteError] = []
        self.warnings: list[str] = []
        # Errors past MAX_ERRORS are counted, not kept: a million bad items stay small.
        self.unlisted = 0
        self._order: list[str] = []  # the condition names, in the first item's order

    def error(self, path: list[str | int], message: str) -> None:
        if len(self.errors) >= MAX_ERRORS:
            self.unlisted += 1
        else:
            self.errors.append(SuiteError.at(path, message))

    def read(self) -> FormatResult:
        data = self.data
        region_meta = {int(k): v for k, v in data["region_meta"].items()}
        items = data["items"]
        self._note_format()
        self._check_region_meta(region_meta)
        self._check_item_numbers(items)
        order = self._check_conditions(items)
        self._check_regions(items, region_meta)
        self._check_empty_conditions(items)
        self._check_lengths(region_meta, order)
        formulas, originals = self._predictions(set(region_meta), set(order))
        meta = self._meta()
        self._note_unknown_keys()
        if self.errors:
            return FormatResult(
                suite=None,
                errors=cap_errors(self.errors, unlisted=self.unlisted),
                warnings=self.warnings,
                source_format=self.source_format,
                original_predictions=originals,
            )
        suite = {
            "meta": meta,
            "region_meta": {str(n): region_meta[n] for n in sorted(region_meta)},
            "predictions": [{"type": "formula", "formula": f} for f in formulas],
            "items": self._canonical_items(items, order, region_meta),
        }
        return FormatResult(
            suite=suite,
            errors=[],
            warnings=self.warnings,
            source_format=self.source_format,
            original_predictions=originals,
        )

    # -- notes on the version ------------------------------------------------------------

    def _note_format(self) -> None:
        data = self.data
        if self.source_format == RESULTS:
            scored = sum(1 for region in _regions(data) if "metric_value" in region)
            ignored = []
            if scored:
                ignored.append(f"the model's scores (metric_value) on {scored} regions")
            if "model" in data["meta"]:
                ignored.append(f"meta.model {short(data['meta']['model'])}")
            self.warnings.append(
                "this is a results file (a suite together with a model's scores): ignored "
                f"{' and '.join(ignored)}; only the suite itself was imported"
            )
        consequence = "it can be scored, but no item can pass or fail until predictions are added"
        if "predictions" not in data:
            self.warnings.append(
                f'the suite has no "predictions" key, so no predictions: {consequence}'
            )
        elif not data["predictions"]:
            self.warnings.append(
                f'the suite has no predictions ("predictions" is empty): {consequence}'
            )

    # -- structure -----------------------------------------------------------------------

    def _check_region_meta(self, region_meta: dict[int, str]) -> None:
        numbers = sorted(region_meta)
        if numbers[-1] == len(numbers):
            return
        gaps = first_gaps(numbers)
        missing = _numbers_words("region", gaps)
        verb = "is" if len(gaps) == 1 else "are"
        additions = ", ".join(f'"{n}": "<name>"' for n in gaps)
        self.error(
            ["region_meta"],
            f"region_meta numbers its regions {listed(numbers)}, but region numbers must run "
            f"from 1 without gaps: {missing} {verb} missing{more_gaps(numbers, gaps)}; add "
            f"{additions} to region_meta, or renumber the regions (in region_meta and in "
            "every condition)",
        )

    def _check_item_numbers(self, items: list[dict[str, Any]]) -> None:
        first: dict[int, int] = {}
        low, high = ITEM_NUMBERS
        for i, item in enumerate(items):
            number = int(item["item_number"])
            if not low <= number <= high:
                self.error(
                    ["items", i, "item_number"],
                    f"item number {short(number)} is out of range; item numbers are whole "
                    f"numbers from {low:,} to {high:,}",
                )
                continue
            if number in first:
                self.error(
                    ["items", i, "item_number"],
                    f"item number {number} is used twice (items[{first[number]}] and items[{i}]); "
                    "every item needs its own item_number",
                )
            else:
                first[number] = i

    def _check_conditions(self, items: list[dict[str, Any]]) -> list[str]:
        """Condition names, unique and alike in every item. Returns the canonical order:
        that of the first item."""
        order = list(dict.fromkeys(c["condition_name"] for c in items[0]["conditions"]))
        self._order = order
        expected = set(order)
        listing = _names_listing(order)
        first_label = _item_label(items[0], 0)
        for i, item in enumerate(items):
            who = _item_label(item, i)
            seen: dict[str, int] = {}
            for j, condition in enumerate(item["conditions"]):
                name = condition["condition_name"]
                if name in seen:
                    self.error(
                        ["items", i, "conditions", j, "condition_name"],
                        f"{who} has two conditions named {_quoted(name)} (conditions[{seen[name]}] "
                        f"and conditions[{j}]); condition names must differ within an item: "
                        "rename or remove one",
                    )
                else:
                    seen[name] = j
            if i == 0:
                continue
            absent = self._absent_conditions(i, who, seen, expected, listing)
            for name, j in seen.items():
                if name in expected:
                    continue
                if len(self.errors) >= MAX_ERRORS:
                    self.unlisted += 1  # not worded: the did-you-mean costs time
                else:
                    self.error(
                        ["items", i, "conditions", j, "condition_name"],
                        f"{who} has a condition {_quoted(name)} that the first item "
                        f"({first_label}) does not have{_did_you_mean(name, absent)}; every "
                        f"item needs the same conditions: {listing}",
                    )
        return order

    def _absent_conditions(
        self, i: int, who: str, seen: dict[str, int], expected: set[str], listing: str
    ) -> list[str]:
        """Report the conditions of the first item that item `i` lacks, and return the
        first few: errors past MAX_ERRORS are counted without their names being looked
        up (an item of a suite with thousands of conditions is not read name by name)."""
        count = len(expected) - sum(1 for name in seen if name in expected)
        if not count:
            return []
        room = max(0, MAX_ERRORS - len(self.errors))
        wanted = min(count, max(room, DID_YOU_MEAN_CANDIDATES))
        absent = list(itertools.islice((n for n in self._order if n not in seen), wanted))
        for name in absent[:room]:
            self.error(
                ["items", i, "conditions"],
                f"{who} has no condition {_quoted(name)}; every item needs the same "
                f"conditions: {listing}",
            )
        self.unlisted += count - min(count, room)
        return absent

    def _check_regions(self, items: list[dict[str, Any]], region_meta: dict[int, str]) -> None:
        known = set(region_meta)
        used: set[int] = set()
        unknown_at: dict[int, list[str | int]] = {}
        unknown_count: Counter[int] = Counter()
        # Conditions that lack a region: the first few with the regions they list, the
        # rest only by how many known regions they list (enough to count their errors).
        incomplete: list[tuple[list[str | int], str, set[int]]] = []
        uncounted: Counter[int] = Counter()
        for i, item in enumerate(items):
            who = _item_label(item, i)
            for j, condition in enumerate(item["conditions"]):
                where = f"{who}, condition {_quoted(condition['condition_name'])}"
                seen: dict[int, int] = {}
                for k, region in enumerate(condition["regions"]):
                    number = int(region["region_number"])
                    path: list[str | int] = ["items", i, "conditions", j, "regions", k]
                    if number in seen:
                        self.error(
                            [*path, "region_number"],
                            f"{where} lists region {number} twice (regions[{seen[number]}] and "
                            f"regions[{k}]); list each region once",
                        )
                        continue
                    seen[number] = k
                    if number not in known:
                        unknown_at.setdefault(number, [*path, "region_number"])
                        unknown_count[number] += 1
                used.update(seen)
                listed_known = sum(1 for number in seen if number in known)
                if listed_known == len(known):
                    continue
                if len(incomplete) < MAX_ERRORS:
                    where_path: list[str | int] = ["items", i, "conditions", j, "regions"]
                    incomplete.append((where_path, where, set(seen)))
                else:
                    uncounted[listed_known] += 1
        self._report_unknown(unknown_at, unknown_count, known)
        never_used = known - used
        for number in sorted(never_used):
            self.error(
                ["region_meta", str(number)],
                f"region {number} ({_quoted(region_meta[number])}) is in region_meta but no "
                "condition lists it; remove it from region_meta, or add it to every condition",
            )
        # A region no condition lists was reported once above, not once per condition.
        wanted = sorted(known & used)
        self._report_incomplete(incomplete, wanted, region_meta)
        # The rest are counted only: they lack a region some condition lists.
        self.unlisted += sum(n for count, n in uncounted.items() if count < len(wanted))

    def _report_incomplete(
        self,
        incomplete: list[tuple[list[str | int], str, set[int]]],
        wanted: list[int],
        region_meta: dict[int, str],
    ) -> None:
        """An error for each condition that lacks a region some condition lists (the first
        few it lacks named: found among the first of `wanted` that it does not list)."""
        known = set(region_meta)
        for path, where, seen_here in incomplete:
            missing = list(itertools.islice((n for n in wanted if n not in seen_here), GAPS_SHOWN))
            if not missing:
                continue
            names = ", ".join(f"{n} ({_quoted(region_meta[n])})" for n in missing)
            more = len(wanted) - sum(1 for n in seen_here if n in known) - GAPS_SHOWN
            names += f" (and {more:,} more)" if more > 0 else ""
            self.error(
                path,
                f"{where} has no region {names}; every condition lists each region of "
                'region_meta once (an empty region is written with "content": "")',
            )

    def _report_unknown(
        self, unknown_at: dict[int, list[str | int]], unknown_count: Counter[int], known: set[int]
    ) -> None:
        named = _numbers_words("region", sorted(known))
        for number in sorted(unknown_at):
            count = unknown_count[number]
            self.error(
                unknown_at[number],
                f"region {number} is not in region_meta, which names {named}; add "
                f'"{number}": "<name>" to region_meta, or remove region {number} from the items '
                f"(it appears in {count} condition{'s' if count != 1 else ''})",
            )

    def _check_empty_conditions(self, items: list[dict[str, Any]]) -> None:
        """A condition whose regions are all empty has no sentence: a model would score it
        0 bits, and predictions comparing it would hold by accident."""
        for i, item in enumerate(items):
            who = _item_label(item, i)
            for j, condition in enumerate(item["conditions"]):
                regions = condition["regions"]
                if all(not str(region.get("content", "")).strip() for region in regions):
                    self.error(
                        ["items", i, "conditions", j, "regions"],
                        f"{who}, condition {condition['condition_name']!r} has only empty "
                        "regions, so there is no sentence to score; write its words, or "
                        "remove the condition from every item",
                    )

    def _check_lengths(self, region_meta: dict[int, str], conditions: list[str]) -> None:
        """Names and descriptions within the limits pages and the database are made for."""
        for number, name in region_meta.items():
            if len(name) > LABEL_MAX_LENGTH:
                self.error(
                    ["region_meta", str(number)],
                    f"the name of region {number} is {len(name):,} characters long; shorten it "
                    f"to at most {LABEL_MAX_LENGTH}",
                )
        for j, name in enumerate(conditions):
            if len(name) > LABEL_MAX_LENGTH:
                self.error(
                    ["items", 0, "conditions", j, "condition_name"],
                    f"the condition name {short(name)} is {len(name):,} characters long; "
                    f"shorten it to at most {LABEL_MAX_LENGTH}",
                )
        meta = self.data["meta"]
        for key, limit in META_TEXT_MAX_LENGTH.items():
            value = meta.get(key)
            if isinstance(value, str) and len(value) > limit:
                self.error(
                    ["meta", key],
                    f"meta.{key} is {len(value):,} characters long; shorten it to at most "
                    f"{limit:,}",
                )
        tags = meta.get("tags") if isinstance(meta.get("tags"), list) else []
        if len(tags) > TAGS_MAX_COUNT:
            self.error(
                ["meta", "tags"],
                f"the suite has {len(tags)} tags; keep the {TAGS_MAX_COUNT} that describe it best",
            )
        for k, tag in enumerate(tags):
            if isinstance(tag, str) and len(slugify(tag)) > TAG_MAX_LENGTH:
                self.error(
                    ["meta", "tags", k],
                    f"the tag {short(tag)} is {len(slugify(tag))} characters long as a slug; "
                    f"a tag is a short label of at most {TAG_MAX_LENGTH} characters",
                )

    # -- predictions ---------------------------------------------------------------------

    def _predictions(
        self, region_numbers: set[int], condition_names: set[str]
    ) -> tuple[list[str], list[str]]:
        """Canonical formula texts and the texts as uploaded."""
        formulas: list[str] = []
        originals: list[str] = []
        path: list[str | int]
        for i, raw in enumerate(self.data.get("predictions", [])):
            if isinstance(raw, str):
                text = raw
                path = ["predictions", i]
                originals.append(raw)
            elif "relation" in raw:
                original = json.dumps(raw, ensure_ascii=False)
                originals.append(original)
                try:
                    text = predictions.relation_to_formula(
                        raw["relation"],
                        int(raw["region_number"]),
                        raw["l_operand"],
                        raw["r_operand"],
                    )
                except predictions.PredictionError as exc:
                    # Only an unknown relation has a key of its own to point at.
                    unknown = exc.message.startswith("unknown relation")
                    self.error(["predictions", i, *(["relation"] if unknown else [])], exc.message)
                    continue
                path = ["predictions", i]
            else:
                text = raw["formula"]
                path = ["predictions", i, "formula"]
                originals.append(text)
            try:
                node = predictions.parse(text)
            except predictions.PredictionError as exc:
                self.error(path, f"{exc}; formula: {_excerpt(text, exc.col)}")
                continue
            problems = predictions.check_references(
                node, region_numbers=region_numbers, condition_names=condition_names
            )
            for problem in problems:
                self.error(path, f"{problem}; formula: {_excerpt(text, None)}")
            if problems:
                continue
            formula = predictions.canonical(text)
            formulas.append(formula)
            if isinstance(raw, dict) and "relation" in raw:
                self.warnings.append(
                    f"prediction {i + 1}: the 2019 relation {originals[-1]} was converted to "
                    f"the formula {formula}"
                )
            elif "[" in text:
                self.warnings.append(
                    f"prediction {i + 1}: square-bracket grouping was rewritten with "
                    f"parentheses: {formula}"
                )
        return formulas, originals

    # -- meta ----------------------------------------------------------------------------

    def _meta(self) -> dict[str, Any]:
        given = self.data["meta"]
        meta: dict[str, Any] = {"name": given["name"].strip()}
        if meta["name"] != given["name"]:
            self.warnings.append(
                f"meta.name {given['name']!r} had leading/trailing spaces; it is now "
                f"{meta['name']!r}"
            )
        if "metric" in given:
            metric = given["metric"]
            meta["metric"] = list(metric) if isinstance(metric, list) else metric
        else:
            meta["metric"] = DEFAULT_METRIC
            self.warnings.append(
                f'meta has no "metric"; using "{DEFAULT_METRIC}", SyntaxGym\'s default'
            )
        for key in META_TEXT_KEYS:
            # An empty description is no information; the site writes none back either.
            if given.get(key):
                meta[key] = given[key]
        # Too many tags is an error (_check_lengths): no note for each.
        if "tags" in given and len(given["tags"]) <= TAGS_MAX_COUNT:
            tags = self._tags(given["tags"])
            if tags:
                meta["tags"] = tags
        for key, value in given.items():
            # meta.model names the model of a results file; the RESULTS note says it is dropped.
            if key not in META_KNOWN_KEYS and key != "model":
                meta[key] = value
        return meta

    def _tags(self, raw: list[str]) -> list[str]:
        slugs: set[str] = set()
        for tag in raw:
            # Django's slugify: tags read here are the ones the site stores.
            slug = slugify(tag)
            if not slug:
                self.warnings.append(f"tag {tag!r} was dropped: a tag needs letters or digits")
            elif slug != tag:
                self.warnings.append(
                    f"tag {tag!r} is stored as {slug!r} (tags are lower-case slugs)"
                )
            if slug:
                slugs.add(slug)
        return sorted(slugs)

    # -- keys Gym does not keep ----------------------------------------------------------

    def _note_unknown_keys(self) -> None:
        found: dict[str, list[str | int]] = {}
        count: Counter[str] = Counter()
        others = 0  # keys past the MAX_ERRORS different ones, counted only

        def check(obj: dict[str, Any], kind: str, path: list[str | int]) -> None:
            nonlocal others
            for key in obj:
                if key in _KNOWN_KEYS[kind]:
                    continue
                marker = f"{kind}\0{key}"
                if marker in found:
                    count[marker] += 1
                elif len(found) < MAX_ERRORS:
                    found[marker] = [*path, key]
                    count[marker] += 1
                else:
                    others += 1

        data = self.data
        check(data, "suite", [])
        for i, raw in enumerate(data.get("predictions", [])):
            if isinstance(raw, dict):
                check(raw, "relation" if "relation" in raw else "formula", ["predictions", i])
        for i, item in enumerate(data["items"]):
            check(item, "item", ["items", i])
            for j, condition in enumerate(item["conditions"]):
                check(condition, "condition", ["items", i, "conditions", j])
                for k, region in enumerate(condition["regions"]):
                    check(region, "region", ["items", i, "conditions", j, "regions", k])
        for marker, path in found.items():
            kind, key = marker.split("\0")
            more = count[marker] - 1
            where = json_path(path)
            if more:
                where += f" and {more} other place{'s' if more != 1 else ''}"
            hint = "; move it into meta to keep it" if kind == "suite" else ""
            self.warnings.append(
                f"ignored the key {short(key)} at {where}: it is not "
                f"part of the SyntaxGym format{hint}"
            )
        if others:
            self.warnings.append(f"ignored {others:,} more keys that are not part of the format")

    # -- the canonical items -------------------------------------------------------------

    def _canonical_items(
        self, items: list[dict[str, Any]], order: list[str], region_meta: dict[int, str]
    ) -> list[dict[str, Any]]:
        stripped: list[str] = []
        touched_items: set[int] = set()
        out = []
        for item in items:
            number = int(item["item_number"])
            by_name = {c["condition_name"]: c for c in item["conditions"]}
            conditions = []
            for name in order:
                regions = []
                for region in sorted(by_name[name]["regions"], key=lambda r: r["region_number"]):
                    region_number = int(region["region_number"])
                    content = region["content"]
                    clean = content.strip()
                    if clean != content:
                        touched_items.add(number)
                        stripped.append(
                            f"item {number}, condition {name!r}, region {region_number} "
                            f"({region_meta[region_number]!r}): {content!r} → {clean!r}"
                        )
                    regions.append({"region_number": region_number, "content": clean})
                conditions.append({"condition_name": name, "regions": regions})
            out.append({"item_number": number, "conditions": conditions})
        self._note_stripped(stripped, len(touched_items), len(items))
        return out

    def _note_stripped(self, stripped: list[str], touched: int, total: int) -> None:
        if not stripped:
            return
        # SyntaxGym strips each region before joining, so stripping changes no score.
        if len(stripped) <= STRAY_SPACES_LISTED:
            self.warnings.extend(
                f"removed leading/trailing spaces from region content: {line}" for line in stripped
            )
            return
        self.warnings.append(
            f"removed leading/trailing spaces from {len(stripped)} region contents in {touched} "
            f"of {total} items (scores do not change: regions are stripped before they are "
            f"joined); the first {STRAY_SPACES_LISTED}:"
        )
        self.warnings.extend(f"  {line}" for line in stripped[:STRAY_SPACES_LISTED])
        self.warnings.append(f"  … and {len(stripped) - STRAY_SPACES_LISTED} more")


def _item_label(item: dict[str, Any], index: int) -> str:
    return f"item {item['item_number']} (index {index})"


def _numbers_words(noun: str, numbers: list[int]) -> str:
    """'region 3', 'regions 3 and 5', 'regions 1, 2 and 4' (a long list cut short)."""
    if len(numbers) == 1:
        return f"{noun} {numbers[0]}"
    if not numbers:
        return f"no {noun}s"
    if len(numbers) > NUMBERS_SHOWN:
        return f"{noun}s {listed(numbers)}"
    return f"{noun}s {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"


def _names_listing(names: list[str]) -> str:
    """'a, b, c', a long list (or long names) cut short."""
    shown = ", ".join(name if len(name) <= 80 else name[:79] + "…" for name in names[:20])
    return shown if len(names) <= 20 else f"{shown}, … ({len(names):,} in all)"


def _quoted(text: str, width: int = 80) -> str:
    """repr() of a name, a long one cut short (messages repeat names many times)."""
    return repr(text) if len(text) <= width else repr(text[: width - 1]) + "…"


def _did_you_mean(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f" (is it a misspelling of {close[0]!r}?)" if close else ""


def _excerpt(text: str, col: int | None, width: int = 50) -> str:
    """The formula, or for a long one the part around `col`, quoted."""
    if len(text) <= 2 * width or col is None:
        return json.dumps(
            text if len(text) <= 4 * width else text[: 4 * width] + "…", ensure_ascii=False
        )
    start = max(0, col - width)
    end = min(len(text), col + width)
    return json.dumps(
        ("…" if start else "") + text[start:end] + ("…" if end < len(text) else ""),
        ensure_ascii=False,
    )
