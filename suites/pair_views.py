"""Pages of minimal-pair sets: list (search, tags), a set's page with its pairs side by
side, upload, and the TSV download. Thin: reads from suites.pair_sets, writes through
its import service."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from gym.downloads import attachment
from suites import pair_sets
from suites.catalog import COMMON_SORT_LABELS, ListQuery, gym_data_or_404, list_context
from suites.forms import PairSetUploadForm
from suites.models import MinimalPairSet

SETS_PER_PAGE = 50
PAIRS_PER_PAGE = 50


def pair_set_list(request: HttpRequest) -> HttpResponse:
    query = ListQuery.from_page(request.GET)
    sets = pair_sets.pair_set_list(q=query.q, tag=query.tag, sort=query.sort)
    page = Paginator(sets, SETS_PER_PAGE).get_page(request.GET.get("page"))
    sorts = [*COMMON_SORT_LABELS, ("pairs", "Most pairs")]
    return render(request, "suites/pair_set_list.html", list_context(query, page=page, sorts=sorts))


def pair_set_detail(request: HttpRequest, name: str) -> HttpResponse:
    pair_set = gym_data_or_404(MinimalPairSet, name, noun="minimal-pair set")
    # Page over pair numbers; the rows of one page come from one range query.
    page = Paginator(range(pair_set.pair_count), PAIRS_PER_PAGE).get_page(request.GET.get("page"))
    rows = pair_sets.pair_rows(pair_set, start=page.start_index() - 1, stop=page.end_index())
    return render(
        request,
        "suites/pair_set_detail.html",
        {
            "pair_set": pair_set,
            "tags": list(pair_set.tags.all()),
            "page": page,
            "rows": rows,
            "condition_columns": pair_set.condition_columns,
        },
    )


@login_required
def pair_set_upload(request: HttpRequest) -> HttpResponse:
    form = PairSetUploadForm(request.POST or None, request.FILES or None)
    context = {"form": form, "max_bytes": settings.GYM_MAX_UPLOAD_BYTES}
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            report = pair_sets.minimal_pair_set_import(
                data=upload.read(),
                filename=upload.name or "",
                name=form.cleaned_data["name"],
                owner=request.user,
                description=form.cleaned_data["description"],
                tags=form.cleaned_data["tags"].split(","),
            )
        except pair_sets.PairSetInvalid as invalid:
            return render(
                request, "suites/pair_set_upload.html", {**context, "errors": invalid.errors},
                status=400,
            )  # fmt: skip
        messages.success(
            request,
            f"Imported “{report.pair_set.name}”: {report.pair_set.pair_count} pairs, "
            f"{report.pair_set.sentence_count} sentences (format: {report.source_format}).",
        )
        return redirect(report.pair_set)
    status = 400 if form.errors else 200
    return render(request, "suites/pair_set_upload.html", context, status=status)


def pair_set_download(request: HttpRequest, name: str) -> HttpResponse:
    pair_set = get_object_or_404(MinimalPairSet, name=name)
    return attachment(
        pair_sets.pair_set_export(pair_set),
        "text/tab-separated-values; charset=utf-8",
        f"{_file_name(pair_set.name)}.tsv",
    )


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:100] or "pairs"
