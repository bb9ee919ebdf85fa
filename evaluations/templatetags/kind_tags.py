"""The sections every kind contributes to the shared pages, through the run kinds
registry: `{% kind_sections "board" %}` on the leaderboard page, `{% kind_sections
"model" model %}` on a model's page (`RunKind.board_section`, `RunKind.model_section`).
A new kind appears on both by declaring its hooks; the pages name no kind."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from evaluations.runs import lifecycle as runs

register = template.Library()


@register.simple_tag(takes_context=True)
def kind_sections(context: template.Context, where: str, subject: Any = None) -> SafeString:
    """Each kind's section of the page (`where`: "board" or "model"), in order."""
    shown = [kind.section(where, context, subject) for kind in runs.kinds_with_sections(where)]
    return SafeString("\n".join(part for part in shown if part))
