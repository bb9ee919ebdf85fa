"""Pages that start or move minimal-pair evaluations: asking for models on sets (also
embedded in each set's page, which posts here), retry, cancel, and importing an
NLPScholar predictions TSV as a model's results. The result page is `result_views`'."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from evaluations.language_models.registry import ModelRegistrationError
from evaluations.minimal_pairs import services as pair_services
from evaluations.minimal_pairs.forms import PairRequestForm, PredictionsImportForm
from evaluations.models import PairEvaluation
from evaluations.runs import lifecycle as runs
from evaluations.runs.views import (
    request_form_page,
    requested,
    run_action_views,
)
from suites.models import MinimalPairSet


class _PredictionsImportForm(PredictionsImportForm):
    # The same choice as an upload's "Leave out incomplete pairs", for predictions written
    # for the whole file when the set left some pairs out.
    drop_unknown_rows = forms.BooleanField(
        required=False,
        label="Leave out rows whose sentid is not in the set",
        help_text="For a set uploaded with incomplete pairs left out: rows of sentences the set "
        "does not have are left out with a warning that counts them, instead of refusing the "
        "file.",
    )


@login_required
def pair_request(request: HttpRequest) -> HttpResponse:
    initial = {"models": request.GET.getlist("model"), "pair_sets": request.GET.getlist("pair_set")}
    form = PairRequestForm(request.POST or None, initial=initial)

    def ask(data: dict[str, Any]) -> HttpResponse:
        outcome = pair_services.pair_evaluation_request(
            user=request.user,
            models=data["models"],
            pair_sets=data["pair_sets"],
            word_probability=data["word_probability"],
            metric=data.get("metric") or None,
        )
        return requested(
            request,
            created=outcome.created,
            existing=outcome.existing,
            asked=outcome.evaluations,
            noun="minimal-pair evaluation",
            same="on the same set content",
            back=data["pair_sets"][0],
        )

    return request_form_page(request, form, "evaluations/minimal_pairs/pair_request.html", ask)


def _evaluation(pk: int) -> PairEvaluation:
    return get_object_or_404(PairEvaluation.objects.select_related("model", "pair_set"), pk=pk)


pair_retry, pair_cancel = run_action_views(_evaluation)


@login_required
def pair_import(request: HttpRequest, name: str) -> HttpResponse:
    """Import NLPScholar predictions as a model's results on this set (owner or staff)."""
    pair_set = get_object_or_404(MinimalPairSet, name=name)
    if not pair_services.may_import(request.user, pair_set):
        raise PermissionDenied("Only the set's owner or staff may import results onto it.")
    form = _PredictionsImportForm(request.POST or None, request.FILES or None)
    context = {"form": form, "pair_set": pair_set, "max_bytes": settings.GYM_MAX_UPLOAD_BYTES}
    if request.method != "POST":
        return render(request, "evaluations/minimal_pairs/pair_import.html", context)
    if not form.is_valid():
        return render(request, "evaluations/minimal_pairs/pair_import.html", context, status=400)
    return _import_upload(request, form, pair_set, context)


def _import_upload(
    request: HttpRequest, form: _PredictionsImportForm, pair_set: MinimalPairSet, context: dict
) -> HttpResponse:
    """The import of a valid form: the run's page, or the form again with what is wrong."""
    page = "evaluations/minimal_pairs/pair_import.html"
    upload = form.cleaned_data["file"]
    if upload.size > settings.GYM_MAX_UPLOAD_BYTES:
        form.add_error("file", "The file is larger than the upload limit.")
        return render(request, page, context, status=413)
    try:
        evaluation = pair_services.pair_predictions_import(
            pair_set=pair_set,
            model_name=form.cleaned_data["model"],
            register=form.cleaned_data["register"],
            display_name=form.cleaned_data["display_name"],
            file_model=form.cleaned_data["file_model"],
            drop_unknown_rows=form.cleaned_data["drop_unknown_rows"],
            data=upload.read(),
            user=request.user,
        )
    except pair_services.PredictionsInvalid as invalid:
        return render(request, page, {**context, "errors": invalid.errors}, status=400)
    except ModelRegistrationError as invalid:
        form.add_error("model", "; ".join(invalid.errors.values()))
        return render(request, page, context, status=400)
    except runs.RunConflict as conflict:
        form.add_error(None, str(conflict))
        return render(request, page, context, status=409)
    messages.success(
        request, f"Imported the predictions of {evaluation.model.display_name} on {pair_set.name}."
    )
    for warning in (evaluation.diagnostics or {}).get("import_warnings") or []:
        messages.warning(request, f"Import: {warning}.")
    return redirect(evaluation)
