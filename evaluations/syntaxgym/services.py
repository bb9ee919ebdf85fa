"""Writes for suite evaluations: requesting them (and rerunning the outdated ones), their
payload, recording progress and failure, and storing results; this module registers
suites as a kind of run. Each is one function, one transaction. Registering models is
`evaluations.language_models.registry`'s."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from evaluations.language_models.registry import learn_model_facts
from evaluations.models import (
    Evaluation,
    EvaluationSnapshot,
    ItemResult,
    LanguageModel,
    PredictionResult,
)
from evaluations.runs import lifecycle as runs
from evaluations.scoring import WORD_PROBABILITY
from evaluations.subsets import Subset, subset_key, suite_sample
from evaluations.syntaxgym import outcomes
from evaluations.syntaxgym.selectors import outdated_pairs
from suites import formats
from suites.models import Suite
from suites.syntaxgym import selectors

log = logging.getLogger(__name__)

# Suite evaluations as a kind of run: the lifecycle in `evaluations.runs.lifecycle` moves them.
SUITE_RUNS = runs.RunKind(
    work_name="Scoring",
    shorter="Split the suite into smaller ones",
    name="suite",
    model="evaluations.Evaluation",
    payload="evaluations.syntaxgym.services.scoring_payload",
    work="evaluations.scoring.worker.run_scoring",
    warm_up="evaluations.scoring.preload.preload_transformers",
    store="evaluations.syntaxgym.services.suite_results_store",
    pack_work="evaluations.scoring.worker.run_scoring_groups",
    label="Suite",
    api_detail="api-evaluation",
    request="evaluations.syntaxgym.services.suite_runs_request",
    results="evaluations.syntaxgym.reads.suite_results",
    chances="evaluations.syntaxgym.reads.suite_chances",
    metrics="evaluations.syntaxgym.reads.suite_metrics",
    board="evaluations.syntaxgym.selectors.leaderboard",
    model_page="evaluations.syntaxgym.reads.model_page",
)
runs.register(SUITE_RUNS)

S = Evaluation.Status
# Re-exported: views and the API catch them from here.
BrokerUnavailable = runs.BrokerUnavailable
RunConflict = runs.RunConflict


RequestOutcome = runs.RequestOutcome[Evaluation]


def evaluation_request(
    *,
    model: LanguageModel,
    suites: Iterable[Suite],
    user: User | AnonymousUser | None = None,
    word_probability: str = "tokens",
    subset: Subset | None = None,
) -> RequestOutcome:
    """One model on some suites: see `evaluations_request`."""
    return evaluations_request(
        models=[model],
        suites=suites,
        user=user,
        word_probability=word_probability,
        subset=subset,
    )


def evaluations_request(
    *,
    models: Iterable[LanguageModel],
    suites: Iterable[Suite],
    user: User | AnonymousUser | None = None,
    word_probability: str = "tokens",
    subset: Subset | None = None,
) -> RequestOutcome:
    """Every model on every suite, in one transaction: one evaluation per (model, suite,
    content hash, word probability, subset); asking again returns the existing one. `evaluations`
    lists them model by model, each in the order the suites were asked (see
    `_pairs_request`). `word_probability="corrected"` asks for word-corrected region
    sums (evaluations.scoring.boundary): separate runs, which the leaderboard and the
    pages that compare models leave out. `subset` (evaluations.subsets) scores a fixed,
    seeded sample of each suite's items: separate runs too, left out of the same pages."""
    if word_probability not in WORD_PROBABILITY:
        raise ValueError(f"word_probability must be one of {', '.join(WORD_PROBABILITY)}")
    asked_models = list({m.pk: m for m in models}.values())
    asked_suites = list({s.pk: s for s in suites}.values())
    return _pairs_request(
        [(m, s) for m in asked_models for s in asked_suites],
        user=user,
        word_probability=word_probability,
        subset=subset,
    )


def suite_runs_request(
    *,
    models: Sequence[LanguageModel],
    benchmarks: Sequence[Suite],
    user: Any,
    subset: Subset | None = None,
) -> None:
    """`evaluations_request` as the run core's kinds registry calls it."""
    evaluations_request(models=models, suites=benchmarks, user=user, subset=subset)


def evaluations_rerun_outdated(
    *,
    model: LanguageModel | None = None,
    suite: Suite | None = None,
    user: User | AnonymousUser | None = None,
) -> RequestOutcome:
    """Queue, on the suites' current content, every (model, suite) whose done results
    are for an earlier content and that has no run on the current content yet (see
    `selectors.outdated_pairs`), narrowed to `model` and/or `suite`. One transaction;
    asking twice queues nothing the second time."""
    with transaction.atomic():
        return _pairs_request(outdated_pairs(model=model, suite=suite), user=user)


def _pairs_request(
    pairs: Sequence[tuple[LanguageModel, Suite]],
    *,
    user: User | AnonymousUser | None,
    word_probability: str = "tokens",
    subset: Subset | None = None,
) -> RequestOutcome:
    """The evaluation of each (model, suite) on the suite's current content, created
    where missing, in one transaction. New ones are sent to the GPU queue after their rows
    are committed.

    Raises BrokerUnavailable (after committing the rows) when the queue is unreachable;
    asking again later sends whatever was not sent."""
    runs.check_runnable([model for model, _suite in pairs])
    outcome = RequestOutcome(evaluations=[])
    requester = user if user is not None and user.is_authenticated else None
    by_pair: dict[tuple[int, int], Evaluation] = {}
    snapshots: dict[int, dict[str, Any]] = {}
    with transaction.atomic():
        # Rows are created in one global order (model id, suite id), so that two requests
        # for overlapping pairs wait for each other instead of deadlocking (PostgreSQL).
        for model, suite in sorted(pairs, key=lambda p: (p[0].pk, p[1].pk)):
            if (model.pk, suite.pk) in by_pair:
                continue
            evaluation, created = _evaluation_get_or_create(
                model=model,
                suite=suite,
                requester=requester,
                snapshots=snapshots,
                word_probability=word_probability,
                subset=subset,
            )
            (outcome.created if created else outcome.existing).append(evaluation)
            by_pair[model.pk, suite.pk] = evaluation
        asked = dict.fromkeys((m.pk, s.pk) for m, s in pairs)
        outcome.evaluations = [by_pair[key] for key in asked]
        # Sent once the rows are committed, so that a worker never sees a row that is
        # not there; a broker outage then raises BrokerUnavailable out of this block.
        runs.runs_enqueue_on_commit(kind=SUITE_RUNS, runs=outcome.evaluations)
    return outcome


def _evaluation_get_or_create(
    *,
    model: LanguageModel,
    suite: Suite,
    requester: User | None,
    snapshots: dict[int, dict[str, Any]],
    word_probability: str = "tokens",
    subset: Subset | None = None,
) -> tuple[Evaluation, bool]:
    """The evaluation of `model` on the suite's current content (on the sample of its
    items `subset` draws), created when missing (`snapshots` caches each suite's
    canonical form across models). The snapshot of a run on a subset holds the sampled
    items only, so that its payload, outcomes and pages are those of the sample."""
    sampled = subset_key(subset, suite.item_count)
    key = {
        "model": model,
        "suite": suite,
        "content_hash": suite.content_hash,
        "word_probability": word_probability,
        **sampled,
    }
    evaluation = Evaluation.objects.filter(**key).first()
    if evaluation is not None:
        return evaluation, False
    if suite.pk not in snapshots:
        snapshots[suite.pk] = selectors.suite_canonical(suite)
    snapshot = snapshots[suite.pk]
    if sampled["subset_size"]:
        snapshot = suite_sample(snapshot, subset)
    try:
        evaluation = evaluation_create(
            model=model,
            suite=suite,
            content_hash=suite.content_hash,
            snapshot=snapshot,
            word_probability=word_probability,
            subset_total=suite.item_count if sampled["subset_size"] else 0,
            **sampled,
            metric=outcomes.prediction_metric(snapshot["meta"].get("metric")),
            progress_total=len(formats.sentences(snapshot)),
            requested_by=requester,
        )
    except IntegrityError:
        return Evaluation.objects.get(**key), False
    return evaluation, True


def evaluation_create(
    *,
    model: LanguageModel,
    suite: Suite,
    content_hash: str,
    snapshot: dict[str, Any],
    **fields: Any,
) -> Evaluation:
    """An evaluation row and its snapshot (the suite as evaluated, `EvaluationSnapshot`),
    in one transaction: the one way an evaluation is made. `fields` are the evaluation's
    other columns. Its `snapshot` is then read without a query."""
    with transaction.atomic():
        evaluation = Evaluation.objects.create(
            model=model, suite=suite, content_hash=content_hash, **fields
        )
        # Assigning the evaluation also caches the row on it (a one-to-one's reverse side).
        EvaluationSnapshot.objects.create(evaluation=evaluation, content=snapshot)
    return evaluation


def scoring_payload(evaluation: Evaluation) -> dict[str, Any]:
    """Everything a GPU worker needs, so that it never touches the database."""
    model = evaluation.model
    payload = {
        "model": {"source": model.source, "revision": model.revision},
        "sentences": [regions for _item, _cond, regions in formats.sentences(evaluation.snapshot)],
        "straddling": settings.GYM_STRADDLING_TOKENS,
    }
    if evaluation.word_probability != "tokens":
        # Absent otherwise, so that payloads of ordinary runs stay as they were.
        payload["word_probability"] = evaluation.word_probability
    return payload


def progress_record(
    *, evaluation_id: int, attempt: int, done: int, total: int, restart: bool = False
) -> None:
    runs.run_progress(
        kind=SUITE_RUNS,
        run_id=evaluation_id,
        attempt=attempt,
        done=done,
        total=total,
        restart=restart,
    )


def evaluation_fail(*, evaluation_id: int, attempt: int, reason: str) -> None:
    runs.run_fail(kind=SUITE_RUNS, run_id=evaluation_id, attempt=attempt, reason=reason)


def suite_results_store(*, run_id: int, attempt: int, results: dict[str, Any]) -> bool:
    """The store function of suite runs (the kinds registry's calling convention)."""
    return results_store(evaluation_id=run_id, attempt=attempt, results=results)


def results_store(*, evaluation_id: int, attempt: int, results: dict[str, Any]) -> bool:
    """Write region values, prediction outcomes and accuracy; the run becomes done, with
    all its rows, at once for every reader.

    On PostgreSQL in one transaction: its row locks hold up no other writer, so a long
    one costs the site nothing. On SQLite the one write lock would be held for the whole
    store (a minute at 100,000 items) and every web write would wait for it and fail
    after the busy timeout, so the item rows are written in short transactions with
    pauses between them (`_store_in_chunks`); readers of item rows read only done runs.

    Idempotent: a second delivery (or a stale attempt) finds the evaluation done or the
    attempt changed, and writes nothing. Returns whether it wrote."""
    from django.db import connection

    if connection.vendor == "sqlite" and not connection.in_atomic_block:
        return _store_in_chunks(evaluation_id=evaluation_id, attempt=attempt, results=results)
    with transaction.atomic():
        evaluation = _open_evaluation(evaluation_id, attempt).select_for_update().first()
        if evaluation is None:
            return False
        outcome = _outcome(evaluation, results)
        if outcome is None:
            return False
        ItemResult.objects.filter(evaluation=evaluation).delete()
        ItemResult.objects.bulk_create(_item_rows(evaluation, outcome), batch_size=500)
        _finish(evaluation, outcome, results)
    return True


def _open_evaluation(evaluation_id: int, attempt: int) -> QuerySet[Evaluation]:
    """The evaluation, if this attempt may still become done."""
    return Evaluation.objects.select_related("model").filter(
        pk=evaluation_id, attempt=attempt, status__in=runs.ALLOWED_FROM[S.DONE]
    )


def _outcome(evaluation: Evaluation, results: dict[str, Any]) -> outcomes.SuiteOutcome | None:
    """The items' outcomes and the accuracy; None (and the run failed) for results that
    do not fit the suite."""
    keys = formats.sentences(evaluation.snapshot)
    scored = results["sentences"]
    try:
        if len(scored) != len(keys):
            raise ValueError(f"the worker returned {len(scored)} sentences for {len(keys)}")
        return outcomes.score_items(evaluation.snapshot, scored)
    except ValueError as invalid:
        runs.run_fail(
            kind=SUITE_RUNS, run_id=evaluation.pk, attempt=evaluation.attempt, reason=str(invalid)
        )
        return None


def _item_rows(evaluation: Evaluation, outcome: outcomes.SuiteOutcome) -> list[ItemResult]:
    return [
        ItemResult(
            evaluation=evaluation,
            item_number=item.item_number,
            position=position,
            values=item.values,
            outcomes=item.outcomes,
            passed=item.passed,
            tokens=item.tokens,
        )
        for position, item in enumerate(outcome.items)
    ]


def _finish(
    evaluation: Evaluation, outcome: outcomes.SuiteOutcome, results: dict[str, Any]
) -> None:
    """The predictions' tallies and the done transition, after the item rows; inside
    the caller's transaction."""
    PredictionResult.objects.filter(evaluation=evaluation).delete()
    PredictionResult.objects.bulk_create(
        PredictionResult(
            evaluation=evaluation,
            position=p.position,
            formula=p.formula,
            passed=p.passed,
            evaluated=p.evaluated,
            accuracy=p.accuracy,
            ties=p.ties,
        )
        for p in outcome.predictions
    )
    info = results.get("model_info") or {}
    sentences = len(results["sentences"])
    runs.run_advance(
        SUITE_RUNS,
        evaluation.pk,
        evaluation.attempt,
        S.DONE,
        accuracy=outcome.accuracy,
        ties=outcome.ties,
        accuracy_random_ties=outcome.accuracy_random_ties,
        diagnostics=results.get("diagnostics") or {},
        model_info=info,
        progress_done=sentences,
        progress_total=sentences,
        finished_at=timezone.now(),
        store_claim="",
    )
    learn_model_facts(evaluation.model, info)


# Rows deleted or inserted by one statement of a chunked store.
_BATCH_ROWS = 500


def _store_in_chunks(*, evaluation_id: int, attempt: int, results: dict[str, Any]) -> bool:
    """The SQLite store: bounded transactions, all-or-nothing for readers.

    1. The outcomes are worked out outside any transaction (no lock held meanwhile).
    2. The delivery claims the store (`Evaluation.store_claim`, a conditional update).
       A later delivery of the same attempt (the message redelivered after a worker
       died, or while this one is slow) claims it in turn; this one then stops at its
       next transaction, having written nothing more.
    3. Transactions of at most GYM_STORE_CHUNK_SECONDS of writing (or
       GYM_STORE_CHUNK_ROWS rows) first delete the rows a delivery that died left, then
       insert this one's; each begins by checking the claim (in the transaction, so
       nothing else writes between the check and the rows). Between two of them the
       lock is let go for GYM_STORE_CHUNK_PAUSE_SECONDS, so a waiting web write gets it.
    4. A last short transaction writes the predictions and makes the run done.
    Until then the run is not done and readers show none of its rows; a store that dies
    half way leaves it so, and the next delivery removes the partial rows and completes
    it (the unique (evaluation, item_number) constraint holds throughout). A run cancelled
    or failed meanwhile stops the store at its next transaction, which then removes the
    rows written (`_remove_rows_of_closed`)."""
    began = time.monotonic()
    open_run = _open_evaluation(evaluation_id, attempt)
    evaluation = open_run.first()
    if evaluation is None:
        return False
    outcome = _outcome(evaluation, results)
    if outcome is None:
        return False
    claim = uuid.uuid4().hex
    if not open_run.update(store_claim=claim):
        return False
    claimed = open_run.filter(store_claim=claim)
    batches = _chunk_batches(evaluation_id, _item_rows(evaluation, outcome))
    transactions = 0
    more = True
    while more:
        with transaction.atomic():
            lost = not claimed.exists()
            if not lost:
                transactions += 1
                more = _write_chunk(batches)
                if not more:
                    # The last rows and the done transition commit together.
                    _finish(evaluation, outcome, results)
        if lost:
            # Outside the transaction: the removal takes short ones of its own.
            if _remove_rows_of_closed(evaluation_id, attempt):
                log.info("store of evaluation %s stopped: the run was closed", evaluation_id)
            else:
                log.info("store of evaluation %s left to another delivery", evaluation_id)
            return False
        if more:
            _between_chunks()
    log.info(
        "stored %s item rows of evaluation %s in %s transactions, %.1f s",
        len(outcome.items),
        evaluation_id,
        transactions,
        time.monotonic() - began,
    )
    return True


def _write_chunk(batches: Iterator[int]) -> bool:
    """Run `batches`' statements for one transaction: up to GYM_STORE_CHUNK_ROWS rows or
    GYM_STORE_CHUNK_SECONDS of writing. Returns whether any are left."""
    began = time.monotonic()
    written = 0
    for count in batches:
        written += count
        if (
            written >= settings.GYM_STORE_CHUNK_ROWS
            or time.monotonic() - began >= settings.GYM_STORE_CHUNK_SECONDS
        ):
            return True
    return False


def _remove_rows_of_closed(evaluation_id: int, attempt: int) -> bool:
    """After a chunked store lost its claim: when the run was cancelled or failed on this
    attempt meanwhile (not taken over by another delivery, not retried), remove the rows
    the store wrote, in the same short transactions, while it stays so; a retry's store
    removes whatever is left. Returns whether the run was closed. Each transaction checks
    and deletes under the write lock (IMMEDIATE), so no store of a retry can be writing."""
    closed = Evaluation.objects.filter(
        pk=evaluation_id, attempt=attempt, status__in=(S.CANCELLED, S.FAILED)
    )
    deletions = _row_deletions(evaluation_id)
    while True:
        with transaction.atomic():
            if not closed.exists():
                return False
            deleted = next(deletions, 0)
        if not deleted:
            return True
        _between_chunks()


def _statement_rows() -> int:
    """Rows deleted or inserted by one statement of a chunked store."""
    return max(1, min(_BATCH_ROWS, settings.GYM_STORE_CHUNK_ROWS))


def _row_deletions(evaluation_id: int) -> Iterator[int]:
    """Delete the evaluation's item rows a statement at a time; yields the rows each
    deleted. Each statement runs when the next value is asked for, inside the caller's
    transaction of the moment."""
    size = _statement_rows()
    stored = ItemResult.objects.filter(evaluation_id=evaluation_id)
    while ids := list(stored.values_list("pk", flat=True)[:size]):
        ItemResult.objects.filter(pk__in=ids).delete()
        yield len(ids)


def _chunk_batches(evaluation_id: int, rows: list[ItemResult]) -> Iterator[int]:
    """Delete the evaluation's rows left by an earlier delivery, then insert `rows`, a
    statement at a time; yields the rows each touched (see `_row_deletions`)."""
    yield from _row_deletions(evaluation_id)
    size = _statement_rows()
    for start in range(0, len(rows), size):
        batch = rows[start : start + size]
        ItemResult.objects.bulk_create(batch)
        yield len(batch)


def _between_chunks() -> None:
    """Let the write lock go long enough for a waiting writer to take it. Test hook
    (GYM_RUN_HOLD_DIR, unset in production): while a file named `hold-store` is in that
    folder, wait here, so that a test decides when a store is half done."""
    time.sleep(settings.GYM_STORE_CHUNK_PAUSE_SECONDS)
    folder = settings.GYM_RUN_HOLD_DIR
    while folder and (Path(folder) / "hold-store").exists():
        time.sleep(0.05)
