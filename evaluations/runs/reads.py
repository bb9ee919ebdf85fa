"""What a kind hands other rooms when they read it through the registry (`RunKind.results`,
`RunKind.board_section`, `RunKind.model_section`): one result of a model on a benchmark,
picked the same way for every kind, and a section of a shared page rendered as an
inclusion tag renders its template."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django import template
from django.db.models import QuerySet
from django.utils.safestring import SafeString

from evaluations.runs.models import Run


@dataclass(frozen=True)
class KindResult:
    """A model's result on a benchmark, as a learning curve shows it."""

    model: str  # the language model's name
    benchmark: str  # the benchmark's name
    run_id: int
    status: str
    # The run scored older content than the benchmark has now.
    outdated: bool
    # The run's accuracy (a probing run's: te at the layer chosen on va); None until done.
    score: float | None
    url: str

    @property
    def done(self) -> bool:
        return self.status == Run.Status.DONE


def _rank(found: Any) -> tuple[bool, bool, int]:
    """Which of a model's runs on a benchmark counts: a run on the benchmark's current
    content before one on older content, a done one before the rest, then the latest."""
    return (not found.outdated, found.status == Run.Status.DONE, found.pk)


def results_of(
    runs_of_kind: QuerySet[Any],
    *,
    models: Sequence[str],
    benchmarks: Sequence[Any],
    field: str,
    score: str,
    subset: Any = None,
) -> list[KindResult]:
    """One result per model named in `models` and benchmark of `benchmarks` that has a
    run among `runs_of_kind` (`field`: the runs' benchmark field, `score` the field read
    as the accuracy), in one query: the runs on `subset` (an `evaluations.subsets.Subset`,
    its size and seed), or those on the whole benchmarks."""
    sampled = (
        {"subset_size": subset.size, "subset_seed": subset.seed}
        if subset is not None
        else {"subset_size": 0}
    )
    kept: dict[tuple[str, str], Any] = {}
    for found in (
        runs_of_kind.filter(model__name__in=list(models), **{f"{field}__in": benchmarks}, **sampled)
        .select_related("model", field)
        .only(
            "pk",
            "status",
            score,
            "model__name",
            f"{field}__name",
            f"{field}__content_hash",
            "content_hash",
        )
    ):
        key = (found.model.name, getattr(found, field).name)
        other = kept.get(key)
        if other is None or _rank(found) > _rank(other):
            kept[key] = found
    return [
        KindResult(
            model=model,
            benchmark=benchmark,
            run_id=found.pk,
            status=found.status,
            outdated=found.outdated,
            score=getattr(found, score),
            url=found.get_absolute_url(),
        )
        for (model, benchmark), found in kept.items()
    ]


def included(context: template.Context, name: str, data: dict[str, Any]) -> SafeString:
    """The template `name` rendered with `data` alone (and the page's CSRF token), as an
    inclusion tag renders it: a kind's section of a shared page."""
    shown = context.new(data)
    csrf_token = context.get("csrf_token")
    if csrf_token is not None:
        shown["csrf_token"] = csrf_token
    page = context.template
    if page is None:
        raise ValueError(f"{name}: a kind's section is rendered inside a page's template")
    return SafeString(page.engine.get_template(name).render(shown))
