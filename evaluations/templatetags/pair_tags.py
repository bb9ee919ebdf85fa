"""Template helpers for minimal-pair results: the leaderboard section, the model and set
pages' lists of runs (each one include tag, so that the shared pages only load them),
and the result page's links, which keep its analysis options."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import escape
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe

from evaluations.minimal_pairs import result_page as pair_result_page
from evaluations.minimal_pairs import selectors as pair_selectors
from suites.models import MinimalPairSet

register = template.Library()


def _staff(context: template.Context) -> bool:
    user = getattr(context.get("request"), "user", None)
    return bool(user is not None and user.is_staff)


@register.inclusion_tag("evaluations/minimal_pairs/_pair_set_results.html", takes_context=True)
def pair_set_results(context: template.Context, pair_set: MinimalPairSet) -> dict[str, Any]:
    return {
        "pair_set": pair_set,
        "results": pair_selectors.pair_set_results(pair_set, include_hidden=_staff(context)),
        "user": getattr(context.get("request"), "user", None),
    }


@register.simple_tag
def pair_query(result: pair_result_page.PairResultPage, **changes: object) -> str:
    """The result page's query string: its options, condition group, tab and page, with
    `changes` applied (None or "" drops a parameter; a new filter starts at page 1)."""
    params: dict[str, object] = dict(pair_result_page.options_query(result.options))
    params["cond"] = result.group.number if result.group else ""
    params["show"] = result.show
    params["page"] = result.page.number if result.page.number > 1 else ""
    if "cond" in changes or "show" in changes:
        params["page"] = ""
    params.update(changes)
    pairs = [(k, str(v)) for k, v in params.items() if v is not None and v != ""]
    # An empty `conditions` differs from an absent one (the page's default grouping).
    if not result.options.conditions:
        pairs.append(("conditions", ""))
    return "?" + urlencode(pairs)


@register.simple_tag
def pair_words(sentence: pair_result_page.SentenceWords, measure: str) -> SafeString:
    """One sentence word by word, each word's value under it and the words of interest
    marked. Built here rather than through an include: a page of 50 pairs has some 1,000
    words, which the template engine took most of the page's time to render. Every piece
    of text is escaped."""
    digits = 4 if measure == "prob" else 2
    parts = [f'<div class="pair-words" data-sentid="{escape(sentence.sentid)}">']
    for word in sentence.words:
        value = "—" if word.value is None else f"{word.value:.{digits}f}"
        text = escape(word.text)
        shown = f"<mark>{text}</mark>" if word.roi else f'<span class="pw-text">{text}</span>'
        roi = " roi" if word.roi else ""
        title = f"word {word.position}{' (ROI)' if word.roi else ''}"
        parts.append(
            f'<span class="pw{roi}" title="{title}">{shown}'
            f'<span class="pw-value">{value}</span></span> '
        )
    if not sentence.words:
        parts.append('<span class="muted">no tokens stored</span>')
    if sentence.whole:
        parts.append(
            '<span class="muted small" title="This sentence has no ROI: every word counts">'
            " (whole sentence)</span>"
        )
    parts.append("</div>")
    return mark_safe("".join(parts))  # noqa: S308 - every piece of text above is escaped
