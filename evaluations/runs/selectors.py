"""The list of runs of every kind (the Runs page, `GET /api/runs/` and each kind's list
endpoint): the filters of the query string, checked once, and the newest runs first in
a bounded number of queries whatever the page holds. Kinds come from the registry
(`evaluations.runs.lifecycle.KINDS`), so a new kind is listed without code here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import CharField, QuerySet, Value
from django.urls import reverse

from evaluations.models import LanguageModel, Run
from evaluations.runs import lifecycle as runs
from gym.errors import ApplicationError

RUNS_PER_PAGE = 50
YES = ("1", "true", "yes", "on")
NO = ("", "0", "false", "no", "off")
# What a row of the list reads (no results, snapshots or confusion matrices).
ROW_FIELDS = (
    "status",
    "enqueued",
    "attempt",
    "progress_done",
    "progress_total",
    "content_hash",
    "created_at",
    "started_at",
    "finished_at",
    *(f"model__{field}" for field in LanguageModel.SHOWN_FIELDS),
    "requested_by__username",
)


class RunFilterInvalid(ApplicationError):
    """A filter of the list has a value it cannot take; `param` names it."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param

    def error_list(self) -> list[dict[str, Any]]:
        return [{"code": self.code, "message": str(self), "path": f"$.{self.param}"}]


@dataclass(frozen=True)
class RunFilters:
    """What the list is narrowed to: `kinds` (all when no kind was asked), a status,
    a model, and the signed-in user's own requests (`mine`)."""

    kinds: tuple[str, ...]
    kind: str = ""
    status: str = ""
    model: LanguageModel | None = None
    mine: bool = False

    @property
    def narrowed(self) -> bool:
        return bool(self.kind or self.status or self.model or self.mine)


def run_filters(
    params: Mapping[str, str], *, include_hidden: bool = False, kinds: Sequence[str] = ()
) -> RunFilters:
    """The filters of a query string (kind, status, model, mine); RunFilterInvalid for a
    value that names nothing. `kinds`: the kinds an endpoint lists (one kind's own list
    takes no `kind`); all registered kinds when empty."""
    listed = tuple(kinds) or tuple(runs.KINDS)
    kind = params.get("kind", "").strip()
    if kind and len(listed) > 1:
        if kind not in listed:
            raise RunFilterInvalid(
                "kind", f"kind must be one of {', '.join(listed)}, not {kind[:40]!r}"
            )
        listed = (kind,)
    else:
        kind = ""
    status = params.get("status", "").strip()
    if status and status not in Run.Status.values:
        raise RunFilterInvalid(
            "status", f"status must be one of {', '.join(Run.Status.values)}, not {status[:40]!r}"
        )
    model = None
    name = params.get("model", "").strip()
    if name:
        models = LanguageModel.objects.all()
        if not include_hidden:
            models = models.filter(is_hidden=False)
        model = models.filter(name=name).first()
        if model is None:
            raise RunFilterInvalid("model", f"no model named {name[:100]!r}")
    mine = params.get("mine", "").strip().lower()
    if mine not in YES + NO:
        raise RunFilterInvalid("mine", f"mine must be 1 or 0 (true or false), not {mine[:40]!r}")
    return RunFilters(kinds=listed, kind=kind, status=status, model=model, mine=mine in YES)


def runs_filtered(
    queryset: QuerySet[Any], filters: RunFilters, *, user: Any, include_hidden: bool = False
) -> QuerySet[Any]:
    """One kind's runs narrowed by `filters` (also each kind's own API list uses it).
    `mine` for an anonymous user lists nothing: the views ask them to sign in first."""
    if filters.status:
        queryset = queryset.filter(status=filters.status)
    if filters.model is not None:
        queryset = queryset.filter(model=filters.model)
    if filters.mine:
        signed_in = user is not None and user.is_authenticated
        queryset = queryset.filter(requested_by=user) if signed_in else queryset.none()
    if not include_hidden:
        queryset = queryset.filter(model__is_hidden=False)
    return queryset


def run_keys(filters: RunFilters, *, user: Any, include_hidden: bool = False) -> QuerySet[Any]:
    """(kind, id, created_at) of every run listed, newest first: one query over every
    kind (a UNION), which pages slice and count."""
    parts = [
        runs_filtered(
            runs.KINDS[name].run_model.objects.all(),
            filters,
            user=user,
            include_hidden=include_hidden,
        )
        .annotate(run_kind=Value(name, output_field=CharField()))
        .values_list("run_kind", "pk", "created_at")
        .order_by()
        for name in filters.kinds
    ]
    keys = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    return keys.order_by("-created_at", "run_kind", "-pk")


@dataclass
class RunRow:
    """One run of the list, with its kind."""

    kind: runs.RunKind
    run: Any

    @property
    def benchmark(self) -> Any:
        return self.run.benchmark

    @property
    def api_url(self) -> str:
        """Where a page polls this run's progress ("" for a kind without one)."""
        return reverse(self.kind.api_detail, args=[self.run.pk]) if self.kind.api_detail else ""


def run_rows(keys: Iterable[tuple[str, int, Any]]) -> list[RunRow]:
    """The runs of `keys` (a page of `run_keys`), in that order, with their model,
    benchmark and requester: one query per kind on the page."""
    ids: dict[str, list[int]] = {}
    for kind, pk, _created in keys:
        ids.setdefault(kind, []).append(pk)
    found: dict[tuple[str, int], Any] = {}
    for name, pks in ids.items():
        run_kind = runs.KINDS[name]
        field = run_kind.run_model.benchmark_field
        fetched = (
            run_kind.run_model.objects.filter(pk__in=pks)
            # The plugin checks the lookup on the abstract Run; every kind has a model.
            .select_related("model", field, "requested_by")  # type: ignore[misc]
            .only(*ROW_FIELDS, f"{field}__name", f"{field}__content_hash")
        )
        for run in fetched:
            found[name, run.pk] = run
    return [
        RunRow(kind=runs.KINDS[name], run=found[name, pk])
        for name, pk, _created in keys
        if (name, pk) in found
    ]


def public_model_info(run: Run) -> dict[str, Any]:
    """What the worker recorded about the model, with its source as pages show it (no
    server folders)."""
    info = dict(getattr(run, "model_info", None) or {})
    if "source" in info:
        info["source"] = run.model.public_source
    return info
