"""Template helpers for result pages: the heatmap colour and the suite page's table of
results by model."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from django import template
from django.urls import reverse
from django.utils.html import escape
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe

from evaluations.boards import leaderboard as boards
from evaluations.syntaxgym import selectors
from suites.models import Suite

register = template.Library()


@register.filter(name="share")
def share_class(value: Any) -> str:
    """The class that marks a value between 0 and 1 (clamped) in hundredths, "share-0" to
    "share-100", for gym.css's colour scales (alone: for an element whose own rule picks
    the colour, as .tok does); "" for no value. Classes, not style attributes: the
    Content Security Policy refuses those."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    if math.isnan(number):
        return ""
    return f"share-{round(min(1.0, max(0.0, number)) * 100)}"


@register.filter
def heat(accuracy: Any) -> str:
    """The classes of a background coloured by an accuracy between 0 and 1, from red
    through yellow to green (gym.css's .heat-bg); "" for no value."""
    marked = share_class(accuracy)
    return f"heat-bg {marked}" if marked else ""


@register.filter
def percent(value: float | None) -> str:
    """0.8333 -> "83%" for captions and titles."""
    return "" if value is None else f"{float(value) * 100:.0f}%"


@register.inclusion_tag("evaluations/syntaxgym/_suite_results.html", takes_context=True)
def suite_results(context: template.Context, suite: Suite) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    staff = bool(user is not None and user.is_staff)
    results = selectors.suite_results(suite, include_hidden=staff)
    return {
        "suite": suite,
        "results": results,
        "user": user,
        # Two or more current results can be compared item by item.
        "comparable": sum(1 for r in results if r.done and not r.outdated) >= 2,
        "outdated": selectors.outdated_pairs(suite=suite) if user and user.is_authenticated else [],
    }


def _next_direction(board: boards.Leaderboard, key: str) -> str:
    """Clicking the sorted column flips it; a new column starts best first (A-Z for names)."""
    if board.sort == key:
        return "asc" if board.direction == "desc" else "desc"
    return "asc" if key in (boards.SORT_MODEL, boards.SORT_TOKENS) else "desc"


@register.simple_tag(takes_context=True)
def sort_href(context: template.Context, key: str, prefix: str = "") -> str:
    """The leaderboard's query string sorted by `key`, keeping the tag filter. A section
    of another kind of benchmark sorts with its own parameters (`prefix`sort, `prefix`dir)
    so that sorting it leaves the suites' board as it is."""
    board: boards.Leaderboard = context["board"]
    params = _filters(board)
    params += [(f"{prefix}sort", key), (f"{prefix}dir", _next_direction(board, key))]
    return "?" + urlencode(params)


def _filters(board: boards.Leaderboard, *, toggles: bool = True) -> list[tuple[str, Any]]:
    params: list[tuple[str, Any]] = [("tag", board.tag)] if board.tag else []
    if getattr(board, "training", None) is not None:
        params.append(("training", board.training.pk))
    if toggles and board.intervals_shown:
        params.append(("intervals", 1))
    if toggles and board.significance_shown:
        params.append(("significance", 1))
    return params


@register.simple_tag(takes_context=True)
def board_filters(context: template.Context) -> str:
    """The board's filters (tag, training run) and toggles (intervals, significance) as
    a query string for its downloads, which carry the same columns."""
    params = _filters(context["board"])
    return "?" + urlencode(params) if params else ""


@register.simple_tag(takes_context=True)
def aria_sort(context: template.Context, key: str) -> str:
    """aria-sort for a column header: "ascending"/"descending" when sorted by it."""
    board: boards.Leaderboard = context["board"]
    if board.sort != key:
        return "none"
    return "ascending" if board.direction == "asc" else "descending"


@register.filter
def score(value: float | None) -> str:
    """An accuracy as the tables print it: two decimals, "n/a" for none."""
    return "n/a" if value is None else f"{float(value):.2f}"


@register.filter
def interval(bounds: Sequence[float] | None) -> str:
    """A 95% interval as the pages print it, two decimals like the scores: "0.49–0.94";
    empty for none."""
    if not bounds:
        return ""
    low, high = bounds
    return f"{float(low):.2f}–{float(high):.2f}"


@register.filter
def p_value(value: float | None) -> str:
    """A p-value to three significant digits, "< 0.001" below that, "1" for exactly 1."""
    if value is None:
        return ""
    if value < 0.001:
        return "< 0.001"
    return "1" if value >= 1 else f"{value:.3g}"


_OUTCOMES = {
    True: '<span class="outcome outcome-pass">✓ pass</span>',
    False: '<span class="outcome outcome-fail">✗ fail</span>',
    None: '<span class="outcome outcome-na" title="a value it needs is missing">– n/a</span>',
}


@register.filter
def outcome(value: bool | None) -> SafeString:
    """A prediction outcome as a word and a mark, never colour alone."""
    return mark_safe(_OUTCOMES.get(value, _OUTCOMES[None]))  # noqa: S308 - constant markup


@register.simple_tag(takes_context=True)
def board_cells(
    context: template.Context,
    row: boards.Row,
    result: str = "evaluations:result",
    queue: str = "evaluations:request",
    benchmark: str = "suite",
) -> SafeString:
    """One leaderboard row's cells: each group's mean, then its benchmarks (suites unless
    another kind names its result page, its queue page and the queue's parameter).

    Built here rather than in the template because a full board has well over a thousand
    cells: through the template engine they took about half of the page's 150 ms budget,
    here a few milliseconds. Every piece of text is escaped."""
    key = f"board_links:{result}:{queue}"
    links = context.render_context.get(key)
    if links is None:
        head, _number, tail = reverse(result, args=[987654321]).partition("987654321")
        links = (head, tail, reverse(queue))
        context.render_context[key] = links
    result_head, result_tail, queue = links
    model = row.model
    who = escape(model.display_name)
    queue_model = escape(urlencode([("model", model.name)]))
    parts: list[str] = []
    for block in row.blocks:
        mean = '<span class="muted">—</span>' if block.mean is None else score(block.mean)
        parts.append(f'<td class="lb-mean lb-first num {heat(block.mean)}">{mean}</td>')
        for cell in block.cells:
            suite = escape(cell.suite.name)
            if cell.evaluation_id is not None:
                note, mark = _ties_note(row.ties.get(cell.suite.id, 0))
                bounds = row.intervals.get(cell.suite.id)
                shown = f'<span class="lb-ci">{interval(bounds)}</span>' if bounds else ""
                parts.append(
                    f'<td class="num lb-cell {heat(cell.accuracy)}">'
                    f'<a href="{result_head}{cell.evaluation_id}{result_tail}" '
                    f'title="{who} on {suite}{note}">{score(cell.accuracy)}{mark}{shown}</a></td>'
                )
            elif model.is_imported:
                parts.append(_missing_cell("", who, suite))
            else:
                query = f"{queue_model}&amp;{escape(urlencode([(benchmark, cell.suite.name)]))}"
                parts.append(_missing_cell(f"{queue}?{query}", who, suite))
    return mark_safe("".join(parts))  # noqa: S308 - names are escaped, the rest is ours


def _ties_note(tied: int) -> tuple[str, str]:
    """A cell's hover text and mark for its tied comparisons: ties fail, so an n-gram
    model's 0.00 is mostly ties, and the board says so where the number shows."""
    if not tied:
        return "", ""
    plural = "s" if tied != 1 else ""
    mark = '<span class="lb-tie" aria-hidden="true">=</span>'
    return f": {tied} tied comparison{plural}, each counted as a failure", mark


def _missing_cell(href: str, who: str, benchmark: str) -> str:
    """A cell without a result: a link to queue one, or no link (`href` empty) for a model
    that cannot run here. `who` and `benchmark` come escaped."""
    if not href:
        return (
            f'<td class="lb-cell lb-missing" title="No result for {who} on {benchmark} '
            '(results imported, cannot run here)"><span aria-hidden="true">·</span>'
            '<span class="visually-hidden">no result</span></td>'
        )
    return (
        f'<td class="lb-cell lb-missing"><a href="{href}" '
        f'title="No result for {who} on {benchmark}: queue it">'
        '<span aria-hidden="true">·</span><span class="visually-hidden">no result</span></a></td>'
    )
