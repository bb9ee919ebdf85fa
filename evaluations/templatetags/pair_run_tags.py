"""The set page's "Evaluate with model(s)" form and import link (suites never import
evaluations; its template loads this tag), and a run's retry and cancel buttons."""

from __future__ import annotations

from typing import Any

from django import template

from evaluations.minimal_pairs import services as pair_services
from evaluations.minimal_pairs.forms import PairRequestForm

register = template.Library()


@register.inclusion_tag("evaluations/minimal_pairs/_pair_set_actions.html", takes_context=True)
def pair_set_actions(context: template.Context, pair_set: Any) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    signed_in = bool(user is not None and user.is_authenticated)
    return {
        "pair_set": pair_set,
        "signed_in": signed_in,
        "request_form": PairRequestForm(initial={"pair_sets": [pair_set.name]})
        if signed_in
        else None,
        "may_import": pair_services.may_import(user, pair_set),
        "open": not pair_set.evaluations.exists(),
        "csrf_token": context.get("csrf_token"),
    }


@register.inclusion_tag("evaluations/minimal_pairs/_pair_run_actions.html", takes_context=True)
def pair_run_actions(context: template.Context, evaluation: Any) -> dict[str, Any]:
    """Retry and cancel buttons for those who may (the set's owner, requester, staff)."""
    request = context.get("request")
    return {
        "evaluation": evaluation,
        "may_manage": evaluation.may_manage(getattr(request, "user", None)),
        "csrf_token": context.get("csrf_token"),
    }
