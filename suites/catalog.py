"""What the three kinds of test data (suites, minimal-pair sets, probing tasks) share in
their lists: the query parameters, the search / tag / sort filter and the sort choices.
Pages and the API of every kind read their lists through here, so that a change to how
lists are searched or sorted is made once."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django import forms
from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist
from django.core.files.uploadedfile import UploadedFile
from django.db.models import Model, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from suites.catalog_services import DataInvalid
from suites.models import Tag

M = TypeVar("M", bound=Model)

# The sorts every kind offers; each kind adds its own (most items, pairs, instances…).
COMMON_SORTS: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "-name": ("-name",),
    "newest": ("-created_at",),
}
COMMON_SORT_LABELS: list[tuple[str, str]] = [
    ("name", "Name A–Z"),
    ("-name", "Name Z–A"),
    ("newest", "Newest"),
]


@dataclass(frozen=True)
class ListQuery:
    """A list request's search text, tag and sort key, as the page or the API got them."""

    q: str = ""
    tag: str = ""
    sort: str = "name"

    @classmethod
    def from_page(cls, params: Mapping[str, Any], *, tag: str | None = None) -> ListQuery:
        """The pages' parameters: q, tag, sort (`tag` from the URL wins over ?tag=)."""
        return cls(
            q=str(params.get("q", "")).strip(),
            tag=tag or str(params.get("tag", "")).strip(),
            sort=str(params.get("sort", "name")),
        )

    @classmethod
    def from_api(cls, params: Mapping[str, Any]) -> ListQuery:
        """The API's parameters: search (or q, the pages' name for it), tag, ordering."""
        return cls(
            q=str(params.get("search") or params.get("q") or "").strip(),
            tag=str(params.get("tag", "")).strip(),
            sort=str(params.get("ordering", "name")),
        )


def catalog_filter(
    queryset: QuerySet[M],
    *,
    q: str = "",
    tag: str = "",
    sort: str = "name",
    sorts: Mapping[str, Sequence[str]],
    include_archived: bool = False,
) -> QuerySet[M]:
    """`queryset` narrowed to names or descriptions containing `q` and to `tag`, without
    archived rows (for kinds that archive), ordered by `sorts[sort]` and then by name
    (an unknown sort key sorts by name)."""
    fields = {f.name for f in queryset.model._meta.get_fields()}
    if not include_archived and "archived_at" in fields:
        queryset = queryset.filter(archived_at__isnull=True)
    queryset = queryset.select_related("owner").prefetch_related("tags")
    if q:
        queryset = queryset.filter(Q(name__icontains=q) | Q(description__icontains=q))
    if tag:
        # Tag names are unique, so this join adds no duplicate rows.
        queryset = queryset.filter(tags__name=tag)
    return queryset.order_by(*sorts.get(sort, sorts["name"]), "name")


def list_context(
    query: ListQuery,
    *,
    page: Any,
    sorts: list[tuple[str, str]],
    list_url: str,
    tags_to_list: bool = True,
) -> dict[str, Any]:
    """What every list page's template reads (suites/_catalog_list.html and the filter
    form among it). `list_url`: the list's own page; a row's tags lead to it filtered by
    the tag when `tags_to_list`, else to each tag's page."""
    return {
        "list_url": list_url,
        "tag_url": list_url if tags_to_list else "",
        "page": page,
        "q": query.q,
        "tag": query.tag,
        "sort": query.sort,
        "sorts": sorts,
        "all_tags": Tag.objects.all(),
    }


def gym_data_or_404(model: type[M], name: str, *, noun: str) -> M:
    """The suite, minimal-pair set or probing task named `name` (with its owner), or a
    404 that says what was not found."""
    try:
        return model._default_manager.select_related("owner").get(name=name)
    except ObjectDoesNotExist:  # model.DoesNotExist, the only one .get() raises here
        raise Http404(f"No {noun} named {name!r}.") from None


def upload_page(
    request: HttpRequest,
    form: forms.Form,
    *,
    template: str,
    max_bytes: int,
    save: Callable[[UploadedFile], tuple[str, str]],
    limits: dict[str, int] | None = None,
) -> HttpResponse:
    """The upload page of a kind whose form has a `file`: the form (400 while it has
    errors); once it is valid, `save(upload)` imports the file and gives the message to
    show and the address to go to, or raises DataInvalid, whose errors the page lists
    (400, nothing saved). `limits`: the kind's other limits, for its page to state."""
    context: dict[str, Any] = {"form": form, "max_bytes": max_bytes, "limits": limits or {}}
    if request.method == "POST" and form.is_valid():
        try:
            message, url = save(form.cleaned_data["file"])
        except DataInvalid as invalid:
            context["errors"] = invalid.errors
            return render(request, template, context, status=400)
        messages.success(request, message)
        return redirect(url)
    return render(request, template, context, status=400 if form.errors else 200)
