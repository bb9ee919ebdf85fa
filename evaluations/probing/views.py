"""Pages and downloads of probing runs: asking for runs, one run's page (progress, then
its layer curve, confusion matrix and downloads) and the probing leaderboard's CSV."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods

from evaluations.boards import leaderboard as boards
from evaluations.models import ProbingRun
from evaluations.probing import exports as probing_exports
from evaluations.probing import selectors as probing_selectors
from evaluations.probing import services as probing_services
from evaluations.probing.forms import ProbingRunRequestForm
from evaluations.runs.views import (
    MAX_ID,
    request_form_page,
    requested,
    run_action_views,
)
from gym.accounts import signed_in
from gym.downloads import attachment
from suites.models import ProbingTask


def _run(pk: int) -> ProbingRun:
    return get_object_or_404(
        ProbingRun.objects.select_related("model", "task", "frequency_corpus"), pk=pk
    )


def _done_run(pk: int) -> ProbingRun:
    run = _run(pk)
    if run.status != ProbingRun.Status.DONE:
        raise Http404("This probing run has no results yet.")
    return run


@login_required
def probing_request(request: HttpRequest) -> HttpResponse:
    """The request form (also embedded in each task's page, which posts here)."""
    initial = {
        "task": request.GET.get("task", ""),
        "models": request.GET.getlist("model"),
        "frequency_corpus": request.GET.get("frequency_corpus", ""),
    }
    form = ProbingRunRequestForm(request.POST or None, initial=initial)

    def ask(data: dict[str, Any]) -> HttpResponse:
        outcome = probing_services.probing_run_request(
            models=data["models"],
            task=data["task"],
            pooling=data["pooling"],
            probe=data["probe"],
            seeds=data["seeds"],
            mdl=data["mdl"],
            frequency_corpus=data.get("frequency_corpus"),
            user=request.user,
        )
        return requested(
            request,
            created=outcome.created,
            existing=outcome.existing,
            asked=outcome.runs,
            noun="probing run",
            same="with the same task content and options",
            back=data["task"],
        )

    return request_form_page(
        request,
        form,
        "evaluations/probing/probing_request.html",
        ask,
        invalid=(probing_services.ProbingRequestInvalid,),
    )


def _control_id(request: HttpRequest) -> int | None:
    raw = request.GET.get("control", "").strip()
    if raw.isascii() and raw.isdigit() and int(raw) <= MAX_ID:
        return int(raw)
    return None


def probing_run(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run(pk)
    context = {"run": run, "may_manage": run.may_manage(request.user)}
    if run.status == ProbingRun.Status.DONE:
        context["page"] = probing_selectors.result_page(run, control_id=_control_id(request))
    return render(request, "evaluations/probing/probing_run.html", context)


probing_retry, probing_cancel = run_action_views(_run)


def _filename(run: ProbingRun, suffix: str) -> str:
    task = slugify(run.task.name) or "task"
    return f"{task}__{run.model.name}__{run.pooling}-{run.probe}.{suffix}"


def probing_run_json(request: HttpRequest, pk: int) -> HttpResponse:
    run = _done_run(pk)
    text = json.dumps(probing_exports.run_document(run), indent=2, ensure_ascii=False)
    return attachment(text + "\n", "application/json; charset=utf-8", _filename(run, "json"))


def probing_run_csv(request: HttpRequest, pk: int) -> HttpResponse:
    run = _done_run(pk)
    return attachment(
        probing_exports.run_csv(run), "text/csv; charset=utf-8", _filename(run, "layers.csv")
    )


def probing_board_from(request: HttpRequest) -> probing_selectors.ProbingBoard:
    """The probing board as the query string asks for it: pooling, probe, and
    `training=<run id>` (that run's checkpoints as the rows; 404 for a run that is not
    there); staff also see hidden models."""
    return probing_selectors.probing_board(
        pooling=request.GET.get("pooling", "").strip(),
        probe=request.GET.get("probe", "").strip(),
        include_hidden=bool(request.user.is_staff),
        training=boards.board_training(request),
    )


def probing_leaderboard_csv(request: HttpRequest) -> HttpResponse:
    board = probing_board_from(request)
    name = f"probing-leaderboard-{board.pooling}-{board.probe}.csv"
    return attachment(probing_exports.board_csv(board), "text/csv; charset=utf-8", name)


@login_required
@require_http_methods(["GET", "POST"])
def probing_annotate(request: HttpRequest, name: str) -> HttpResponse:
    """One te sentence at a time, its label hidden; the answer is kept and the next one
    shown. A bad answer is a 400 with the page and the reason."""
    task = get_object_or_404(ProbingTask, name=name)
    error = ""
    if request.method == "POST":
        raw = request.POST.get("instance", "").strip()
        try:
            if not (raw.isascii() and raw.isdigit() and int(raw) <= MAX_ID):
                raise probing_services.AnnotationInvalid("choose a sentence from this page")
            probing_services.probing_annotation_save(
                task=task,
                instance_id=int(raw),
                label=request.POST.get("label", ""),
                user=signed_in(request.user),
            )
            return redirect("evaluations:probing_annotate", name=task.name)
        except probing_services.AnnotationInvalid as exc:
            error = str(exc)
    state = probing_selectors.annotation_state(task, request.user)
    context = {
        "task": task,
        "state": state,
        "choices": probing_selectors.label_choices(task),
        "error": error,
        "human": probing_selectors.human_accuracy(task) if state.next is None else None,
    }
    return render(
        request, "evaluations/probing/probing_annotate.html", context, status=400 if error else 200
    )
