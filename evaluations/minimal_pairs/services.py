"""Writes for minimal-pair evaluations: requesting runs, storing a worker's results, and
importing an NLPScholar predictions TSV as the results of a named model. The lifecycle
(enqueue, progress, fail, cancel, retry, sweep) is `evaluations.runs.lifecycle`'s; this module
registers minimal pairs as a kind of run and brings its payload and its store."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from evaluations import token_data
from evaluations.language_models.registry import ModelRegistrationError, learn_model_facts
from evaluations.minimal_pairs import result_page as pair_result_page
from evaluations.minimal_pairs import results as pair_results
from evaluations.minimal_pairs.analysis import METRICS
from evaluations.minimal_pairs.tokens import TokenTable, parse_predictions_tsv
from evaluations.models import IMPORTED_PREFIX, LanguageModel, PairEvaluation, PairSentenceTokens
from evaluations.runs import lifecycle as runs
from evaluations.scoring import WORD_PROBABILITY
from evaluations.subsets import Subset, run_subset, subset_key
from gym.errors import ApplicationError
from suites.catalog_services import upload_limits
from suites.formats import minimal_pairs as mp
from suites.formats.limits import InputLimits
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet, PairSetVersion

PAIR_RUNS = runs.RunKind(
    work_name="Scoring",
    shorter="Split the minimal-pair set into smaller ones",
    name="pairs",
    model="evaluations.PairEvaluation",
    payload="evaluations.minimal_pairs.services.pair_payload",
    work="evaluations.minimal_pairs.worker.run_pairs",
    warm_up="evaluations.scoring.preload.preload_transformers",
    store="evaluations.minimal_pairs.services.pair_results_store",
    pack_work="evaluations.minimal_pairs.worker.run_pairs_groups",
    label="Minimal pairs",
    api_detail="api-pair-evaluation",
    request="evaluations.minimal_pairs.services.pair_runs_request",
    retry_check="evaluations.minimal_pairs.services.pair_retry_check",
    results="evaluations.minimal_pairs.reads.pair_results",
    chances="evaluations.minimal_pairs.reads.pair_chances",
    metrics="evaluations.minimal_pairs.reads.pair_metrics",
    board_section="evaluations.minimal_pairs.reads.board_section",
    model_section="evaluations.minimal_pairs.reads.model_section",
)
runs.register(PAIR_RUNS)

S = PairEvaluation.Status
User = AuthUser | AnonymousUser | None
BULK_BATCH = 2000


class PairRequestInvalid(ApplicationError):
    """Nothing to ask for (no model or no set)."""


PairRequestOutcome = runs.RequestOutcome[PairEvaluation]


def pair_runs_request(
    *,
    models: Sequence[LanguageModel],
    benchmarks: Sequence[MinimalPairSet],
    user: Any,
    subset: Subset | None = None,
) -> None:
    """`pair_evaluation_request` as the run core's kinds registry calls it."""
    pair_evaluation_request(models=models, pair_sets=benchmarks, user=user, subset=subset)


def pair_evaluation_request(
    *,
    user: User,
    models: Iterable[LanguageModel],
    pair_sets: Iterable[MinimalPairSet],
    word_probability: str = "tokens",
    metric: str | None = None,
    subset: Subset | None = None,
) -> PairRequestOutcome:
    """One run per (model, set, set content hash, word probability, metric, subset):
    asking again
    returns the existing one (also an imported one). New runs go to the GPU queue once
    their rows are committed. `word_probability="corrected"` asks for word-corrected
    surprisals (each word's last token carries its boundary correction): separate runs,
    which the leaderboard and the comparisons leave out. `metric` (METRICS) is how the
    runs compare pairs; without it each set's own (`MinimalPairSet.metric`, from its
    format): runs of another metric are separate runs. `subset` (evaluations.subsets)
    scores a fixed, seeded sample of each set's pairs, a pair's sentences together:
    separate runs, which the leaderboard and the comparisons leave out.

    Raises PairRequestInvalid or ModelNotRunnable (nothing written), BrokerUnavailable
    (rows committed) when the queue cannot be reached."""
    if word_probability not in WORD_PROBABILITY:
        raise PairRequestInvalid(f"word_probability must be one of {', '.join(WORD_PROBABILITY)}")
    if metric is not None and metric not in METRICS:
        raise PairRequestInvalid(f"metric must be one of {', '.join(METRICS)}")
    asked_models = list({m.pk: m for m in models}.values())
    asked_sets = list({s.pk: s for s in pair_sets}.values())
    if not asked_models or not asked_sets:
        raise PairRequestInvalid("choose at least one model and one minimal-pair set")
    runs.check_runnable(asked_models)
    requester = user if user is not None and user.is_authenticated else None
    outcome = PairRequestOutcome(evaluations=[])
    found: dict[tuple[int, int], PairEvaluation] = {}
    with transaction.atomic():
        # One global order (set, then model), so that overlapping requests never deadlock.
        for pair_set in sorted(asked_sets, key=lambda s: s.pk):
            units = pair_results.sample_units(pair_set)
            sampled = subset_key(subset, units)
            for model in sorted(asked_models, key=lambda m: m.pk):
                key = {
                    "model": model,
                    "pair_set": pair_set,
                    "content_hash": pair_set.content_hash,
                    "word_probability": word_probability,
                    "metric": metric or pair_set.metric,
                    **sampled,
                }
                run, created = runs.run_get_or_create(
                    PairEvaluation,
                    key,
                    progress_total=pair_set.sentence_count,
                    requested_by=requester,
                    subset_total=units if sampled["subset_size"] else 0,
                )
                (outcome.created if created else outcome.existing).append(run)
                found[(pair_set.pk, model.pk)] = run
        outcome.evaluations = [found[(s.pk, m.pk)] for s in asked_sets for m in asked_models]
        runs.runs_enqueue_on_commit(kind=PAIR_RUNS, runs=outcome.evaluations)
    return outcome


CONTENT_GONE = (
    "the set's content changed after this run was asked for, and the sentences it was "
    "asked on are no longer stored; ask for the model on the set's current content"
)


def pair_payload(evaluation: PairEvaluation) -> dict[str, Any]:
    """Everything the GPU worker needs (see evaluations.minimal_pairs.worker): the
    sentences in order of the content the run was asked on, the set's current rows or,
    for a retry of an outdated run, the version kept when the set was replaced. Runs of
    one model share tasks when their sets are small."""
    model = evaluation.model
    pair_set = evaluation.pair_set
    sentences: list[str] | None = None
    if evaluation.is_subset:
        try:
            sentences = [s.sentence for s in pair_results.run_set_data(evaluation).sentences]
        except pair_results.PairAnalysisInvalid:
            pass  # scored on the current rows, and refused by the store (CONTENT_GONE)
    elif evaluation.outdated:
        try:
            kept = pair_sets.pair_set_data_at(pair_set, evaluation.content_hash)
            sentences = [s.sentence for s in kept.sentences]
        except PairSetVersion.DoesNotExist:
            pass  # scored on the current rows, and refused by the store (CONTENT_GONE)
    if sentences is None:
        rows = pair_set.sentences.order_by("position").values_list("sentence", flat=True)
        sentences = list(rows.iterator(chunk_size=5000))
    payload: dict[str, Any] = {
        "model": {"source": model.source, "revision": model.revision},
        "sentences": sentences,
    }
    if evaluation.word_probability != "tokens":
        # Absent otherwise, so that payloads of ordinary runs stay as they were.
        payload["word_probability"] = evaluation.word_probability
    if evaluation.metric == "lm_eval":
        # Scored on lm-evaluation-harness's string; absent for the others (same tokens).
        payload["metric"] = "lm_eval"
    return payload


def pair_retry_check(evaluation: PairEvaluation) -> str:
    """A retry scores the content the run was asked on: refused where it is gone (the
    content changed outside the replace service, which keeps it)."""
    if not evaluation.outdated:
        return ""
    if evaluation.pair_set.versions.filter(content_hash=evaluation.content_hash).exists():
        return ""
    return f"This run cannot be retried: {CONTENT_GONE}."


def _results_problem(results: dict[str, Any], data: mp.MinimalPairSet) -> str:
    packed = results.get("sentences")
    if not isinstance(packed, list) or len(packed) != len(data.sentences):
        count = len(packed) if isinstance(packed, list) else 0
        return f"the worker returned {count} sentences for {len(data.sentences)}"
    for sentence, tokens in zip(data.sentences, packed, strict=True):
        try:
            token_data.check_packed(tokens)
        except ValueError as exc:
            return f"the worker's tokens of sentence {sentence.sentid} are malformed: {exc}"
    return ""


def _tokens_save(
    evaluation: PairEvaluation, sentids: Sequence[str], packed: Sequence[dict]
) -> None:
    PairSentenceTokens.objects.filter(evaluation=evaluation).delete()
    PairSentenceTokens.objects.bulk_create(
        (
            PairSentenceTokens(evaluation=evaluation, position=i, sentid=sentid, tokens=tokens)
            for i, (sentid, tokens) in enumerate(zip(sentids, packed, strict=True))
        ),
        batch_size=BULK_BATCH,
    )


def _default_outcome(
    table: TokenTable, data: mp.MinimalPairSet, metric: str
) -> tuple[float | None, int, list[str]]:
    """Accuracy and ties under DEFAULT_OPTIONS and `metric`, and the analysis's warnings
    (a set without pairs has no accuracy)."""
    if not data.has_pairs:
        return None, 0, []
    options = replace(pair_results.DEFAULT_OPTIONS, metric=metric)
    analysis = pair_results.analyze_tokens(table, data, options, tables=("by_cond",))
    accuracy, ties = pair_results.accuracy_and_ties(analysis)
    return accuracy, ties, analysis.warnings


def _locked_run(run_id: int, attempt: int) -> PairEvaluation | None:
    """The run, locked for this transaction, if results of `attempt` may still be stored."""
    evaluation = (
        PairEvaluation.objects.select_for_update()
        .select_related("model", "pair_set")
        .filter(pk=run_id)
        .first()
    )
    if (
        evaluation is None
        or evaluation.attempt != attempt
        or evaluation.status not in runs.ALLOWED_FROM[S.DONE]
    ):
        return None
    return evaluation


def _worker_outcome(
    evaluation: PairEvaluation, results: dict[str, Any], data: mp.MinimalPairSet
) -> tuple[float | None, int, str]:
    """(accuracy, ties, "") under DEFAULT_OPTIONS, or (None, 0, why the results are
    refused)."""
    problem = _results_problem(results, data)
    if problem:
        return None, 0, problem
    table = pair_results.packed_table(
        (
            (s.sentid, s.sentence, tokens)
            for s, tokens in zip(data.sentences, results["sentences"], strict=True)
        ),
        model_name=evaluation.model.name,
        tokenizer=str((results.get("model_info") or {}).get("tokenizer") or ""),
    )
    try:
        accuracy, ties, _warnings = _default_outcome(table, data, evaluation.metric)
    except pair_results.PairAnalysisInvalid as invalid:
        return None, 0, f"the results cannot be analysed: {invalid}"
    return accuracy, ties, ""


def pair_results_store(*, run_id: int, attempt: int, results: dict[str, Any]) -> bool:
    """Write the sentences' tokens and the default accuracy in one transaction; False
    (nothing written) when the run is finished or the attempt is stale, so a
    re-delivery changes nothing."""
    with transaction.atomic():
        evaluation = _locked_run(run_id, attempt)
        if evaluation is None:
            return False
        try:
            # The content the run was asked on, also when the set was replaced since.
            data = pair_sets.pair_set_data_at(evaluation.pair_set, evaluation.content_hash)
        except PairSetVersion.DoesNotExist:
            runs.run_fail(kind=PAIR_RUNS, run_id=run_id, attempt=attempt, reason=CONTENT_GONE)
            return False
        # A run on a subset: the sampled pairs only, as its payload sent them.
        data = pair_results.pair_sample(data, run_subset(evaluation))
        accuracy, ties, problem = _worker_outcome(evaluation, results, data)
        if problem:
            runs.run_fail(kind=PAIR_RUNS, run_id=run_id, attempt=attempt, reason=problem)
            return False
        _tokens_save(evaluation, [s.sentid for s in data.sentences], results["sentences"])
        info = results.get("model_info") or {}
        count = len(data.sentences)
        runs.run_advance(
            PAIR_RUNS,
            run_id,
            attempt,
            S.DONE,
            accuracy=accuracy,
            ties=ties,
            diagnostics=results.get("diagnostics") or {},
            model_info=info,
            progress_done=count,
            progress_total=count,
            finished_at=timezone.now(),
        )
        learn_model_facts(evaluation.model, info)
        # The result page's first view reads its analysis from a shared cache.
        transaction.on_commit(partial(pair_result_page.summary_warm, run_id))
    return True


# ---------------------------------------------------------------- imported predictions


class PredictionsInvalid(ApplicationError):
    """The predictions cannot be imported; `errors` lists every problem (row, column).
    Nothing was written."""

    def __init__(self, errors: Sequence[mp.PairSetError]) -> None:
        self.errors = mp.cap_errors(list(errors))
        super().__init__("; ".join(str(e) for e in self.errors[:3]))

    def error_list(self) -> list[dict[str, Any]]:
        return [{"code": self.code, **error.as_dict()} for error in self.errors]


class ResultsExist(runs.RunConflict):
    """The model already has results on this content of the set."""


def may_import(user: User, pair_set: MinimalPairSet) -> bool:
    """The set's owner and staff import results onto it (they appear on leaderboards)."""
    if user is None or not user.is_authenticated:
        return False
    return bool(user.is_staff) or (pair_set.owner_id is not None and pair_set.owner_id == user.pk)


def imported_model_register(*, name: str, display_name: str = "", user: User) -> LanguageModel:
    """Register a model by name only, to hold imported results: its source is
    `imported:<name>`, its kind unknown, and no worker is ever asked to run it."""
    slug = slugify(name)
    if not slug:
        raise ModelRegistrationError({"model": "give a short name of letters, digits and hyphens"})
    if LanguageModel.objects.filter(name=slug).exists():
        raise ModelRegistrationError({"model": f"a model named {slug!r} is already registered"})
    try:
        with transaction.atomic():
            return LanguageModel.objects.create(
                name=slug,
                display_name=(display_name or name).strip()[:200] or slug,
                source=f"{IMPORTED_PREFIX}{slug}",
                description="Results imported from NLPScholar predictions; not run on this site.",
                registered_by=user if user is not None and user.is_authenticated else None,
            )
    except IntegrityError:
        raise ModelRegistrationError({"model": "that model was registered a moment ago"}) from None


def _pick_model(table: TokenTable, file_model: str) -> tuple[TokenTable, list[mp.PairSetError]]:
    """The rows of one model of the file: the only one, or the one named `file_model`."""
    names = sorted(set(table.model))
    if file_model:
        if file_model not in names:
            listed = ", ".join(names[:10]) or "none"
            return table, [mp.PairSetError(None, "model", f"no rows of model {file_model!r} "
                                           f"(the file has: {listed})")]  # fmt: skip
        keep = [i for i, name in enumerate(table.model) if name == file_model]
        return _rows(table, keep), []
    if len(names) > 1:
        message = (
            f"the file holds predictions of {len(names)} models ({', '.join(names[:10])}); "
            "name the one to import (file_model)"
        )
        return table, [mp.PairSetError(None, "model", message)]
    return table, []


def _rows(table: TokenTable, keep: list[int]) -> TokenTable:
    pick = lambda values: [values[i] for i in keep]  # noqa: E731
    return TokenTable(
        token=pick(table.token),
        sentid=pick(table.sentid),
        word=pick(table.word),
        wordpos=table.wordpos[keep],
        model=pick(table.model),
        tokenizer=pick(table.tokenizer),
        punctuation=table.punctuation[keep],
        prob=table.prob[keep],
        surp=table.surp[keep],
        line=pick(table.line),
    )


# The refusal of rows whose sentid is not in the set names the choice that leaves them
# out: the page's checkbox, the API's query parameter and the command's flag.
DROP_UNKNOWN_ROWS_HINT = (
    "to import the rest (e.g. the set left out incomplete pairs on upload), ask to leave out "
    "rows whose sentid is not in the set (the import form's checkbox, drop_unknown_rows=1 "
    "in the API, --drop-unknown-rows on the command line)"
)


def _group_rows(
    table: TokenTable, data: mp.MinimalPairSet, *, drop_unknown_rows: bool = False
) -> tuple[dict[str, list[int]], list[mp.PairSetError], list[str]]:
    """Row indices per sentid (file order), every row or sentence that does not fit, and
    a warning for the rows left out because their sentid is not in the set (with
    `drop_unknown_rows`; an error per sentid otherwise)."""
    known = {s.sentid for s in data.sentences}
    groups: dict[str, list[int]] = {}
    errors: list[mp.PairSetError] = []
    unknown: dict[str, int] = {}
    wordpos = table.wordpos.tolist()
    for i, sentid in enumerate(table.sentid):
        if sentid not in known:
            if drop_unknown_rows:
                unknown[sentid] = unknown.get(sentid, 0) + 1
                continue
            if sentid not in groups:
                errors.append(mp.PairSetError(table.line[i], "sentid",
                                              f"sentid {sentid!r} is not in the set; "
                                              f"{DROP_UNKNOWN_ROWS_HINT}"))  # fmt: skip
            groups.setdefault(sentid, [])
            continue
        if wordpos[i] < 0:
            errors.append(mp.PairSetError(table.line[i], "wordpos", "a word position is 0 or more"))
        groups.setdefault(sentid, []).append(i)
    for sentence in data.sentences:
        if not groups.get(sentence.sentid):
            errors.append(mp.PairSetError(None, "sentid", f"no rows for sentid "
                          f"{sentence.sentid!r} (data row {sentence.row}): every sentence of "
                          "the set needs its tokens"))  # fmt: skip
    warnings = []
    if unknown:
        rows = sum(unknown.values())
        named = ", ".join(repr(sentid) for sentid in list(unknown)[:10])
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        warnings.append(
            f"rows left out because their sentid is not in the set: {rows} "
            f"(of {len(unknown)} sentence{'s' if len(unknown) != 1 else ''}: {named}{more})"
        )
    return groups, errors, warnings


def _packed_sentences(
    table: TokenTable, groups: dict[str, list[int]], sentids: Sequence[str]
) -> list[dict[str, list[Any]]]:
    """Each sentence's rows packed with their own words (the arrays as lists once: a
    BLiMP-sized file has 1.4 million rows)."""
    surp = table.surp.tolist()
    wordpos = table.wordpos.tolist()
    punct = table.punctuation.tolist()
    packed = []
    for sentid in sentids:
        rows = groups[sentid]
        packed.append(
            token_data.pack_word_tokens(
                [table.token[i] for i in rows],
                [surp[i] for i in rows],
                [table.word[i] for i in rows],
                [wordpos[i] for i in rows],
                [punct[i] for i in rows],
            )
        )
    return packed


@dataclass
class ImportedPredictions:
    sentids: list[str]
    packed: list[dict[str, Any]]
    accuracy: float | None
    ties: int
    tokenizer: str
    file_model: str
    warnings: list[str]
    # What the import left out of the file (rows whose sentid is not in the set).
    import_warnings: list[str] = field(default_factory=list)


def predictions_check(
    *,
    data: str | bytes,
    pair_set_data: mp.MinimalPairSet,
    file_model: str = "",
    drop_unknown_rows: bool = False,
    limits: InputLimits | None = None,
    metric: str = "nlpscholar",
) -> ImportedPredictions:
    """Read and check a predictions TSV against the set: every row's sentid in the set
    (or, with `drop_unknown_rows`, rows of other sentids left out with a warning), every
    sentence of the set present, numbers that parse, an analysis that works.
    Raises PredictionsInvalid listing every problem. `limits`: what the file may hold
    (default: an upload's, the GYM_UPLOAD_MAX_* settings)."""
    try:
        table = parse_predictions_tsv(data, limits or upload_limits())
    except mp.MinimalPairFormatError as exc:
        raise PredictionsInvalid(exc.errors) from None
    table, errors = _pick_model(table, file_model.strip())
    if errors:
        raise PredictionsInvalid(errors)
    groups, errors, left_out = _group_rows(
        table, pair_set_data, drop_unknown_rows=drop_unknown_rows
    )
    if errors:
        raise PredictionsInvalid(errors)
    sentids = [s.sentid for s in pair_set_data.sentences]
    packed = _packed_sentences(table, groups, sentids)
    tokenizer = table.tokenizer[0] if len(table) else ""
    rebuilt = pair_results.packed_table(
        ((sentid, None, p) for sentid, p in zip(sentids, packed, strict=True)),
        model_name="imported",
        tokenizer=tokenizer,
    )
    try:
        accuracy, ties, warnings = _default_outcome(rebuilt, pair_set_data, metric)
    except pair_results.PairAnalysisInvalid as invalid:
        raise PredictionsInvalid([mp.PairSetError(None, None, str(invalid))]) from None
    return ImportedPredictions(
        sentids=sentids,
        packed=packed,
        accuracy=accuracy,
        ties=ties,
        tokenizer=tokenizer,
        file_model=table.model[0] if len(table) else "",
        warnings=warnings,
        import_warnings=left_out,
    )


def _import_model(name: str, *, register: bool) -> LanguageModel | None:
    """The registered model to import results for; None when it is to be registered."""
    if not name:
        raise ModelRegistrationError({"model": "name the model whose predictions these are"})
    model = LanguageModel.objects.filter(name=name).first()
    if model is None and not register:
        raise ModelRegistrationError(
            {
                "model": f"no model named {name[:100]!r} is registered; register it first, or "
                "ask to register it by name only for imported results (register)"
            }
        )
    return model


def pair_predictions_import(
    *,
    pair_set: MinimalPairSet,
    model_name: str,
    data: str | bytes,
    user: User,
    register: bool = False,
    display_name: str = "",
    file_model: str = "",
    drop_unknown_rows: bool = False,
    check_permission: bool = True,
    limits: InputLimits | None = None,
) -> PairEvaluation:
    """An NLPScholar predictions TSV (its own word, wordpos and punctuation taken as
    given) as the results of the model `model_name` on the set's current content: a done
    evaluation with origin "imported". With `register`, a model of that name that does
    not exist is registered for imported results only. With `drop_unknown_rows`, rows
    whose sentid is not in the set are left out (their count is in the evaluation's
    `diagnostics["import_warnings"]`), as an upload may leave out incomplete pairs.
    All or nothing.
    `check_permission=False` is for the site's administrators' command line (which may
    also lift the `limits` an upload is held to)."""
    if check_permission and not may_import(user, pair_set):
        raise PermissionDenied("Only the set's owner or staff may import results onto it.")
    model = _import_model(model_name.strip(), register=register)
    checked = predictions_check(
        data=data,
        pair_set_data=pair_sets.pair_set_data(pair_set),
        file_model=file_model,
        drop_unknown_rows=drop_unknown_rows,
        limits=limits,
        metric=imported_metric(pair_set),
    )
    with transaction.atomic():
        if model is None:
            model = imported_model_register(
                name=model_name.strip(), display_name=display_name, user=user
            )
        return _imported_save(pair_set=pair_set, model=model, checked=checked, user=user)


def imported_metric(pair_set: MinimalPairSet) -> str:
    """Imported predictions' metric: the set's, but never lm_eval (NLPScholar scores the
    sentence itself, not the harness's string)."""
    return "sentence" if pair_set.metric == "lm_eval" else pair_set.metric


def _imported_save(
    *, pair_set: MinimalPairSet, model: LanguageModel, checked: ImportedPredictions, user: User
) -> PairEvaluation:
    # Imported predictions are token surprisals as NLPScholar wrote them: ordinary runs.
    key = {
        "model": model,
        "pair_set": pair_set,
        "content_hash": pair_set.content_hash,
        "word_probability": "tokens",
        "metric": imported_metric(pair_set),
    }
    now = timezone.now()
    count = len(checked.sentids)
    evaluation, created = runs.run_get_or_create(
        PairEvaluation,
        key,
        origin=PairEvaluation.Origin.IMPORTED,
        status=S.DONE,
        enqueued=True,
        accuracy=checked.accuracy,
        ties=checked.ties,
        model_info={"tokenizer": checked.tokenizer, "imported_model": checked.file_model},
        diagnostics={
            "analysis_warnings": checked.warnings,
            "import_warnings": checked.import_warnings,
        },
        progress_done=count,
        progress_total=count,
        requested_by=user if user is not None and user.is_authenticated else None,
        started_at=now,
        finished_at=now,
    )
    if not created:
        raise ResultsExist(
            f"{model.name} already has results on this content of {pair_set.name} "
            f"(evaluation {evaluation.pk}, {evaluation.origin}); nothing was imported."
        )
    _tokens_save(evaluation, checked.sentids, checked.packed)
    return evaluation
