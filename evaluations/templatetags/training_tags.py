from __future__ import annotations

from typing import Any

from django import template

from evaluations.training.selectors import corpus_runs

register = template.Library()


@register.inclusion_tag("evaluations/training/_corpus_runs.html", takes_context=True)
def corpus_training_runs(context: template.Context, corpus: Any) -> dict[str, Any]:
    """The training runs that used a corpus, for its page, and a link to train one."""
    request = context.get("request")
    user = getattr(request, "user", None)
    return {
        "corpus": corpus,
        "runs": list(corpus_runs(corpus)[:50]),
        "signed_in": bool(user is not None and user.is_authenticated),
    }
