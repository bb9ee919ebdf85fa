"""Template helpers of the comparison pages."""

from __future__ import annotations

from string import ascii_uppercase

from django import template

register = template.Library()


@register.filter
def letter(index: int) -> str:
    """The label of the compared model at `index` (0 -> "A"), as every kind's comparison
    letters its models in order."""
    try:
        return ascii_uppercase[int(index)] if int(index) >= 0 else "?"
    except (IndexError, TypeError, ValueError):
        return "?"
