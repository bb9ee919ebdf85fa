from __future__ import annotations

import json
from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from gym.accounts import signed_in
from gym.downloads import attachment
from suites import catalog_services, formats
from suites.catalog import COMMON_SORT_LABELS, ListQuery, gym_data_or_404, list_context
from suites.forms import SuiteMetaForm, SuiteUploadForm
from suites.models import Suite, Tag
from suites.syntaxgym import selectors, services

SUITES_PER_PAGE = 25
ITEMS_PER_PAGE = 50


def suite_list(request: HttpRequest, tag: str | None = None) -> HttpResponse:
    query = ListQuery.from_page(request.GET, tag=tag)
    tag_obj = None
    if tag:
        tag_obj = get_object_or_404(Tag, name=tag)
    suites = selectors.suite_list(q=query.q, tag=query.tag, sort=query.sort)
    page = Paginator(suites, SUITES_PER_PAGE).get_page(request.GET.get("page"))
    sorts = [*COMMON_SORT_LABELS, ("updated", "Recently updated"), ("items", "Most items")]
    return render(
        request,
        "suites/syntaxgym/suite_list.html",
        {
            **list_context(
                query, page=page, sorts=sorts, list_url=reverse("suites:list"), tags_to_list=False
            ),
            "tag_obj": tag_obj,
        },
    )


def tag_list(request: HttpRequest) -> HttpResponse:
    return render(request, "suites/syntaxgym/tag_list.html", {"tags": selectors.tag_counts()})


def _suite_or_404(name: str) -> Suite:
    return gym_data_or_404(Suite, name, noun="suite")


def suite_detail(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_or_404(name)
    regions = list(suite.regions.all())
    region_names = {r.number: r.name for r in regions}
    page = Paginator(suite.items.all(), ITEMS_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "suites/syntaxgym/suite_detail.html",
        {
            "suite": suite,
            "regions": regions,
            "region_names": region_names,
            "conditions": list(suite.conditions.all()),
            "predictions": list(suite.predictions.all()),
            "tags": list(suite.tags.all()),
            "page": page,
            "can_change": catalog_services.can_change(request.user, suite),
            "extra_meta": json.dumps(suite.extra_meta, indent=2, ensure_ascii=False)
            if suite.extra_meta
            else "",
        },
    )


def _import_errors_response(
    request: HttpRequest, template: str, context: dict, errors: list[formats.SuiteError]
) -> HttpResponse:
    context = {**context, "errors": errors}
    return render(request, template, context, status=400)


@login_required
def suite_upload(request: HttpRequest) -> HttpResponse:
    return _upload_page(
        request,
        None,
        lambda form: services.suite_import(
            source=form.source(),
            owner=signed_in(request.user),
            rename_if_taken=form.cleaned_data["rename"],
            extra_tags=form.cleaned_data["tags"],
        ),
    )


# A file whose name is taken is put into the retry form's text box up to this size, so
# that one click saves it under the free name (larger ones are chosen again).
RETRY_TEXT_MAX_BYTES = 2 * 1024 * 1024


def _upload_page(
    request: HttpRequest,
    suite: Suite | None,
    write: Callable[[SuiteUploadForm], services.ImportReport],
) -> HttpResponse:
    """The upload form, for a new suite or to replace `suite`: `write` saves the upload."""
    form = SuiteUploadForm(request.POST or None, request.FILES or None, new=suite is None)
    context = {"form": form, "suite": suite, "max_bytes": settings.GYM_MAX_UPLOAD_BYTES}
    if request.method == "POST" and form.is_valid():
        try:
            report = write(form)
        except services.SuiteInvalid as invalid:
            if suite is None and invalid.taken_name:
                context.update(_rename_offer(request, form, invalid.taken_name))
            return _import_errors_response(
                request, "suites/syntaxgym/suite_upload.html", context, invalid.errors
            )
        _report_messages(request, report)
        return redirect(report.suite)
    return render(
        request, "suites/syntaxgym/suite_upload.html", context, status=400 if form.errors else 200
    )


def _rename_offer(request: HttpRequest, form: SuiteUploadForm, taken: str) -> dict:
    """The form again, ticked to rename, holding the suite's text where it can (pasted,
    or a file small enough), so that one click saves it under `free_name`."""
    data = request.POST.copy()
    data["rename"] = "on"
    upload = form.cleaned_data.get("file")
    text_kept = not upload
    if upload and upload.size is not None and upload.size <= RETRY_TEXT_MAX_BYTES:
        upload.seek(0)
        try:
            data["text"] = upload.read().decode("utf-8-sig")
            text_kept = True
        except UnicodeDecodeError:
            pass
    offer = {"form": SuiteUploadForm(data)} if text_kept else {}
    return {
        **offer,
        "taken_name": taken,
        "free_name": catalog_services.free_name(Suite, taken),
        "text_kept": text_kept,
    }


def _report_messages(request: HttpRequest, report: services.ImportReport) -> None:
    verb = "Imported" if report.created else "Replaced"
    messages.success(
        request,
        f"{verb} “{report.suite.name}”: {report.suite.item_count} items, "
        f"{report.suite.condition_count} conditions, {report.suite.region_count} regions "
        f"(format: {report.source_format}).",
    )
    if report.renamed_from:
        messages.info(
            request,
            f"A suite named “{report.renamed_from}” exists already, so this one was saved "
            f"as “{report.suite.name}”.",
        )
    for warning in report.warnings:
        messages.warning(request, warning)


@login_required
def suite_replace(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_or_404(name)
    if not catalog_services.can_change(request.user, suite):
        return HttpResponseForbidden("Only the suite's owner (or staff) may replace it.")
    return _upload_page(
        request,
        suite,
        lambda form: services.suite_replace(suite=suite, user=request.user, source=form.source()),
    )


@login_required
def suite_edit(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_or_404(name)
    if not catalog_services.can_change(request.user, suite):
        return HttpResponseForbidden("Only the suite's owner (or staff) may edit it.")
    if request.method == "POST":
        form = SuiteMetaForm(request.POST)
        if form.is_valid():
            services.suite_update_meta(suite=suite, user=request.user, **form.cleaned_data)
            messages.success(request, "Saved.")
            return redirect(suite)
    else:
        form = SuiteMetaForm(
            initial={
                "description": suite.description,
                "reference": suite.reference,
                "author": suite.author,
                "comment": suite.comment,
                "tags": ", ".join(t.name for t in suite.tags.all()),
            }
        )
    return render(request, "suites/syntaxgym/suite_edit.html", {"form": form, "suite": suite})


@login_required
@require_http_methods(["GET", "POST"])
def suite_delete(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_or_404(name)
    if not catalog_services.can_change(request.user, suite):
        return HttpResponseForbidden("Only the suite's owner (or staff) may delete it.")
    if request.method == "POST":
        outcome = services.suite_delete(suite=suite, user=request.user)
        if outcome == "archived":
            messages.success(
                request,
                f"Archived “{name}”: it is gone from the lists; its results stay, "
                "on its page and on the models' pages.",
            )
        else:
            messages.success(request, f"Deleted “{name}”.")
        return redirect("suites:list")
    results, others = selectors.suite_results_count(suite)
    return render(
        request,
        "suites/syntaxgym/suite_delete.html",
        {"suite": suite, "results": results, "others_results": others},
    )


def _download_name(suite: Suite, ext: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in suite.name)
    return f"{safe}.{ext}"


def suite_download_json(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_or_404(name)
    body = formats.to_json_text(selectors.suite_canonical(suite))
    return _download(suite, "json", body, "application/json; charset=utf-8")


def suite_download_csv(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_or_404(name)
    body = formats.to_csv_text(selectors.suite_canonical(suite))
    return _download(suite, "csv", body, "text/csv; charset=utf-8")


def _download(suite: Suite, ext: str, body: str, content_type: str) -> HttpResponse:
    return attachment(body, content_type, _download_name(suite, ext))
