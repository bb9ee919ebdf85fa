"""Template helpers of the comparison page."""

from __future__ import annotations

from django import template

from evaluations.syntaxgym.comparisons import LETTERS

register = template.Library()


@register.filter
def letter(index: int) -> str:
    """The label of the compared model at `index` (0 -> "A")."""
    try:
        return LETTERS[int(index)]
    except (IndexError, TypeError, ValueError):
        return "?"
