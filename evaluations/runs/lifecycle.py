"""The run lifecycle, once for every kind of run (suites, minimal pairs, probing,
training): the kinds registry, the status machine, enqueueing, progress, failure,
cancel, retry and the sweep. A kind brings its run model (a subclass of
`evaluations.runs.models.Run`), a payload builder, a worker function and a store function;
everything here works on any of them. The Celery side is in `evaluations.runs.tasks`.

A kind is registered at import of its services module (`register(RunKind(...))`), which
its app's `ready()` imports, so that every process knows every kind."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Any, Generic, TypeVar

from django.apps import apps
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone
from django.utils.module_loading import import_string

from evaluations.model_sources import public_error
from evaluations.models import IMPORTED_PREFIX, Run, RunPart
from evaluations.runs import broker_watch, packing, publish
from gym import artifacts
from gym.errors import ApplicationError

log = logging.getLogger(__name__)

S = Run.Status
R = TypeVar("R", bound=Run)


@dataclass
class RequestOutcome(Generic[R]):
    """What one request for runs of a kind gave: every run asked for, those it queued
    now and those that were there already (the same content asked for before)."""

    evaluations: list[R]
    created: list[R] = field(default_factory=list)
    existing: list[R] = field(default_factory=list)


# From which states each state may be entered: the status machine never goes backwards
# (a retry, which starts a new attempt, is the one way back).
ALLOWED_FROM: dict[str, tuple[str, ...]] = {
    S.RUNNING: (S.QUEUED, S.RUNNING),
    S.DONE: (S.QUEUED, S.RUNNING),
    S.FAILED: (S.QUEUED, S.RUNNING),
    S.CANCELLED: (S.QUEUED, S.RUNNING),
}


class BrokerUnavailable(ApplicationError):
    """The task queue could not be reached. The runs were recorded; the sweep sends them
    once the broker is back, and asking again sends them at once."""

    status_code = 503
    code = "broker_unavailable"


class RunConflict(ApplicationError):
    """The run is not in a state where the asked action means anything (e.g. retrying a
    run that is done)."""

    status_code = 409
    code = "conflict"


class ModelNotRunnable(ApplicationError):
    """A model that no worker can load: registered only to hold imported results."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(
            f"{', '.join(names)}: registered only for imported results (source "
            f"'{IMPORTED_PREFIX}<name>'), so no worker can load it. Import its predictions "
            "instead, or register the model's real source to run it on this site."
        )


class WeightsRemoved(ModelNotRunnable):
    """A training checkpoint whose folder was deleted: its results stay, nothing runs."""

    def __init__(self, names: Sequence[str]) -> None:
        ApplicationError.__init__(
            self,
            f"{', '.join(names)}: weights removed (its training run's checkpoint retention "
            "deleted the folder), so no worker can load it; its results are kept.",
        )


class ModelNotReady(ModelNotRunnable):
    """An uploaded model that its check has not passed (yet): no run is queued on it."""

    code = "not_ready"

    def __init__(self, models: Sequence[Any]) -> None:
        reasons = [
            f"{m.name}: refused by its check ({m.reason or 'no reason given'})"
            if m.status == "refused"
            else f"{m.name}: still being checked (a worker loads it and scores one "
            "sentence first); ask again once its page says it is ready"
            for m in models
        ]
        ApplicationError.__init__(self, "; ".join(reasons))


def check_runnable(models: Sequence[Any]) -> None:
    """Every request service calls this: an imported-results model, a checkpoint whose
    weights were removed, or an uploaded model not (yet) ready, is never queued."""
    imported = [m.name for m in models if m.is_imported]
    if imported:
        raise ModelNotRunnable(imported)
    removed = [m.name for m in models if getattr(m, "weights_removed_at", None)]
    if removed:
        raise WeightsRemoved(removed)
    not_ready = [m for m in models if getattr(m, "status", "ready") != "ready"]
    if not_ready:
        raise ModelNotReady(not_ready)


def run_get_or_create(model: type[R], key: dict[str, Any], **defaults: Any) -> tuple[R, bool]:
    """The run with `key` (its unique fields), created with `defaults` when there is none:
    asking twice, or two requests at once, give one run. Call inside a transaction."""
    run = model.objects.filter(**key).first()
    if run is not None:
        return run, False
    try:
        with transaction.atomic():
            return model.objects.create(**key, **defaults), True
    except IntegrityError:  # the same run was asked for a moment ago
        return model.objects.get(**key), False


@dataclass(frozen=True)
class RunKind:
    """One kind of run. Callables are dotted paths, imported when first used, so that
    registering a kind imports neither torch (worker side) nor the services (web side).

    - model: "app_label.ModelName" of a `Run` subclass.
    - payload: (run) -> dict, everything the worker needs (JSON; it never reads the
      database). Built on the web side.
    - work: (payload, progress) -> results dict, run on a GPU worker; progress(done, total)
      may be called any number of times.
    - store: (*, run_id, attempt, results) -> bool, one transaction on the default queue;
      returns False when the run was finished or the attempt is stale (nothing written).
    - pack_work (optional): (payload, progress) -> [results per group], where the payload
      is the runs' shared payload with "groups" (each part's sentences) instead of
      "sentences". A kind that has it is sent in packed tasks of about
      GYM_PACK_TOKEN_BUDGET tokens (`evaluations.runs.packing`); its payload must hold the
      sentences under "sentences" and its results {"sentences": [...], "diagnostics"}.
      Kinds without it are sent one run per task.
    - label: what pages call a run of this kind ("Suite"); its name if empty.
    - api_detail (optional): the URL name of one run in the API (its id the argument),
      which lists of runs poll for live progress.
    - request (optional): (*, models, benchmarks, user) -> None, runs of `models` on
      `benchmarks` (rows of this kind's benchmark) asked for as the kind's own pages
      ask for them. Another kind that needs this one's runs (training evaluates its
      checkpoints) asks through `request_runs`, so that no kind imports another.
    - stop (optional): (run) -> None, called once a cancel of the run commits, for a
      kind whose worker stops on its own when told (training saves where it is and
      reads no database, so this tells it). For the others the work tasks' progress
      callback stops the work between batches (`evaluations.runs.tasks`).
    - retry_check (optional): (run) -> str, why a failed or cancelled run cannot be
      retried on the content it was asked on ("" when it can): a kind whose payload
      reads the benchmark refuses a retry that would score other content than the run
      is about.

    What other rooms read of a kind goes through here too (all optional; see
    docs/developing.md, "Adding a kind of run"):

    - results: (*, models, benchmarks, subset) -> [KindResult], the kind's result of
      each model named in `models` on each of `benchmarks` (rows of its benchmark) that a
      curve shows, on the whole benchmarks (subset None) or on that sample (`evaluations.runs.reads.results_of` picks it): learning curves of
      training runs and model series read other kinds' results through it.
    - chances: (benchmarks) -> {benchmark id: chance accuracy or None}, the curves'
      chance line.
    - metrics: (benchmarks) -> {benchmark id: metric}, what each benchmark's curve
      measures (a pair set's own metric; one name for every benchmark of other kinds).
    - board: (*, tag, sort, direction, include_hidden, training, intervals,
      significance) -> Leaderboard, the kind's board (`evaluations.boards`), for a kind
      whose board heads the leaderboard page.
    - model_page: (request, model) -> dict, the context of a model page's main part,
      for the kind whose results head it.
    - board_section / model_section: (context, subject) -> HTML, the kind's section of
      the leaderboard page (subject None) and of a model's page (subject the model),
      each kind's in `section_order` (smaller first, then registration order).
    - work_name, shorter: what a failed run's page calls the kind's work ("Scoring"),
      and what a user can do to shorten a run that passed the time limit.

    Every kind's run model has a `model` foreign key (the language model run) besides
    its benchmark's (`benchmark_field`): the list of runs of every kind reads both.
    """

    name: str
    model: str
    payload: str
    work: str
    store: str
    pack_work: str = ""
    # A no-argument callable a GPU worker calls once before its pool starts (imports the
    # work needs on every run, so that none of them pays for them).
    warm_up: str = ""
    label: str = ""
    api_detail: str = ""
    request: str = ""
    stop: str = ""
    retry_check: str = ""
    results: str = ""
    chances: str = ""
    metrics: str = ""
    board: str = ""
    model_page: str = ""
    board_section: str = ""
    model_section: str = ""
    section_order: int = 50
    # What a failed run's page calls the kind's work, and what a user can do to make a
    # run shorter when it passed the site's time limit.
    work_name: str = "The work"
    shorter: str = "Use a smaller benchmark"

    @property
    def stops_itself(self) -> bool:
        return bool(self.stop)

    @cached_property
    def run_model(self) -> type[Run]:
        return apps.get_model(self.model)

    def build_payload(self, run: Run) -> dict[str, Any]:
        return import_string(self.payload)(run)

    def work_function(self) -> Callable[..., dict[str, Any]]:
        return import_string(self.work)

    def store_function(self) -> Callable[..., bool]:
        return import_string(self.store)

    def pack_work_function(self) -> Callable[..., list[dict[str, Any]]]:
        return import_string(self.pack_work)

    def retry_problem(self, run: Run) -> str:
        return import_string(self.retry_check)(run) if self.retry_check else ""

    def request_runs(
        self, *, models: Sequence[Any], benchmarks: Sequence[Any], user: Any, **options: Any
    ) -> None:
        """Ask for the runs of `models` on `benchmarks`; `options` are the kind's request
        function's own (`subset`: the fast subset, evaluations.subsets)."""
        if not self.request:
            raise ValueError(f"runs of the kind {self.name!r} cannot be asked for by another kind")
        import_string(self.request)(models=models, benchmarks=benchmarks, user=user, **options)

    def read_results(
        self, *, models: Sequence[str], benchmarks: Sequence[Any], subset: Any = None
    ) -> list[Any]:
        """The kind's results of `models` on `benchmarks` (`KindResult`s), on the whole
        benchmarks or on `subset` (evaluations.subsets)."""
        if not self.results:
            raise ValueError(f"the kind {self.name!r} declares no way to read its results")
        return import_string(self.results)(models=models, benchmarks=benchmarks, subset=subset)

    def read_chances(self, benchmarks: Sequence[Any]) -> dict[int, float | None]:
        return import_string(self.chances)(benchmarks) if self.chances else {}

    def read_metrics(self, benchmarks: Sequence[Any]) -> dict[int, str]:
        return import_string(self.metrics)(benchmarks) if self.metrics else {}

    def read_board(self, **options: Any) -> Any:
        if not self.board:
            raise ValueError(f"the kind {self.name!r} declares no board")
        return import_string(self.board)(**options)

    def read_model_page(self, request: Any, model: Any) -> dict[str, Any]:
        return import_string(self.model_page)(request, model) if self.model_page else {}

    def section(self, where: str, context: Any, subject: Any) -> str:
        """The kind's section of a page (`where`: "board" or "model"); "" without one."""
        hook = self.board_section if where == "board" else self.model_section
        return str(import_string(hook)(context, subject)) if hook else ""

    @property
    def title(self) -> str:
        return self.label or self.name

    @property
    def packs(self) -> bool:
        return bool(self.pack_work) and settings.GYM_PACK_TOKEN_BUDGET > 0


KINDS: dict[str, RunKind] = {}


def register(kind: RunKind) -> None:
    KINDS[kind.name] = kind


def kind_named(name: str) -> RunKind:
    try:
        return KINDS[name]
    except KeyError:
        raise LookupError(f"no run kind {name!r}; known: {sorted(KINDS)}") from None


def kinds_with_sections(where: str) -> list[RunKind]:
    """The kinds with a section on the leaderboard page ("board") or a model's page
    ("model"), in the order the page shows them."""
    hook = "board_section" if where == "board" else "model_section"
    found = [kind for kind in KINDS.values() if getattr(kind, hook)]
    return sorted(found, key=lambda kind: kind.section_order)


def kind_of(run: Run) -> RunKind:
    for kind in KINDS.values():
        if isinstance(run, kind.run_model):
            return kind
    raise LookupError(f"{run.__class__.__name__} is not a registered run kind")


def run_advance(kind: RunKind, run_id: int, attempt: int, to: str, **fields: Any) -> bool:
    """Move to `to` if allowed from the current state (a conditional update, so two
    workers can never both do it); False when the message is stale."""
    count = kind.run_model.objects.filter(
        pk=run_id, attempt=attempt, status__in=ALLOWED_FROM[to]
    ).update(status=to, **fields)
    return count == 1


def run_progress(
    *, kind: RunKind, run_id: int, attempt: int, done: int, total: int, restart: bool = False
) -> None:
    """Record progress and mark the run as started. Within one delivery progress only
    grows (a late message changes nothing); `restart` is the first message of a delivery,
    which starts again from `done` when a worker died and the message went to another
    one: its clock for the sweep starts again too."""
    now = timezone.now()
    runs = kind.run_model.objects.filter(pk=run_id, attempt=attempt)
    runs.filter(status=S.QUEUED).update(status=S.RUNNING, started_at=now)
    running = runs.filter(status=S.RUNNING)
    if restart:
        # A kind whose worker cannot count its work up front sends 0: keep the request's.
        fields: dict[str, Any] = {"progress_total": total} if total else {}
        running.update(progress_done=done, started_at=now, **fields)
    else:
        running.filter(progress_done__lt=done).update(progress_done=done, progress_total=total)


def _open_run(kind: RunKind, run_id: int, attempt: int) -> Run | None:
    """The run, locked until the transaction ends, if this attempt is still open."""
    return (
        kind.run_model.objects.select_for_update()
        .only("pk", "status", "attempt")
        .filter(pk=run_id, attempt=attempt, status__in=ALLOWED_FROM[S.DONE])
        .first()
    )


def _parts(kind: RunKind, run_id: int, attempt: int, count: int) -> Any:
    return RunPart.objects.filter(kind=kind.name, run_id=run_id, attempt=attempt, count=count)


def _part_row(kind: RunKind, run_id: int, attempt: int, count: int, index: int, size: int) -> Any:
    row, _ = RunPart.objects.get_or_create(
        kind=kind.name,
        run_id=run_id,
        attempt=attempt,
        count=count,
        index=index,
        defaults={"size": size},
    )
    return row


def _part_started(kind: RunKind, run: Run, count: int, *, restart: bool) -> None:
    """A split run is running, its progress the sum of its parts'; a part that starts a
    delivery (or is stored) restarts the sweep's clock, so that a run split into many
    tasks is judged by its latest part, not its first."""
    fields: dict[str, Any] = {
        "status": S.RUNNING,
        "progress_done": _parts(kind, run.pk, run.attempt, count).aggregate(n=Sum("done"))["n"]
        or 0,
    }
    if restart or run.status == S.QUEUED:
        fields["started_at"] = timezone.now()
    kind.run_model.objects.filter(pk=run.pk, attempt=run.attempt).update(**fields)


def run_part_progress(
    *,
    kind: RunKind,
    run_id: int,
    attempt: int,
    part: int,
    parts: int,
    done: int,
    size: int,
    restart: bool = False,
) -> None:
    """Progress of one part of a run (see `evaluations.runs.packing`). A run in one part is
    `run_progress`; a split run's progress is the sum of its parts'."""
    if parts <= 1:
        run_progress(
            kind=kind, run_id=run_id, attempt=attempt, done=done, total=size, restart=restart
        )
        return
    with transaction.atomic():
        run = _open_run(kind, run_id, attempt)
        if run is None:
            return
        row = _part_row(kind, run_id, attempt, parts, part, size)
        if row.results is None and (restart or done > row.done):
            RunPart.objects.filter(pk=row.pk).update(done=min(done, row.size))
        _part_started(kind, run, parts, restart=restart)


def run_part_stored(*, kind: RunKind, run_id: int, attempt: int, part: int, parts: int) -> bool:
    """Whether a part needs nothing more: stored before, or its run's attempt is over."""
    if (
        parts > 1
        and _parts(kind, run_id, attempt, parts).filter(index=part, results__isnull=False).exists()
    ):
        return True
    return not kind.run_model.objects.filter(
        pk=run_id, attempt=attempt, status__in=ALLOWED_FROM[S.DONE]
    ).exists()


def run_part_store(
    *, kind: RunKind, run_id: int, attempt: int, part: int, parts: int, results: dict[str, Any]
) -> bool:
    """Store one part's results, once. A run in one part goes to the kind's store
    function at once. A split run's parts wait in RunPart rows until the last one
    arrives; then the run is stored whole. A part stored before (a re-delivery) while
    others are missing, a stale attempt or a finished run write nothing: False.

    The whole run is stored after the transaction that keeps the last part, not in it:
    the kind's store function makes its own transactions (on SQLite a large suite's are
    several short ones, see `evaluations.syntaxgym.services.results_store`), and one
    around them would hold the write lock for the whole store. A store that dies there
    leaves every part kept and the run open; the re-delivered message of any part finds
    them all and stores the run (the store function writes it once)."""
    if parts <= 1:
        return kind.store_function()(run_id=run_id, attempt=attempt, results=results)
    with transaction.atomic():
        run = _open_run(kind, run_id, attempt)
        if run is None:
            return False
        size = len(results.get("sentences") or ())
        row = _part_row(kind, run_id, attempt, parts, part, size)
        if row.results is None:
            RunPart.objects.filter(pk=row.pk).update(results=results, size=size, done=size)
        # Counted, not read: the kept parts' results are megabytes each, and reading
        # them all here, for every part, held the write lock for most of a minute.
        if _parts(kind, run_id, attempt, parts).filter(results__isnull=False).count() < parts:
            if row.results is not None:
                return False
            _part_started(kind, run, parts, restart=True)
            return True
    return _store_parts(kind, run_id, attempt, parts)


def run_parts_store_kept(*, kind: RunKind, run_id: int, attempt: int, parts: int) -> bool:
    """Store a split run whose parts are all kept but which is not stored yet: what the
    re-delivered message of a part does when the delivery that stored the last part died
    while storing the run (the part's results file is gone then, its RunPart row holds
    them). False when a part is missing or the run is finished."""
    if parts <= 1:
        return False
    with transaction.atomic():
        if _open_run(kind, run_id, attempt) is None:
            return False
        if _parts(kind, run_id, attempt, parts).filter(results__isnull=False).count() < parts:
            return False
    return _store_parts(kind, run_id, attempt, parts)


def _store_parts(kind: RunKind, run_id: int, attempt: int, parts: int) -> bool:
    """Store a split run from its kept parts. They are read outside any transaction (a
    reader holds no lock; kept parts change no more) and stored by the kind's store
    function, which makes its own transactions."""
    stored = list(
        _parts(kind, run_id, attempt, parts).filter(results__isnull=False).order_by("index")
    )
    if len(stored) < parts:
        return False  # removed meanwhile: another delivery stored the run
    merged = packing.merge_results([p.results for p in stored])
    wrote = kind.store_function()(run_id=run_id, attempt=attempt, results=merged)
    if not kind.run_model.objects.filter(
        pk=run_id, attempt=attempt, status__in=ALLOWED_FROM[S.DONE]
    ).exists():
        # Stored (by this delivery or another one) or finished otherwise: the parts are
        # needed no more. While the run is open another delivery may still need them.
        RunPart.objects.filter(kind=kind.name, run_id=run_id, attempt=attempt).delete()
    return wrote


def run_fail(*, kind: RunKind, run_id: int, attempt: int, reason: str) -> bool:
    """Fail the run's `attempt` with `reason`. A reason that ends with
    publish.STORE_OUTAGE_NOTE (the artifact store could not be reached) marks the run
    `waiting_for_store`: the sweep sends it again once the store answers."""
    # Everyone may read the reason: no server paths in it.
    reason = public_error(reason)
    return run_advance(
        kind,
        run_id,
        attempt,
        S.FAILED,
        error=reason[:5000],
        finished_at=timezone.now(),
        waiting_for_store=reason.endswith(publish.STORE_OUTAGE_NOTE),
    )


def runs_enqueue(*, kind: RunKind, runs: Sequence[Run]) -> None:
    """Publish the runs' work on the gpu queue and mark them sent: in packed tasks for a
    kind that packs (see `evaluations.runs.packing`), else one task per run. Call it only
    after the rows are committed (a worker must never see a row that is not there): see
    `runs_enqueue_on_commit`.

    Raises BrokerUnavailable when some could not be published; they stay queued and
    unsent, for the sweep or the next request."""
    sent = _publish_packed(kind, runs) if kind.packs else _publish_each(kind, runs)
    failed = len(runs) - sent
    if failed:
        raise BrokerUnavailable(
            f"The task queue could not be reached, so {failed} run(s) are recorded but not "
            "yet sent to a worker. Nothing was lost: they are sent as soon as the queue is "
            "back, or when you ask again."
        )


def _mark_sent(kind: RunKind, run: Run) -> None:
    kind.run_model.objects.filter(pk=run.pk, attempt=run.attempt).update(enqueued=True)
    run.enqueued = True


def _publish_each(kind: RunKind, runs: Sequence[Run]) -> int:
    """One task per run; returns how many were published."""
    sent = 0
    for run in runs:
        try:
            publish.enqueue_work(kind.name, run.pk, run.attempt, kind.build_payload(run))
        except Exception as exc:  # noqa: BLE001 - any broker failure is reported the same way
            # The broker is down: the others would wait out the same timeouts for nothing.
            log.warning("could not enqueue %s run %s: %s", kind.name, run.pk, exc)
            break
        _mark_sent(kind, run)
        sent += 1
    return sent


def _publish_packed(kind: RunKind, runs: Sequence[Run]) -> int:
    """Runs whose payloads agree but for their sentences (one model, one set of
    options) share tasks of about GYM_PACK_TOKEN_BUDGET tokens. A run is marked sent
    when all its parts are published; returns how many were."""
    families: dict[str, tuple[dict[str, Any], list[tuple[Run, list[Any]]]]] = {}
    for run in runs:
        payload = kind.build_payload(run)
        sentences = payload.pop("sentences")
        key = json.dumps(payload, sort_keys=True, default=str)
        families.setdefault(key, (payload, []))[1].append((run, sentences))
    sent = 0
    for shared, members in families.values():
        by_id = {run.pk: (run, sentences) for run, sentences in members}
        plan = packing.pack(
            [
                (run.pk, run.attempt, [packing.estimated_tokens(s) for s in sentences])
                for run, sentences in members
            ],
            settings.GYM_PACK_TOKEN_BUDGET,
        )
        for parts in plan:
            groups = [by_id[p.run_id][1][p.start : p.stop] for p in parts]
            try:
                publish.enqueue_pack(
                    kind.name, [p.entry() for p in parts], {**shared, "groups": groups}
                )
            except Exception as exc:  # noqa: BLE001 - any broker failure is reported the same way
                log.warning("could not enqueue %s runs %s: %s", kind.name, sorted(by_id), exc)
                return sent
            for part in parts:
                if part.index == part.count - 1:
                    _mark_sent(kind, by_id[part.run_id][0])
                    sent += 1
    return sent


def runs_enqueue_on_commit(*, kind: RunKind, runs: Sequence[Run]) -> None:
    """Enqueue once the current transaction commits (at once when there is none). A
    BrokerUnavailable raised then propagates from the outermost `atomic` block, after
    the rows are committed, so a view that called the service can still answer 503."""
    pending = [r for r in runs if r.status == S.QUEUED and not r.enqueued]
    if pending:
        transaction.on_commit(lambda: runs_enqueue(kind=kind, runs=pending))


def _check_may_manage(run: Run, user: Any, action: str) -> None:
    if not run.may_manage(user):
        raise PermissionDenied(
            f"Only the benchmark's owner, the person who requested this run, or staff may "
            f"{action} it."
        )


def run_retry(*, run: R, user: Any) -> R:
    """Send a failed or cancelled run again as a new attempt (a late result of the old
    attempt is then ignored); send a run that never reached the broker. Anything else is
    a RunConflict: nothing happens silently, nor does a retry that the kind says
    cannot score the content the run was asked on (`RunKind.retry_check`)."""
    _check_may_manage(run, user, "retry")
    kind = kind_of(run)
    if run.status in (S.FAILED, S.CANCELLED):
        problem = kind.retry_problem(run)
        if problem:
            raise RunConflict(problem)
    with transaction.atomic():
        # A person's retry: the automatic resends after store outages count afresh.
        updated = _requeue(kind, run, (S.FAILED, S.CANCELLED), store_resends=0)
        if not updated and not run.waiting_for_broker:
            raise RunConflict(_not_retryable(run))
        runs_enqueue_on_commit(kind=kind, runs=[run])
    return run


def _requeue(
    kind: RunKind,
    run: Run,
    statuses: Sequence[str],
    only: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """Queue `run` again as a new attempt if its status is one of `statuses` (and its row
    matches `only`), refreshed either way; the parts of its earlier attempts are
    dropped. Inside a transaction."""
    matching = kind.run_model.objects.filter(pk=run.pk, status__in=statuses, **(only or {}))
    updated = matching.update(
        status=S.QUEUED,
        enqueued=False,
        attempt=F("attempt") + 1,
        error="",
        progress_done=0,
        queued_at=timezone.now(),
        started_at=None,
        finished_at=None,
        waiting_for_store=False,
        **fields,
    )
    run.refresh_from_db()
    # Parts of the earlier attempt are never stored now.
    RunPart.objects.filter(kind=kind.name, run_id=run.pk).exclude(attempt=run.attempt).delete()
    return updated == 1


def _not_retryable(run: Run) -> str:
    if run.status == S.DONE:
        return "This run is done; there is nothing to retry."
    if run.status == S.RUNNING:
        return "This run is running; cancel it first if it is stuck, then retry."
    return "This run is queued and already sent to a worker; it starts when one is free."


def run_cancel(*, run: R, user: Any) -> R:
    """Stop a queued or running run. The workers are told through the broker
    (`broker_watch.cancel_mark`): one that is computing it stops after its current batch
    (within GYM_CANCEL_CHECK_EVERY_SECONDS), and a message still queued is dropped when
    a worker takes it. A kind whose worker stops itself is told by its `stop`. Results
    that come anyway are refused (the status machine never leaves `cancelled` except by
    a retry)."""
    _check_may_manage(run, user, "cancel")
    kind = kind_of(run)
    who = getattr(user, "username", "") or "someone"
    cancelled = run_advance(
        kind,
        run.pk,
        run.attempt,
        S.CANCELLED,
        error=f"Cancelled by {who}.",
        finished_at=timezone.now(),
    )
    run.refresh_from_db()
    if not cancelled:
        raise RunConflict(
            f"This run is {run.status}; only queued or running runs can be cancelled."
        )
    name, run_id, attempt = kind.name, run.pk, run.attempt
    transaction.on_commit(lambda: broker_watch.cancel_mark(name, run_id, attempt))
    if kind.stop:
        stop = import_string(kind.stop)
        transaction.on_commit(lambda: stop(run))
    return run


def _prune_parts(kind: RunKind) -> None:
    """Parts of runs that finished without them (failed, cancelled) or are gone."""
    open_runs = kind.run_model.objects.filter(status__in=(S.QUEUED, S.RUNNING)).values("pk")
    RunPart.objects.filter(kind=kind.name).exclude(run_id__in=open_runs).delete()


@dataclass
class SweepReport:
    resent: int = 0
    unsent: int = 0
    failed: int = 0
    orphans: int = 0
    # Runs that failed for an artifact store out of reach, sent again now that it answers.
    store_resent: int = 0


def stale_reason(seconds: int) -> str:
    return (
        f"No worker finished this run within {seconds} s of its start (the site's time "
        "limit per run, plus the time a broker takes to hand the work of a lost worker to "
        "another one): its worker stopped or lost its results. Retry it."
    )


def runs_sweep(*, now: Any = None, holds: Any = None) -> SweepReport:
    """Heal what should have moved without anybody asking: send runs that are queued but
    never reached the broker (it was down), send again runs that were sent but that no
    queue and no live worker holds (`holds`, from `evaluations.runs.broker_watch`: their
    worker died holding their message), and fail runs that have been running longer
    than any worker may take. Safe to run at any time and from several places."""
    now = now or timezone.now()
    report = SweepReport()
    resend_before = now - timedelta(seconds=settings.GYM_SWEEP_RESEND_AFTER)
    stale_before = now - timedelta(seconds=settings.GYM_RUN_STALE_AFTER)
    for kind in KINDS.values():
        objects = kind.run_model.objects
        unsent = list(
            objects.filter(status=S.QUEUED, enqueued=False, queued_at__lt=resend_before).order_by(
                "queued_at"
            )
        )
        if unsent:
            try:
                runs_enqueue(kind=kind, runs=unsent)
            except BrokerUnavailable:
                pass
            sent = sum(1 for r in unsent if r.enqueued)
            report.resent += sent
            report.unsent += len(unsent) - sent
        for run_id, attempt in objects.filter(
            status=S.RUNNING, started_at__lt=stale_before
        ).values_list("pk", "attempt"):
            if run_fail(
                kind=kind,
                run_id=run_id,
                attempt=attempt,
                reason=stale_reason(settings.GYM_RUN_STALE_AFTER),
            ):
                report.failed += 1
        _prune_parts(kind)
    report.store_resent = _resend_after_store_outage(resend_before)
    if holds is not None:
        report.orphans = _resend_orphans(holds)
    if report.resent or report.failed or report.unsent or report.orphans or report.store_resent:
        log.info("sweep: %s", report)
    return report


def _resend_after_store_outage(failed_before: Any) -> int:
    """Runs that failed before `failed_before` because the artifact store could not be
    reached (`waiting_for_store`): once the store answers, each is queued again as a new
    attempt, at most GYM_STORE_OUTAGE_RESENDS times in all. One past that, or one whose
    benchmark changed since (`RunKind.retry_problem`), stays failed for a person to
    retry, and is no longer waiting."""
    waiting = [
        (kind, run)
        for kind in KINDS.values()
        for run in kind.run_model.objects.filter(
            status=S.FAILED, waiting_for_store=True, finished_at__lt=failed_before
        ).order_by("finished_at")[:200]
    ]
    if not waiting or not artifacts.reachable():
        return 0
    resent: dict[str, list[Run]] = {}
    for kind, run in waiting:
        with transaction.atomic():
            problem = kind.retry_problem(run)
            if run.store_resends >= settings.GYM_STORE_OUTAGE_RESENDS or problem:
                why = problem or (
                    f"It was sent again {run.store_resends} time(s) after outages of the "
                    "store, the most this site allows: retry it once the store is back."
                )
                kind.run_model.objects.filter(pk=run.pk, attempt=run.attempt).update(
                    waiting_for_store=False,
                    error=run.error.removesuffix(publish.STORE_OUTAGE_NOTE) + why,
                )
                continue
            attempt = run.attempt
            # Still this attempt, still waiting: not one a person retried meanwhile.
            still = {"attempt": attempt, "waiting_for_store": True}
            if _requeue(kind, run, (S.FAILED,), still, store_resends=F("store_resends") + 1):
                log.warning(
                    "sweep: %s run %s failed (attempt %s) because the artifact store could "
                    "not be reached; the store answers again: sent again as attempt %s",
                    kind.name,
                    run.pk,
                    attempt,
                    run.attempt,
                )
                resent.setdefault(kind.name, []).append(run)
    sent = 0
    for name, runs in resent.items():
        try:
            runs_enqueue(kind=KINDS[name], runs=runs)
        except BrokerUnavailable as exc:  # queued and unsent: the next sweep sends them
            log.warning("sweep: %s", exc)
        sent += len(runs)
    return sent


def _resend_orphans(holds: Any) -> int:
    """Runs sent to the broker, not finished, that nobody has held for
    GYM_SWEEP_ORPHAN_AFTER seconds, or a part of which started, is not stored and is
    held by nobody: publish their work again (parts stored before are not stored
    twice). A queued one is sent as new; a running one keeps its status (its next
    delivery restarts its progress)."""
    open_runs: dict[tuple[str, int, int], tuple[RunKind, Run]] = {}
    for kind in KINDS.values():
        for run in kind.run_model.objects.filter(
            status__in=(S.QUEUED, S.RUNNING), enqueued=True
        ).order_by("pk"):
            open_runs[(kind.name, run.pk, run.attempt)] = (kind, run)
    orphans = set(open_runs) - holds.held
    for name, run_id, attempt, index in RunPart.objects.filter(
        results__isnull=True, count__gt=1
    ).values_list("kind", "run_id", "attempt", "index"):
        key = (name, run_id, attempt)
        if key in open_runs and (name, run_id, attempt, index) not in holds.held_parts:
            orphans.add(key)
    confirmed = holds.confirm_orphans(orphans, after=settings.GYM_SWEEP_ORPHAN_AFTER)
    by_kind: dict[str, list[Run]] = {}
    for key in sorted(confirmed):
        kind, run = open_runs[key]
        log.warning(
            "sweep: %s run %s (attempt %s) is %s but no queue and no live worker has held "
            "it for %s s: sending it again",
            kind.name,
            run.pk,
            run.attempt,
            run.status,
            settings.GYM_SWEEP_ORPHAN_AFTER,
        )
        by_kind.setdefault(kind.name, []).append(run)
    resent = 0
    for name, runs in by_kind.items():
        try:
            runs_enqueue(kind=KINDS[name], runs=runs)
        except BrokerUnavailable as exc:  # the next sweep tries again
            log.warning("sweep: %s", exc)
            continue
        holds.forget({(name, run.pk, run.attempt) for run in runs})
        resent += len(runs)
    return resent
