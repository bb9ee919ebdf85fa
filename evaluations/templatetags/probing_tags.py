"""Template helpers of probing results: the sections that a task's page, the leaderboard
and a model's page include (each one line there: `{% probing_... %}`), and the shades of
the confusion matrix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import template

from evaluations.probing import selectors as probing_selectors
from evaluations.probing.forms import ProbingRunRequestForm
from evaluations.templatetags.evaluation_tags import share_class
from suites.models import ProbingTask

register = template.Library()


DASH = "\u2014"  # what a number an older run never stored shows as


def _number(value: Any, shown: Callable[[float], str]) -> str:
    """`value` as a float through `shown`; a dash when it is missing or no number."""
    if value is None:
        return DASH
    try:
        return shown(float(value))
    except (TypeError, ValueError):
        return DASH


@register.filter
def measure(value: float | None, digits: int = 2) -> str:
    """An accuracy, spread or selectivity with `digits` decimals; a dash when missing."""
    if isinstance(value, bool):
        return DASH
    return _number(value, lambda v: f"{v:.{int(digits)}f}")


@register.filter
def signed(value: float | None) -> str:
    """A difference with its sign (selectivity); a dash when missing."""
    return _number(value, lambda v: f"{v:+.2f}".replace("-", "\u2212"))


@register.filter
def bits(value: float | None) -> str:
    """A code length in whole bits; a dash when missing."""
    return _number(value, lambda v: f"{v:,.0f}")


@register.filter
def shade(value: Any) -> str:
    """The classes of a blue background for a share between 0 and 1, light enough for dark
    text (gym.css's .shade-bg); "" for no value."""
    marked = share_class(value)
    return f"shade-bg {marked}" if marked else ""


@register.filter
def above(accuracy: float | None, baselines: dict[str, Any] | None) -> float | None:
    """How far an accuracy is above the better of the majority and length baselines."""
    if accuracy is None or not baselines:
        return None
    values = [(baselines.get(name) or {}).get("te_accuracy") for name in ("majority", "length")]
    known = [v for v in values if v is not None]
    return float(accuracy) - max(known) if known else None


KAPPA_NAMES = {"cohen": "Cohen's \u03ba", "fleiss": "Fleiss' \u03ba"}


@register.filter
def agreement_text(human: dict[str, Any] | None) -> str:
    """The human row's inter-annotator agreement in words: "Cohen's κ 0.61 over 200
    sentences (2 people)"; what is missing when there is none."""
    if not human:
        return ""
    agreement = human.get("agreement")
    if not agreement:
        return "agreement: needs two people who finished"
    name = KAPPA_NAMES.get(agreement["method"], "\u03ba")
    kappa = agreement["kappa"]
    value = "undefined (one label throughout)" if kappa is None else f"{float(kappa):.2f}"
    n = agreement["sentences"]
    return (
        f"{name} {value} over {n} sentence{'' if n == 1 else 's'} "
        f"({agreement['annotators']} people)"
    )


@register.filter
def cells_of(board: probing_selectors.ProbingBoard, row: probing_selectors.BoardRow) -> list[Any]:
    return board.cells_of(row)


def _user(context: template.Context) -> Any:
    request = context.get("request")
    return getattr(request, "user", None)


def _staff(context: template.Context) -> bool:
    user = _user(context)
    return bool(user is not None and user.is_staff)


@register.inclusion_tag("evaluations/probing/_probing_task_runs.html", takes_context=True)
def probing_task_runs(context: template.Context, task: ProbingTask) -> dict[str, Any]:
    """The task page's runs and, for people signed in, the form that asks for more."""
    user = _user(context)
    signed_in = bool(user is not None and user.is_authenticated)
    return {
        "task": task,
        "runs": probing_selectors.task_runs(task, include_hidden=_staff(context)),
        "form": ProbingRunRequestForm(initial={"task": task.name}) if signed_in else None,
        "user": user,
        "csrf_token": context.get("csrf_token"),
    }
