"""Pages of training runs: the request form, one run's page (progress, loss curve,
checkpoints, learning curves), cancel and retry, and the learning curves as CSV / JSON."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from evaluations.runs import lifecycle as runs
from evaluations.runs.views import request_form_page, run_action_views
from evaluations.training import corpus_check, selectors, services, stored
from evaluations.training import series as series_services
from evaluations.training.forms import SeriesEvaluateForm, SeriesRegisterForm, TrainingRequestForm
from evaluations.training.models import ModelSeries, TrainingRun
from gym import artifacts
from suites.corpora.models import Corpus

# The corpora the Training page lists to train on (the Corpora page lists them all).
CORPORA_LISTED = 50


def _run(pk: int) -> TrainingRun:
    run = TrainingRun.objects.select_related(
        "model", "corpus", "requested_by", "base_model", "tokenizer_model", "validation_corpus"
    ).filter(pk=pk)
    found = run.first()
    if found is None:
        raise Http404(f"No training run {pk}.")
    return found


@login_required
def training_request(request: HttpRequest) -> HttpResponse:
    initial = {"corpus": request.GET.get("corpus", "")}
    form = TrainingRequestForm(request.POST or None, initial=initial)

    def ask(data: dict[str, Any]) -> HttpResponse:
        try:
            run = services.training_request(
                corpus=data["corpus"],
                name=data["name"],
                kind=data["kind"],
                options=form.options(),
                suites=list(data["suites"]),
                tags=[tag.name for tag in data["tags"]],
                pair_sets=list(data["pair_sets"]),
                probing_tasks=list(data["probing_tasks"]),
                threshold=data["threshold"],
                validation_corpus=data.get("validation_corpus"),
                user=request.user,
            )
        except runs.BrokerUnavailable as down:
            messages.error(request, str(down))
            return redirect("evaluations:training_runs")
        messages.success(request, f"Queued the training of {run.model.display_name}.")
        return redirect(run)

    return request_form_page(
        request,
        form,
        "evaluations/training/request.html",
        ask,
        invalid=(services.TrainingRequestInvalid,),
    )


def training_run(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run(pk)
    curves = selectors.learning_curves(run, threshold=_threshold(request, run))
    return render(
        request,
        "evaluations/training/run.html",
        {
            "run": run,
            "may_manage": run.may_manage(request.user),
            "checkpoints": selectors.checkpoint_rows(run),
            "disk": run.disk_bytes,
            "removed": sum(1 for c in run.checkpoints if c.get("removed")),
            "curves": curves,
            "plot": {"loss": selectors.loss_curves(run), "learning": curves},
            "suites": curves["suites"],
            "check": corpus_check.run_check(run),
        },
    )


def training_runs(request: HttpRequest) -> HttpResponse:
    listed = TrainingRun.objects.select_related("model", "corpus", "requested_by")[:200]
    corpora = Corpus.objects.order_by("name")
    return render(
        request,
        "evaluations/training/run_list.html",
        {"runs": listed, "corpora": corpora[:CORPORA_LISTED], "more": corpora.count()},
    )


def _threshold(request: HttpRequest, run: TrainingRun) -> float:
    raw = request.GET.get("threshold", "")
    try:
        value = float(raw) if raw else run.threshold
    except ValueError:
        return run.threshold
    return value if 0.0 < value <= 1.0 else run.threshold


def training_curves_csv(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run(pk)
    text = selectors.curves_csv(selectors.learning_curves(run, threshold=_threshold(request, run)))
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{run.model.name}.curves.csv"'
    return response


def training_curves_json(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run(pk)
    curves = selectors.learning_curves(run, threshold=_threshold(request, run))
    body = {"model": run.model.name, "corpus": run.corpus.name, **curves}
    response = HttpResponse(json.dumps(body, indent=2) + "\n", content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{run.model.name}.curves.json"'
    return response


def training_loss_log(request: HttpRequest, pk: int) -> FileResponse:
    """The whole loss log (every step's training loss and every validation loss), one
    JSON object a line, as the worker wrote it, from the artifact store: the finished
    model's copy, or while the run trains the copy its worker last stored. The page and
    the API show a thinned one."""
    run = _run(pk)
    folder = services.store_folder(run)
    keys = [stored.model_loss_key(folder), stored.loss_key(folder)] if folder else []
    key = next((k for k in keys if artifacts.exists(k)), None)
    if key is None:
        raise Http404(f"Training run {pk} has no loss log in the artifact store (yet).")
    return FileResponse(
        artifacts.open_file(key),
        as_attachment=True,
        filename=f"{run.model.name}.loss.jsonl",
        content_type="application/jsonl",
    )


training_retry, training_cancel = run_action_views(
    _run,
    cancelled="Cancelled: the worker stops at its next step.",
)


# Model series (docs/series.md): a training run's learning curves for checkpoints trained
# elsewhere.

AXIS = {"tokens": "Tokens seen", "words": "Words seen", "steps": "Training step"}


def _series(name: str) -> ModelSeries:
    found = ModelSeries.objects.filter(name=name).first()
    if found is None:
        raise Http404(f"No model series {name!r}.")
    return found


def _series_threshold(request: HttpRequest, series: ModelSeries) -> float:
    raw = request.GET.get("threshold", "")
    try:
        value = float(raw) if raw else series.threshold
    except ValueError:
        return series.threshold
    return value if 0.0 < value <= 1.0 else series.threshold


def model_series_list(request: HttpRequest) -> HttpResponse:
    listed = ModelSeries.objects.prefetch_related("members")[:500]
    return render(request, "evaluations/training/series_list.html", {"series_list": listed})


def model_series(request: HttpRequest, name: str) -> HttpResponse:
    return _series_page(request, _series(name), SeriesEvaluateForm())


def _series_page(
    request: HttpRequest, series: ModelSeries, form: SeriesEvaluateForm, status: int = 200
) -> HttpResponse:
    curves = selectors.series_curves(series, threshold=_series_threshold(request, series))
    curves["axis"] = AXIS.get(series.unit, "Tokens seen")
    seeds = selectors.seed_curves(series)
    curves["seeds"] = seeds
    members = list(series.members.select_related("model").order_by("position"))
    return render(
        request,
        "evaluations/training/series.html",
        {
            "series": series,
            "members": members,
            "checkpoints": series.checkpoints(),
            "curves": curves,
            "axis": curves["axis"],
            "seeds": seeds,
            "plot": {"loss": {"train": [], "validation": []}, "learning": curves},
            "form": form,
        },
        status=status,
    )


def _field_errors(form: Any, errors: dict[str, str]) -> None:
    """The service's messages (the API's) at their fields: `revisions.0` at revisions; a
    key the form has no field for (a member's) above the form."""
    for key, message in errors.items():
        field = key.split(".", 1)[0]
        form.add_error(field if field in form.fields else None, message)


@login_required
def model_series_register(request: HttpRequest) -> HttpResponse:
    """The API's series registration as a form (docs/series.md, "From the site")."""
    form = SeriesRegisterForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                made = series_services.series_register(
                    name=data["name"],
                    display_name=data["display_name"],
                    folder=data["folder"],
                    source=data["source"],
                    revisions=data["revisions"],
                    pattern=data["pattern"],
                    steps=data["steps"],
                    tokens_per_step=data["tokens_per_step"],
                    group=data["group"],
                    threshold=data["threshold"],
                    user=request.user,
                )
            except series_services.SeriesInvalid as refused:
                _field_errors(form, refused.errors)
            else:
                count = made.members.count()
                messages.success(
                    request, f"Registered the series {made.display_name}: {count} checkpoints."
                )
                return redirect(made)
    return render(
        request, "evaluations/training/series_register.html", {"form": form}, status=status
    )


@login_required
@require_POST
def model_series_evaluate(request: HttpRequest, name: str) -> HttpResponse:
    """The API's series evaluation as a form on the series' page."""
    series = _series(name)
    form = SeriesEvaluateForm(request.POST)
    status = 400
    if form.is_valid():
        data = form.cleaned_data
        try:
            asked = series_services.series_evaluate(
                series=series,
                suites=list(data["suites"]),
                tags=[tag.name for tag in data["tags"]],
                pair_sets=list(data["pair_sets"]),
                probing_tasks=list(data["probing_tasks"]),
                subset=data["subset"],
                user=request.user,
            )
        except series_services.SeriesInvalid as refused:
            _field_errors(form, refused.errors)
        except runs.BrokerUnavailable as down:
            messages.error(request, str(down))
            status = 503
        else:
            benchmarks = (
                len(asked["suites"]) + len(asked["pair_sets"]) + len(asked["probing_tasks"])
            )
            sample = data["subset"]
            on = f", each on a subset of {sample.size:,} (seed {sample.seed})" if sample else ""
            messages.success(
                request,
                f"Asked for the runs of {len(asked['models'])} checkpoints on {benchmarks} "
                f"benchmark(s){on}, checkpoint by checkpoint; the curves fill in as they "
                "finish.",
            )
            return redirect(series)
    return _series_page(request, series, form, status=status)


def model_series_csv(request: HttpRequest, name: str) -> HttpResponse:
    series = _series(name)
    curves = selectors.series_curves(series, threshold=_series_threshold(request, series))
    response = HttpResponse(selectors.curves_csv(curves), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{series.name}.curves.csv"'
    return response
