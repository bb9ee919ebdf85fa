"""Reading SyntaxGym JSON suites, in every version found in the wild, into the canonical form.

Two passes: the JSON Schema checks types (all errors at once); if the types are right,
code checks what a schema cannot (contiguous regions, the same conditions in every item,
formulas that parse and name real regions and conditions) and builds the canonical dict.
The second pass is skipped when the first fails, because its checks would only repeat
the type errors in more confusing words.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.utils.text import slugify

from suites.formats import predictions
from suites.formats.canonical import DEFAULT_METRIC, META_KNOWN_KEYS, META_TEXT_KEYS
from suites.formats.report import FormatResult, SuiteError, cap_errors, failed, json_path
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

# Beyond this many, stripped regions are summarised instead of listed one by one.
STRAY_SPACES_LISTED = 5


def parse_suite_text(text: str | bytes) -> FormatResult:
    """Read a suite from the text (or bytes, UTF-8 with or without a BOM) of a JSON file."""
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
    result = parse_suite_data(data)
    for key, count in Counter(duplicates).items():
        times = "twice" if count == 1 else f"{count + 1} times"
        result.warnings.insert(
            0,
            f"the key {json.dumps(key, ensure_ascii=False)} appears {times} in one JSON object; "
            "only the last value was used",
        )
    return result


def load_suite_file(path: str | os.PathLike[str]) -> FormatResult:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        return failed([SuiteError("$", f"cannot read {os.fspath(path)}: {exc.strerror or exc}")])
    return parse_suite_text(raw)


def parse_suite_data(data: object) -> FormatResult:
    """Read a suite already decoded from JSON (dicts, lists, strings, numbers)."""
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
    unstorable = unstorable_text(data)
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


def unstorable_text(data: object, limit: int = 5) -> list[SuiteError]:
    """Strings (keys or values) holding a NUL or a lone surrogate, with their JSON paths.
    Iterative, so that a deeply nested value cannot exhaust the stack."""
    errors: list[SuiteError] = []
    stack: list[tuple[object, list[str | int]]] = [(data, [])]
    while stack and len(errors) < limit:
        value, path = stack.pop()
        texts: list[tuple[str, list[str | int]]] = []
        if isinstance(value, str):
            texts.append((value, path))
        elif isinstance(value, dict):
            for key, sub in value.items():
                texts.append((str(key), path))
                # Below a bad key the path could not be printed; the key's error suffices.
                if not _UNSTORABLE.search(str(key)):
                    stack.append((sub, [*path, str(key)]))
        elif isinstance(value, list):
            stack.extend((sub, [*path, i]) for i, sub in enumerate(value))
        for text, where in texts:
            bad = _UNSTORABLE.search(text)
            if bad is None:
                continue
            what = (
                "a NUL character (\\u0000)"
                if bad.group() == "\x00"
                else f"a lone surrogate (\\u{ord(bad.group()):04x}), which is not a character"
            )
            errors.append(
                SuiteError.at(
                    where, f"the text holds {what} at position {bad.start() + 1}; remove it"
                )
            )
    return errors


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

    def error(self, path: list[str | int], message: str) -> None:
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
                errors=cap_errors(self.errors),
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
        if numbers == list(range(1, len(numbers) + 1)):
            return
        gaps = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
        missing = _numbers_words("region", gaps)
        verb = "is" if len(gaps) == 1 else "are"
        additions = ", ".join(f'"{n}": "<name>"' for n in gaps)
        self.error(
            ["region_meta"],
            f"region_meta numbers its regions {', '.join(map(str, numbers))}, but region numbers "
            f"must run from 1 without gaps: {missing} {verb} missing; add {additions} to "
            "region_meta, or renumber the regions (in region_meta and in every condition)",
        )

    def _check_item_numbers(self, items: list[dict[str, Any]]) -> None:
        first: dict[int, int] = {}
        for i, item in enumerate(items):
            number = int(item["item_number"])
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
        expected = set(order)
        listing = ", ".join(order)
        first_label = _item_label(items[0], 0)
        for i, item in enumerate(items):
            who = _item_label(item, i)
            seen: dict[str, int] = {}
            for j, condition in enumerate(item["conditions"]):
                name = condition["condition_name"]
                if name in seen:
                    self.error(
                        ["items", i, "conditions", j, "condition_name"],
                        f"{who} has two conditions named {name!r} (conditions[{seen[name]}] and "
                        f"conditions[{j}]); condition names must differ within an item: rename "
                        "or remove one",
                    )
                else:
                    seen[name] = j
            if i == 0:
                continue
            absent = [name for name in order if name not in seen]
            for name in absent:
                self.error(
                    ["items", i, "conditions"],
                    f"{who} has no condition {name!r}; every item needs the same conditions: "
                    f"{listing}",
                )
            for name, j in seen.items():
                if name not in expected:
                    self.error(
                        ["items", i, "conditions", j, "condition_name"],
                        f"{who} has a condition {name!r} that the first item ({first_label}) "
                        f"does not have{_did_you_mean(name, absent)}; every item needs the same "
                        f"conditions: {listing}",
                    )
        return order

    def _check_regions(self, items: list[dict[str, Any]], region_meta: dict[int, str]) -> None:
        known = set(region_meta)
        used: set[int] = set()
        unknown_at: dict[int, list[str | int]] = {}
        unknown_count: Counter[int] = Counter()
        incomplete: list[tuple[list[str | int], str, list[int]]] = []
        for i, item in enumerate(items):
            who = _item_label(item, i)
            for j, condition in enumerate(item["conditions"]):
                where = f"{who}, condition {condition['condition_name']!r}"
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
                missing = sorted(known - seen.keys())
                if missing:
                    incomplete.append((["items", i, "conditions", j, "regions"], where, missing))

        named = _numbers_words("region", sorted(known))
        for number in sorted(unknown_at):
            count = unknown_count[number]
            self.error(
                unknown_at[number],
                f"region {number} is not in region_meta, which names {named}; add "
                f'"{number}": "<name>" to region_meta, or remove region {number} from the items '
                f"(it appears in {count} condition{'s' if count != 1 else ''})",
            )
        never_used = known - used
        for number in sorted(never_used):
            self.error(
                ["region_meta", str(number)],
                f"region {number} ({region_meta[number]!r}) is in region_meta but no condition "
                "lists it; remove it from region_meta, or add it to every condition",
            )
        for path, where, missing in incomplete:
            # A region no condition lists was reported once above, not once per condition.
            missing = [n for n in missing if n not in never_used]
            if missing:
                names = ", ".join(f"{n} ({region_meta[n]!r})" for n in missing)
                self.error(
                    path,
                    f"{where} has no region {names}; every condition lists each region of "
                    'region_meta once (an empty region is written with "content": "")',
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
        if "tags" in given:
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

        def check(obj: dict[str, Any], kind: str, path: list[str | int]) -> None:
            for key in obj:
                if key not in _KNOWN_KEYS[kind]:
                    found.setdefault(f"{kind}\0{key}", [*path, key])
                    count[f"{kind}\0{key}"] += 1

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
                f"ignored the key {json.dumps(key, ensure_ascii=False)} at {where}: it is not "
                f"part of the SyntaxGym format{hint}"
            )

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
    """'region 3', 'regions 3 and 5', 'regions 1, 2 and 4'."""
    if len(numbers) == 1:
        return f"{noun} {numbers[0]}"
    if not numbers:
        return f"no {noun}s"
    return f"{noun}s {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"


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
