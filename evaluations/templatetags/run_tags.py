"""Template helpers every kind's run page shares."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()


@register.simple_tag
def worker_notice(run: Any) -> SafeString | str:
    """For a run that waits for a worker: say so when the last sweep found no worker
    taking work (see evaluations.runs.broker_watch), so that nobody waits for nothing."""
    if run.finished or not run.enqueued:
        return ""
    from evaluations.runs import broker_watch

    notice = broker_watch.worker_notice()
    if not notice:
        return ""
    return format_html('<div class="notice-box" role="status" data-worker-notice>{}</div>', notice)
