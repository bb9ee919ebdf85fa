from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from evaluations.models import Evaluation, LanguageModel
from evaluations.runs.views import (
    MAX_ID,
    request_form_page,
    run_action_views,
    run_list_of,
)
from evaluations.syntaxgym import services
from evaluations.syntaxgym.forms import EvaluationRequestForm
from suites.models import Suite


@login_required
def evaluation_request(request: HttpRequest) -> HttpResponse:
    initial = {}
    if request.GET.getlist("model"):
        initial["models"] = request.GET.getlist("model")
    if request.GET.getlist("suite"):
        initial["suites"] = request.GET.getlist("suite")
    form = EvaluationRequestForm(request.POST or None, initial=initial)

    def ask(data: dict[str, Any]) -> HttpResponse:
        outcome = services.evaluations_request(
            models=data["models"],
            suites=data["all_suites"],
            user=request.user,
            word_probability=data["word_probability"],
        )
        return _request_answer(request, outcome)

    return request_form_page(request, form, "evaluations/syntaxgym/evaluation_request.html", ask)


@login_required
@require_POST
def evaluation_rerun_outdated(request: HttpRequest) -> HttpResponse:
    """Queue every outdated (model, suite) of a suite (`suite`) or a model (`model`) on
    the suite's current content; back to that page when nothing is outdated."""
    suite = model = None
    if request.POST.get("suite"):
        suite = get_object_or_404(Suite, name=request.POST["suite"])
    if request.POST.get("model"):
        model = get_object_or_404(LanguageModel, name=request.POST["model"])
    back = suite or model
    if back is None:
        return render(
            request, "400.html", {"message": "Say which suite or model to re-run."}, status=400
        )
    try:
        outcome = services.evaluations_rerun_outdated(model=model, suite=suite, user=request.user)
    except services.BrokerUnavailable as down:
        messages.error(request, str(down))
        return redirect(back)
    if not outcome.evaluations:
        messages.info(request, "Nothing is outdated: every result is for the current content.")
        return redirect(back)
    return _request_answer(request, outcome)


def _request_answer(request: HttpRequest, outcome: services.RequestOutcome) -> HttpResponse:
    """Say what a request queued and what was there already; show the runs (the list
    marks which of them this request queued)."""
    if outcome.created:
        names = sorted({e.model.display_name for e in outcome.created})
        messages.success(
            request, f"Queued {len(outcome.created)} evaluation(s) of {', '.join(names)}."
        )
    if outcome.existing:
        messages.info(
            request,
            f"{len(outcome.existing)} of these were already requested for the same suite "
            "content; showing them instead of running them again.",
        )
    if len(outcome.evaluations) == 1:
        return redirect(outcome.evaluations[0])
    query = urlencode(
        {
            "ids": ",".join(str(e.pk) for e in outcome.evaluations),
            "new": ",".join(str(e.pk) for e in outcome.created),
        }
    )
    return redirect(f"{reverse('evaluations:list')}?{query}")


def parse_ids(text: str) -> list[int]:
    """Comma-separated evaluation ids; ValueError with a message naming a bad one."""
    ids = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
        if not (part.isascii() and part.isdigit()) or int(part) > MAX_ID:
            raise ValueError(f"ids: {part[:30]!r} is not an evaluation id (a whole number)")
        ids.append(int(part))
    return ids


def evaluation_list(request: HttpRequest) -> HttpResponse:
    """The suite evaluations a request just asked for (`ids`, and `new`: which of them it
    queued); without `ids`, the Runs page narrowed to suite evaluations."""
    if "ids" not in request.GET and "new" not in request.GET:
        return run_list_of("suite")(request)
    evaluations = Evaluation.objects.select_related("model", "suite").order_by("-created_at")
    try:
        ids = parse_ids(request.GET.get("ids", ""))
        new = set(parse_ids(request.GET.get("new", "")))
    except ValueError as bad:
        return render(request, "400.html", {"message": str(bad)}, status=400)
    if ids:
        evaluations = evaluations.filter(pk__in=ids)
    status = request.GET.get("status", "")
    if status:
        evaluations = evaluations.filter(status=status)
    page = Paginator(evaluations, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "evaluations/syntaxgym/evaluation_list.html",
        {
            "page": page,
            "status": status,
            "statuses": Evaluation.Status.choices,
            "ids": ids,
            # Which of the listed runs the request just made queued (the rest were there).
            "new": new if "new" in request.GET else None,
            "queued_now": len(new & set(ids)),
            "already_there": len(set(ids) - new),
        },
    )


def evaluation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = get_object_or_404(
        Evaluation.objects.select_related("model", "suite", "requested_by"), pk=pk
    )
    return render(
        request,
        "evaluations/syntaxgym/evaluation_detail.html",
        {"evaluation": evaluation, "may_manage": evaluation.may_manage(request.user)},
    )


def _evaluation(pk: int) -> Evaluation:
    return get_object_or_404(Evaluation.objects.select_related("suite"), pk=pk)


evaluation_retry, evaluation_cancel = run_action_views(_evaluation)
