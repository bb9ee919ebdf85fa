"""Pages of minimal-pair sets: list (search, tags), a set's page with its pairs side by
side, upload, and the TSV download. Thin: reads from suites.minimal_pairs.sets, writes through
its import service."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.files.uploadedfile import UploadedFile
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from gym.downloads import attachment
from suites.catalog import COMMON_SORT_LABELS, ListQuery, gym_data_or_404, list_context
from suites.catalog_services import can_change
from suites.forms import PairSetUploadForm
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet

SETS_PER_PAGE = 50
PAIRS_PER_PAGE = 50


def pair_set_list(request: HttpRequest) -> HttpResponse:
    query = ListQuery.from_page(request.GET)
    sets = pair_sets.pair_set_list(q=query.q, tag=query.tag, sort=query.sort)
    page = Paginator(sets, SETS_PER_PAGE).get_page(request.GET.get("page"))
    sorts = [*COMMON_SORT_LABELS, ("pairs", "Most pairs")]
    return render(
        request,
        "suites/minimal_pairs/pair_set_list.html",
        list_context(query, page=page, sorts=sorts, list_url=reverse("suites:pair_sets")),
    )


def pair_set_detail(request: HttpRequest, name: str) -> HttpResponse:
    pair_set = gym_data_or_404(MinimalPairSet, name, noun="minimal-pair set")
    # Page over pair numbers; the rows of one page come from one range query.
    page = Paginator(range(pair_set.pair_count), PAIRS_PER_PAGE).get_page(request.GET.get("page"))
    rows = pair_sets.pair_rows(pair_set, start=page.start_index() - 1, stop=page.end_index())
    return render(
        request,
        "suites/minimal_pairs/pair_set_detail.html",
        {
            "pair_set": pair_set,
            "tags": list(pair_set.tags.all()),
            "page": page,
            "rows": rows,
            "condition_columns": pair_set.condition_columns,
            "can_change": can_change(request.user, pair_set),
        },
    )


@login_required
def pair_set_upload(request: HttpRequest) -> HttpResponse:
    form = PairSetUploadForm(request.POST or None, request.FILES or None)
    return _upload_page(
        request,
        form,
        None,
        lambda upload: pair_sets.minimal_pair_set_import(
            data=upload.read(),
            filename=upload.name or "",
            name=form.cleaned_data["name"],
            owner=request.user,
            description=form.cleaned_data["description"],
            tags=form.cleaned_data["tags"],
            drop_incomplete_pairs=form.cleaned_data["drop_incomplete_pairs"],
            file_format=form.cleaned_data["file_format"],
        ),
    )


@login_required
def pair_set_replace(request: HttpRequest, name: str) -> HttpResponse:
    """A new file for an existing set (owner or staff); name, description and tags come
    prefilled with the set's own."""
    pair_set = gym_data_or_404(MinimalPairSet, name, noun="minimal-pair set")
    if not can_change(request.user, pair_set):
        return HttpResponseForbidden("Only the set's owner (or staff) may replace it.")
    initial = {
        "name": pair_set.name,
        "description": pair_set.description,
        "tags": ", ".join(t.name for t in pair_set.tags.all()),
    }
    form = PairSetUploadForm(request.POST or None, request.FILES or None, initial=initial)
    return _upload_page(
        request,
        form,
        pair_set,
        lambda upload: pair_sets.minimal_pair_set_replace(
            pair_set=pair_set,
            user=request.user,
            data=upload.read(),
            filename=upload.name or "",
            name=form.cleaned_data["name"],
            description=form.cleaned_data["description"],
            tags=form.cleaned_data["tags"],
            drop_incomplete_pairs=form.cleaned_data["drop_incomplete_pairs"],
            file_format=form.cleaned_data["file_format"],
        ),
    )


def _upload_page(
    request: HttpRequest,
    form: PairSetUploadForm,
    pair_set: MinimalPairSet | None,
    write: Callable[[UploadedFile], pair_sets.PairSetReport],
) -> HttpResponse:
    """The upload form, for a new set or to replace `pair_set`: `write` saves the file."""
    context = {"form": form, "pair_set": pair_set, "max_bytes": settings.GYM_MAX_UPLOAD_BYTES}
    if request.method == "POST" and form.is_valid():
        try:
            report = write(form.cleaned_data["file"])
        except pair_sets.PairSetInvalid as invalid:
            return render(
                request, "suites/minimal_pairs/pair_set_upload.html", {**context, "errors": invalid.errors},
                status=400,
            )  # fmt: skip
        _report_message(request, report, replaced=pair_set is not None)
        return redirect(report.pair_set)
    status = 400 if form.errors else 200
    return render(request, "suites/minimal_pairs/pair_set_upload.html", context, status=status)


def _report_message(request: HttpRequest, report: pair_sets.PairSetReport, replaced: bool) -> None:
    saved = report.pair_set
    if not report.changed:
        messages.info(
            request, f"Nothing changed: the file holds the same content as “{saved.name}”."
        )
        return
    verb = "Replaced the content of" if replaced else "Imported"
    messages.success(
        request,
        f"{verb} “{saved.name}”: {saved.pair_count} pairs, {saved.sentence_count} sentences "
        f"(format: {report.source_format}).",
    )


def pair_set_download(request: HttpRequest, name: str) -> HttpResponse:
    pair_set = get_object_or_404(MinimalPairSet, name=name)
    return attachment(
        pair_sets.pair_set_export(pair_set),
        "text/tab-separated-values; charset=utf-8",
        f"{_file_name(pair_set.name)}.tsv",
    )


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:100] or "pairs"
