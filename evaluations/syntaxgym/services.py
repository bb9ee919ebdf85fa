"""Writes for evaluations: registering models, requesting and retrying evaluations,
recording progress and storing results. Each is one function, one transaction."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction
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
from evaluations.syntaxgym import outcomes
from evaluations.syntaxgym.selectors import outdated_pairs
from suites import formats
from suites.models import Suite
from suites.syntaxgym import selectors

log = logging.getLogger(__name__)

# Suite evaluations as a kind of run: the lifecycle in `evaluations.runs.lifecycle` moves them.
SUITE_RUNS = runs.RunKind(
    name="suite",
    model="evaluations.Evaluation",
    payload="evaluations.syntaxgym.services.scoring_payload",
    work="evaluations.scoring.worker.run_scoring",
    warm_up="evaluations.scoring.loading.preload_transformers",
    store="evaluations.syntaxgym.services.suite_results_store",
    pack_work="evaluations.scoring.worker.run_scoring_groups",
    label="Suite",
    api_detail="api-evaluation",
    request="evaluations.syntaxgym.services.suite_runs_request",
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
) -> RequestOutcome:
    """One model on some suites: see `evaluations_request`."""
    return evaluations_request(
        models=[model], suites=suites, user=user, word_probability=word_probability
    )


def evaluations_request(
    *,
    models: Iterable[LanguageModel],
    suites: Iterable[Suite],
    user: User | AnonymousUser | None = None,
    word_probability: str = "tokens",
) -> RequestOutcome:
    """Every model on every suite, in one transaction: one evaluation per (model, suite,
    content hash, word probability); asking again returns the existing one. `evaluations`
    lists them model by model, each in the order the suites were asked (see
    `_pairs_request`). `word_probability="corrected"` asks for word-corrected region
    sums (evaluations.scoring.boundary): separate runs, which the leaderboard and the
    pages that compare models leave out."""
    if word_probability not in WORD_PROBABILITY:
        raise ValueError(f"word_probability must be one of {', '.join(WORD_PROBABILITY)}")
    asked_models = list({m.pk: m for m in models}.values())
    asked_suites = list({s.pk: s for s in suites}.values())
    return _pairs_request(
        [(m, s) for m in asked_models for s in asked_suites],
        user=user,
        word_probability=word_probability,
    )


def suite_runs_request(
    *, models: Sequence[LanguageModel], benchmarks: Sequence[Suite], user: Any
) -> None:
    """`evaluations_request` as the run core's kinds registry calls it."""
    evaluations_request(models=models, suites=benchmarks, user=user)


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
) -> tuple[Evaluation, bool]:
    """The evaluation of `model` on the suite's current content, created when missing
    (`snapshots` caches each suite's canonical form across models)."""
    key = {
        "model": model,
        "suite": suite,
        "content_hash": suite.content_hash,
        "word_probability": word_probability,
    }
    evaluation = Evaluation.objects.filter(**key).first()
    if evaluation is not None:
        return evaluation, False
    if suite.pk not in snapshots:
        snapshots[suite.pk] = selectors.suite_canonical(suite)
    snapshot = snapshots[suite.pk]
    try:
        evaluation = evaluation_create(
            model=model,
            suite=suite,
            content_hash=suite.content_hash,
            snapshot=snapshot,
            word_probability=word_probability,
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


def evaluation_retry(*, evaluation: Evaluation, user: User | AnonymousUser | None) -> Evaluation:
    """Send a failed or cancelled evaluation again (see `runs.run_retry`)."""
    return runs.run_retry(run=evaluation, user=user)


def evaluation_cancel(*, evaluation: Evaluation, user: User | AnonymousUser | None) -> Evaluation:
    return runs.run_cancel(run=evaluation, user=user)


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
    """Write region values, prediction outcomes and accuracy in one transaction.

    Idempotent: a second delivery (or a stale attempt) finds the evaluation done or the
    attempt changed, and writes nothing. Returns whether it wrote."""
    with transaction.atomic():
        evaluation = (
            Evaluation.objects.select_for_update()
            .select_related("model")
            .filter(pk=evaluation_id)
            .first()
        )
        if (
            evaluation is None
            or evaluation.attempt != attempt
            or evaluation.status not in runs.ALLOWED_FROM[S.DONE]
        ):
            return False
        snapshot = evaluation.snapshot
        keys = formats.sentences(snapshot)
        scored = results["sentences"]
        try:
            if len(scored) != len(keys):
                raise ValueError(f"the worker returned {len(scored)} sentences for {len(keys)}")
            outcome = outcomes.score_items(snapshot, scored)
        except ValueError as invalid:
            runs.run_fail(
                kind=SUITE_RUNS, run_id=evaluation_id, attempt=attempt, reason=str(invalid)
            )
            return False
        item_rows = [
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
        prediction_rows = [
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
        ]
        ItemResult.objects.filter(evaluation=evaluation).delete()
        PredictionResult.objects.filter(evaluation=evaluation).delete()
        ItemResult.objects.bulk_create(item_rows, batch_size=500)
        PredictionResult.objects.bulk_create(prediction_rows)
        info = results.get("model_info") or {}
        runs.run_advance(
            SUITE_RUNS,
            evaluation_id,
            attempt,
            S.DONE,
            accuracy=outcome.accuracy,
            ties=outcome.ties,
            accuracy_random_ties=outcome.accuracy_random_ties,
            diagnostics=results.get("diagnostics") or {},
            model_info=info,
            progress_done=len(keys),
            progress_total=len(keys),
            finished_at=timezone.now(),
        )
        learn_model_facts(evaluation.model, info)
    return True
