"""The canonical suite: a plain dict in the current SyntaxGym format. Writing it as JSON,
hashing what affects scores, and reading the parts other modules need."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# meta keys Gym knows, in the order they are written; other keys follow in upload order.
META_TEXT_KEYS = ("description", "reference", "author", "comment")
META_KNOWN_KEYS = ("name", "metric", *META_TEXT_KEYS, "tags")
DEFAULT_METRIC = "sum"


def ordered_meta(meta: dict[str, Any]) -> dict[str, Any]:
    out = {key: meta[key] for key in META_KNOWN_KEYS if key in meta}
    out.update((key, value) for key, value in meta.items() if key not in out)
    return out


def ordered_suite(suite: dict[str, Any]) -> dict[str, Any]:
    """The same suite with every key in the canonical order, so that exports are stable
    byte for byte whoever built the dict (the importer, the database, the grid editor)."""
    region_meta = suite["region_meta"]
    return {
        "meta": ordered_meta(suite["meta"]),
        "region_meta": {str(n): region_meta[str(n)] for n in sorted(int(k) for k in region_meta)},
        "predictions": [
            {"type": "formula", "formula": p["formula"]} for p in suite.get("predictions", [])
        ],
        "items": [
            {
                "item_number": item["item_number"],
                "conditions": [
                    {
                        "condition_name": condition["condition_name"],
                        "regions": [
                            {"region_number": r["region_number"], "content": r["content"]}
                            for r in _by_number(condition["regions"])
                        ],
                    }
                    for condition in item["conditions"]
                ],
            }
            for item in suite["items"]
        ],
    }


def _by_number(regions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(regions, key=lambda r: r["region_number"])


def to_json_text(suite: dict[str, Any]) -> str:
    """The canonical JSON file: UTF-8 characters as they are, two-space indent, newline at end."""
    return json.dumps(ordered_suite(suite), indent=2, ensure_ascii=False) + "\n"


def content_hash(suite: dict[str, Any]) -> str:
    """sha256 of what decides scoring results: items, regions, predictions and metric.

    Name, description, tags and the other meta keys are left out on purpose: renaming a
    suite or fixing its description must not make its evaluations look stale.
    """
    ordered = ordered_suite(suite)
    payload = {
        "metric": suite["meta"].get("metric", DEFAULT_METRIC),
        "region_meta": ordered["region_meta"],
        "predictions": [p["formula"] for p in ordered["predictions"]],
        "items": ordered["items"],
    }
    dumped = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(dumped.encode("utf-8")).hexdigest()


def sentences(suite: dict[str, Any]) -> list[tuple[int, str, list[str]]]:
    """(item_number, condition_name, region contents in region order) for every item and
    condition, in canonical order. The scorer joins the contents; this keeps them apart so
    that it can keep each region's span."""
    return [
        (
            item["item_number"],
            condition["condition_name"],
            [r["content"] for r in _by_number(condition["regions"])],
        )
        for item in suite["items"]
        for condition in item["conditions"]
    ]


def region_names(suite: dict[str, Any]) -> list[str]:
    """Region names in region-number order (index 0 is region 1)."""
    region_meta = suite["region_meta"]
    return [region_meta[str(n)] for n in sorted(int(k) for k in region_meta)]


def condition_names(suite: dict[str, Any]) -> list[str]:
    """Condition names in canonical order (that of the first item)."""
    items = suite["items"]
    return [c["condition_name"] for c in items[0]["conditions"]] if items else []
