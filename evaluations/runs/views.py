"""Pages of the run core: the Runs page (runs of every kind), and the retry and cancel
answers and request messages that every kind's pages share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from evaluations.models import LanguageModel, Run
from evaluations.runs import lifecycle as runs
from evaluations.runs import selectors as run_selectors


def run_list(request: HttpRequest) -> HttpResponse:
    """Runs of every kind, newest first, narrowed by the query string (kind, status,
    model, mine)."""
    staff = bool(request.user.is_staff)
    try:
        filters = run_selectors.run_filters(request.GET, include_hidden=staff)
    except run_selectors.RunFilterInvalid as bad:
        return render(request, "400.html", {"message": str(bad)}, status=400)
    if filters.mine and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    keys = run_selectors.run_keys(filters, user=request.user, include_hidden=staff)
    page = Paginator(keys, run_selectors.RUNS_PER_PAGE).get_page(request.GET.get("page"))
    models = LanguageModel.objects.only("name", "display_name")
    return render(
        request,
        "evaluations/runs/run_list.html",
        {
            "page": page,
            "rows": run_selectors.run_rows(page.object_list),
            "filters": filters,
            "kinds": list(runs.KINDS.values()),
            "statuses": Run.Status.choices,
            "models": models if staff else models.filter(is_hidden=False),
        },
    )


def run_list_of(kind: str) -> Callable[[HttpRequest], HttpResponse]:
    """The old list address of one kind: the Runs page narrowed to that kind, with the
    rest of the query string."""

    def view(request: HttpRequest) -> HttpResponse:
        query = request.GET.copy()
        query["kind"] = kind
        return redirect(f"{reverse('evaluations:runs')}?{query.urlencode()}")

    return view


def run_retry_redirect(request: HttpRequest, run: Run) -> HttpResponse:
    """Retry a run of any kind for the page's user (403 when it is not theirs); a message
    says how it went, and the answer goes back to the run's page."""
    try:
        runs.run_retry(run=run, user=request.user)
    except (runs.BrokerUnavailable, runs.RunConflict) as refused:
        messages.error(request, str(refused))
    else:
        messages.success(request, "Sent again.")
    return redirect(run)


def run_cancel_redirect(
    request: HttpRequest, run: Run, *, cancelled: str = "Cancelled."
) -> HttpResponse:
    """Cancel a run of any kind, as `run_retry_redirect` retries one, saying
    `cancelled`."""
    try:
        runs.run_cancel(run=run, user=request.user)
    except runs.RunConflict as refused:
        messages.error(request, str(refused))
    else:
        messages.success(request, cancelled)
    return redirect(run)


View = Callable[[HttpRequest, int], HttpResponse]


def run_action_views(
    run_of: Callable[[int], Run],
    *,
    cancelled: str = "Cancelled.",
) -> tuple[View, View]:
    """One kind's retry and cancel pages (POST by a signed-in user, then back to the
    run's page): `run_of(pk)` is the run, or a 404; `cancelled` as in
    `run_cancel_redirect`."""

    @login_required
    @require_POST
    def retry(request: HttpRequest, pk: int) -> HttpResponse:
        return run_retry_redirect(request, run_of(pk))

    @login_required
    @require_POST
    def cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
        return run_cancel_redirect(request, run_of(pk), cancelled=cancelled)

    return retry, cancel_view


def request_form_page(
    request: HttpRequest,
    form: forms.Form,
    template: str,
    ask: Callable[[dict[str, Any]], HttpResponse],
    *,
    invalid: tuple[type[Exception], ...] = (),
) -> HttpResponse:
    """Every kind's request page: the form (200); the form again with its errors (400);
    or, once it is valid, what `ask` answers with its cleaned data. `ask` may raise one of
    `invalid` (its `errors`: field name -> message) to show the form again with them, or
    BrokerUnavailable to show it with the message (503)."""
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                return ask(form.cleaned_data)
            except invalid as refused:
                # Each class in `invalid` carries `errors` (field -> message).
                for name, message in refused.errors.items():  # type: ignore[attr-defined]
                    form.add_error(name if name in form.fields else None, message)
            except runs.BrokerUnavailable as down:
                messages.error(request, str(down))
                status = 503
    return render(request, template, {"form": form}, status=status)


def requested(
    request: HttpRequest,
    *,
    created: Sequence[Run],
    existing: Sequence[Run],
    asked: Sequence[Run],
    noun: str,
    same: str,
    back: Any,
) -> HttpResponse:
    """The answer to a request for runs: what it queued and what was there already (see
    `request_messages`), then the run's page when it asked for one, else `back`."""
    request_messages(request, created=len(created), existing=len(existing), noun=noun, same=same)
    return redirect(asked[0] if len(asked) == 1 else back)


def request_messages(
    request: HttpRequest, *, created: int, existing: int, noun: str, same: str
) -> None:
    """What a page's request for runs of any kind says: how many it queued, and how many
    were already asked for on the same `same` (shown instead of run again)."""
    if created:
        messages.success(request, f"Queued {created} {noun}(s).")
    if existing:
        messages.info(
            request,
            f"{existing} of these were already asked for {same}; "
            "showing them instead of running them again.",
        )


# The largest id a database row can have (a signed 64-bit integer).
MAX_ID = 2**63 - 1
