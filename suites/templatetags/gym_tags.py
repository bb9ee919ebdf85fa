from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_REF = re.compile(r"\((\d+|\*);%([^%]*)%\)")


@register.filter
def prediction_html(formula: str, region_names: dict[int, str]) -> SafeString:
    """Show a canonical formula with each reference as "region name · condition"."""
    parts: list[str] = []
    last = 0
    for match in _REF.finditer(formula):
        parts.append(escape(formula[last : match.start()]))
        region, condition = match.group(1), match.group(2)
        if region == "*":
            label = "whole sentence"
        else:
            label = f"{region} {region_names.get(int(region), '?')}"
        parts.append(
            f'<span class="ref" title="{escape(match.group(0))}">'
            f'<span class="ref-region">{escape(label)}</span>'
            f'<span class="ref-cond">{escape(condition)}</span></span>'
        )
        last = match.end()
    parts.append(escape(formula[last:]))
    return mark_safe("".join(parts))  # noqa: S308 - every piece above is escaped


@register.simple_tag(takes_context=True)
def query(context: template.Context, **changes: object) -> str:
    """The current query string with some parameters changed (None removes one)."""
    params = context["request"].GET.copy()
    for key, value in changes.items():
        if value is None or value == "":
            params.pop(key, None)
        else:
            params[key] = str(value)
    encoded = urlencode(sorted((k, v) for k, v in params.items()))
    return "?" + encoded if encoded else "?"
