"""Reads of suites that several pages, the API and the exporters share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Q, QuerySet

from suites.catalog import COMMON_SORTS, catalog_filter
from suites.models import Suite, Tag

SORTS: dict[str, tuple[str, ...]] = {
    **COMMON_SORTS,
    "oldest": ("created_at",),
    "items": ("-item_count",),
    "updated": ("-updated_at",),
}


def suite_list(*, q: str = "", tag: str = "", sort: str = "name") -> QuerySet[Suite]:
    """Suites in the lists (archived ones left out), searched, tagged and sorted."""
    return catalog_filter(Suite.objects.all(), q=q, tag=tag, sort=sort, sorts=SORTS)


def suites_with_tag(suites: Iterable[Suite], tag: Tag | None) -> list[Suite]:
    """What a request for `suites` plus `tag` covers: the suites as picked, then the tag's
    other suites in name order (a suite picked and tagged comes once)."""
    chosen = list(suites)
    if tag is not None:
        # Archived suites take no new evaluations.
        listed = Suite.objects.filter(tags=tag, archived_at__isnull=True).order_by("name")
        chosen += [s for s in listed if s not in chosen]
    return chosen


def tag_counts() -> QuerySet[Tag]:
    """Tags with the number of suites in the lists (archived suites not counted)."""
    listed = Count("suites", filter=Q(suites__archived_at__isnull=True))
    return Tag.objects.annotate(suite_count=listed).order_by("name")


def suite_results_count(suite: Suite) -> tuple[int, int]:
    """(evaluations of the suite, of those requested by people other than its owner).
    Through the reverse relation, so that suites/ needs nothing from evaluations/."""
    evaluations = suite.evaluations.all()
    others = evaluations.exclude(requested_by_id=suite.owner_id) if suite.owner_id else evaluations
    return evaluations.count(), others.count()


def suite_meta(suite: Suite) -> dict[str, Any]:
    """meta in the canonical order the format layer writes."""
    meta: dict[str, Any] = {"name": suite.name, "metric": suite.metric}
    for key in ("description", "reference", "author", "comment"):
        value = getattr(suite, key)
        if value:
            meta[key] = value
    tags = sorted(t.name for t in suite.tags.all())
    if tags:
        meta["tags"] = tags
    meta.update(suite.extra_meta or {})
    return meta


def suite_canonical(suite: Suite) -> dict[str, Any]:
    """The whole suite as the canonical (current-format) dict the exporters write."""
    regions = list(suite.regions.all())
    return {
        "meta": suite_meta(suite),
        "region_meta": {str(r.number): r.name for r in regions},
        "predictions": [{"type": "formula", "formula": p.formula} for p in suite.predictions.all()],
        "items": [
            {
                "item_number": item.item_number,
                "conditions": [
                    {
                        "condition_name": c["condition_name"],
                        "regions": [
                            {"region_number": i + 1, "content": content}
                            for i, content in enumerate(c["regions"])
                        ],
                    }
                    for c in item.conditions
                ],
            }
            for item in suite.items.all()
        ],
    }
