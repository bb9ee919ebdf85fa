"""Type checks against Gym's own JSON Schema (suite.schema.json), in plain English.

jsonschema's own messages ("'1' is not of type 'integer'") assume the reader knows JSON
Schema; researchers uploading a suite do not, so each kind of error gets a sentence that
says what the field must hold and how to fix it.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Sequence
from functools import cache
from itertools import islice
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError

from suites.formats.report import MAX_ERRORS, MORE_NOT_READ, SuiteError, json_path

SCHEMA_PATH = Path(__file__).with_name("suite.schema.json")
# The values a region has (a results file's "metric_value" keys), the one definition
# the scoring engine, stored results and exports all use.
REGION_METRICS: tuple[str, ...] = ("sum", "mean", "median", "range", "max", "min")
# What meta.metric may name: a region metric, or "all" of them.
METRICS: tuple[str, ...] = (*REGION_METRICS, "all")


def prediction_metric(metric: Any) -> str:
    """The region metric predictions compare: the suite's metric, its first one if it
    lists several, and sum for "all" (SyntaxGym's default; every metric is still
    computed). The suite page and every evaluation show this one."""
    if isinstance(metric, list) and metric:
        metric = metric[0]
    return metric if isinstance(metric, str) and metric in REGION_METRICS else "sum"


_EXPECTED = {
    "integer": "a whole number (such as 1)",
    "string": "text in double quotes",
    "object": "a JSON object ({…})",
    "array": "a list ([…])",
    "number": "a number",
    "boolean": "true or false",
}

# What to add when a required key is missing, by key.
_REQUIRED_HINTS = {
    "meta": 'add "meta": {"name": "<suite name>", "metric": "sum"}',
    "name": 'add "name": "<a unique name for the suite>" to meta',
    "region_meta": 'add "region_meta": {"1": "<name of region 1>", "2": "<name of region 2>", …}',
    "items": 'add "items": [ … ] with at least one item',
    "item_number": 'give every item a unique whole-number "item_number"',
    "conditions": 'give the item a "conditions" list',
    "condition_name": 'give every condition a "condition_name"',
    "regions": 'give the condition a "regions" list',
    "region_number": 'give every region its "region_number" (a key of region_meta)',
    "content": 'give every region its "content" (its words; "" for an empty region)',
    "formula": 'write a prediction as {"type": "formula", "formula": "(2;%b%) > (2;%a%)"}',
    "relation": "a 2019 relation prediction needs relation, region_number, l_operand and r_operand",
    "l_operand": "a 2019 relation prediction needs relation, region_number, l_operand and r_operand",
    "r_operand": "a 2019 relation prediction needs relation, region_number, l_operand and r_operand",
}

# Why a list may not be empty, by key.
_NON_EMPTY_HINTS = {
    "items": "a suite needs at least one item",
    "conditions": "an item needs at least one condition",
    "regions": 'a condition lists every region of region_meta (an empty region has content "")',
}


@cache
def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@cache
def _validator() -> Any:
    schema = load_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    # Resolving a $ref costs a lookup at every use (32,000 regions in a large suite);
    # with the definitions inlined, validation takes about 40% less time.
    return cls(inline_refs(schema))


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every `{"$ref": "#/$defs/NAME"}` replaced by its definition.
    A recursive definition would have no inlined form, so it is refused."""
    definitions = schema.get("$defs", {})

    def inline(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(child, seen) for child in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and len(node) == 1:
            name = ref.removeprefix("#/$defs/")
            if name in seen:
                raise ValueError(f"the schema's definition {name!r} is recursive")
            return inline(definitions[name], (*seen, name))
        return {key: inline(value, seen) for key, value in node.items() if key != "$defs"}

    return inline(schema, ())


def schema_errors(data: object) -> list[SuiteError]:
    """The schema violations in `data`, in document order: all of them, or when there are
    more than MAX_ERRORS the first found and a last line saying that more were left
    unread (a file of a million bad items would otherwise build a million errors)."""
    found_iter = _validator().iter_errors(data)
    found = sorted(islice(found_iter, MAX_ERRORS), key=lambda e: _sort_key(e.absolute_path))
    more = next(found_iter, None) is not None
    # Two branches of one schema can fault the same value in the same words; say it once.
    errors = list(dict.fromkeys(SuiteError.at(list(e.absolute_path), explain(e)) for e in found))
    if more:
        errors.append(SuiteError("$", MORE_NOT_READ))
    return errors


def _sort_key(path: Iterable[str | int]) -> tuple[tuple[int, int, str], ...]:
    # Keys and indexes mix in one path; sort indexes numerically so items[10] follows items[9].
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in path)


def explain(error: ValidationError) -> str:
    path = list(error.absolute_path)
    label = _label(path)
    instance = error.instance
    kind = error.validator

    if "propertyNames" in error.schema_path:
        return (
            f'region_meta keys must be region numbers written as text ("1", "2", …), '
            f"and {short(instance)} is not one; use the number (at most ten digits) as "
            "the key and the region's name as the value"
        )
    if kind == "required":
        missing = _required_name(error)
        hint = _REQUIRED_HINTS.get(missing, f'add "{missing}"')
        return f"{_where(path)} has no {json.dumps(missing)}; {hint}"
    if kind == "type":
        expected = error.validator_value
        words = (
            _EXPECTED.get(expected, expected)
            if isinstance(expected, str)
            else " or ".join(_EXPECTED.get(t, t) for t in expected)
        )
        message = f"{label} must be {words}, but it is {describe_value(instance)}"
        if expected == "integer" and isinstance(instance, str) and instance.strip().isdigit():
            message += "; write the number without quotes"
        elif label.startswith("predictions[") and expected == "object":
            message += (
                '; write each prediction as {"type": "formula", "formula": "(2;%b%) > (2;%a%)"}'
            )
        return message
    if kind in ("minLength", "pattern"):
        return f"{label} is empty; write some text there"
    if kind == "minItems":
        key = next((p for p in reversed(path) if isinstance(p, str)), "")
        hint = _NON_EMPTY_HINTS.get(key, "it needs at least one entry")
        return f"{label} is an empty list; {hint}"
    if kind == "minProperties":
        return 'region_meta is empty; name every region: {"1": "<name of region 1>", …}'
    if kind == "minimum":
        return f"{label} must be 1 or more, not {short(instance)}; regions are numbered from 1"
    if kind == "const":
        return f'{label} must be "formula", not {short(instance)} (or leave "type" out)'
    if kind == "anyOf" and path[:2] == ["meta", "metric"]:
        return (
            f"meta.metric must be one of {', '.join(METRICS)}, or a list of them "
            f'(such as ["sum", "mean"]), not {short(instance)}'
        )
    if kind == "enum":
        choices = ", ".join(json.dumps(c) for c in error.validator_value)
        return f"{label} must be one of {choices}, not {short(instance)}"
    return f"{label}: {error.message}"


def _required_name(error: ValidationError) -> str:
    # jsonschema words it "'name' is a required property"; the repr is the only place
    # that names the one missing key this error is about.
    match = re.match(r"^(.*) is a required property$", error.message)
    if match:
        try:
            return str(ast.literal_eval(match.group(1)))
        except (ValueError, SyntaxError):
            pass
    present = error.instance if isinstance(error.instance, dict) else {}
    return next((str(p) for p in error.validator_value if p not in present), "?")


def _label(path: Sequence[str | int]) -> str:
    """The name a researcher sees for a path: `items[3].item_number`, `meta.name`."""
    return json_path(path).removeprefix("$").lstrip(".") or "the suite"


def _where(path: Sequence[str | int]) -> str:
    return "the suite" if not path else _label(path)


def describe_value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, str):
        return f"the text {short(value)}"
    if isinstance(value, int | float):
        return f"the number {short(value)}"
    if isinstance(value, list):
        return "a list"
    return "a JSON object"


def short(value: object, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
