"""Writes for probing runs: requesting them and storing their results. The lifecycle
(enqueue, progress, fail, cancel, retry, sweep) is `evaluations.runs.lifecycle`'s; this module
registers probing as a kind of run and brings its payload and its store."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from evaluations.language_models.registry import learn_model_facts
from evaluations.models import LanguageModel, ProbingAnnotation, ProbingLayerResult, ProbingRun
from evaluations.probing.controls import APPLICABLE, DEFAULT_SEEDS, MAX_SEEDS
from evaluations.probing.selectors import annotation_sample
from evaluations.runs import lifecycle as runs
from evaluations.subsets import (
    Subset,
    canonical_key,
    run_subset,
    sample_indices,
    stratified_indices,
    subset_key,
)
from gym.errors import ApplicationError, FieldErrors
from suites.corpora.models import Corpus
from suites.corpora.services import corpus_in_store
from suites.models import ProbingTask

PROBING_RUNS = runs.RunKind(
    work_name="Probing",
    shorter="Use a task with fewer sentences",
    name="probing",
    model="evaluations.ProbingRun",
    payload="evaluations.probing.services.probing_payload",
    work="evaluations.probing.worker.run_probing",
    warm_up="evaluations.scoring.preload.preload_transformers",
    store="evaluations.probing.services.probing_results_store",
    label="Probing",
    api_detail="api-probing-run",
    request="evaluations.probing.services.probing_runs_request",
    retry_check="evaluations.probing.services.probing_retry_check",
    results="evaluations.probing.reads.probing_results",
    chances="evaluations.probing.reads.probing_chances",
    metrics="evaluations.probing.reads.probing_metrics",
    board_section="evaluations.probing.reads.board_section",
    model_section="evaluations.probing.reads.model_section",
)
runs.register(PROBING_RUNS)

S = ProbingRun.Status
POOLINGS = tuple(ProbingRun.Pooling.values)
PROBES = tuple(ProbingRun.Probe.values)


class ProbingRequestInvalid(FieldErrors):
    """A probing run that cannot be asked for; `errors` maps the field to the reason."""


def probing_request_problems(
    models: list[LanguageModel], *, pooling: str, probe: str, seeds: int = DEFAULT_SEEDS
) -> dict[str, str]:
    """What is wrong with asking for these runs, by field ({} when nothing is)."""
    errors: dict[str, str] = {}
    if not isinstance(seeds, int) or isinstance(seeds, bool) or not 1 <= seeds <= MAX_SEEDS:
        errors["seeds"] = f"seeds must be a whole number from 1 to {MAX_SEEDS}, not {seeds!r}"
    if pooling not in POOLINGS:
        errors["pooling"] = f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}"
    if probe not in PROBES:
        errors["probe"] = f"probe must be one of {', '.join(PROBES)}, not {probe!r}"
    if not models:
        errors["models"] = "choose at least one model"
    ngrams = [m.name for m in models if m.kind == LanguageModel.Kind.NGRAM]
    if ngrams:
        errors["models"] = (
            f"{', '.join(ngrams)}: an n-gram model has no hidden states (no layers) to "
            "probe; choose causal or masked transformers models"
        )
    masked = [m.name for m in models if m.kind == LanguageModel.Kind.MASKED]
    if pooling == "last" and masked and "models" not in errors:
        errors["pooling"] = (
            f"last-token pooling needs causal models, and {', '.join(masked)} "
            f"{'is' if len(masked) == 1 else 'are'} masked: every token of a masked model "
            "has seen the whole sentence; use mean pooling"
        )
    return errors


@dataclass
class ProbingRequestOutcome:
    runs: list[ProbingRun]
    created: list[ProbingRun] = field(default_factory=list)
    existing: list[ProbingRun] = field(default_factory=list)


def probing_runs_request(
    *,
    models: Sequence[LanguageModel],
    benchmarks: Sequence[ProbingTask],
    user: Any,
    subset: Subset | None = None,
) -> None:
    """`probing_run_request` on each task (mean pooling, logistic regression), as the run
    core's kinds registry calls it."""
    for task in benchmarks:
        probing_run_request(models=models, task=task, user=user, subset=subset)


def te_count(task: ProbingTask) -> int:
    """A task's te sentences: what a subset of it counts."""
    return sum((task.counts.get("te") or {}).values())


def probing_run_request(
    *,
    models: Iterable[LanguageModel],
    task: ProbingTask,
    pooling: str = "mean",
    probe: str = "logreg",
    seeds: int = DEFAULT_SEEDS,
    mdl: bool = False,
    frequency_corpus: Corpus | None = None,
    user: User | AnonymousUser | None = None,
    subset: Subset | None = None,
) -> ProbingRequestOutcome:
    """One run per (model, task content, pooling, probe, seeds, mdl, frequency corpus,
    subset): asking again returns the existing one. New runs are sent to the GPU queue
    once their rows are committed. `frequency_corpus`: the frequency baseline counts its
    forms in this corpus instead of the CMU trigram's unigrams. `subset`
    (evaluations.subsets): `size` te sentences, and tr and va sampled at the same rate
    (`probing_sample`), so that the run costs what its share of the task costs.

    Raises ProbingRequestInvalid (nothing written) for an n-gram model, an unknown
    option, last-token pooling of a masked model, or a frequency corpus for a task type
    without the frequency baseline; BrokerUnavailable (rows committed) when the queue
    cannot be reached."""
    asked = list({m.pk: m for m in models}.values())
    runs.check_runnable(asked)
    errors = probing_request_problems(asked, pooling=pooling, probe=probe, seeds=seeds)
    row = APPLICABLE.get(task.task_type, APPLICABLE["custom"])
    if frequency_corpus is not None and not row["frequency"]:
        errors["frequency_corpus"] = (
            f"a {task.task_type} task has no frequency baseline ({row['why']}), so it has "
            "no use for a frequency corpus; leave frequency_corpus out"
        )
    if errors:
        raise ProbingRequestInvalid(errors)
    requester = user if user is not None and user.is_authenticated else None
    outcome = ProbingRequestOutcome(runs=[])
    total = te_count(task)
    sampled = subset_key(subset, total)
    key = {
        **sampled,
        "task": task,
        "content_hash": task.content_hash,
        "pooling": pooling,
        "probe": probe,
        "seeds": seeds,
        "mdl": bool(mdl),
        "frequency_corpus": frequency_corpus,
    }
    with transaction.atomic():
        # One global order (model id), so that overlapping requests never deadlock.
        for model in sorted(asked, key=lambda m: m.pk):
            run, created = runs.run_get_or_create(
                ProbingRun,
                {"model": model, **key},
                progress_total=task.instance_count,
                requested_by=requester,
                subset_total=total if sampled["subset_size"] else 0,
            )
            (outcome.created if created else outcome.existing).append(run)
            outcome.runs.append(run)
        runs.runs_enqueue_on_commit(kind=PROBING_RUNS, runs=outcome.runs)
    return outcome


def probing_retry_check(run: ProbingRun) -> str:
    """A task keeps only its current instances: a retry of a run on earlier content
    would probe other sentences than the run is about, so it is refused."""
    if not run.outdated:
        return ""
    return (
        "This run cannot be retried: the task's content changed after it was asked for, "
        "and the instances it was asked on are no longer stored. Ask for the model on the "
        "task's current content instead."
    )


def probing_payload(run: ProbingRun) -> dict[str, Any]:
    """Everything the GPU worker needs (see evaluations.probing.worker): the instances
    in file order as parallel lists, the model and the options. `form` (field #3, the
    target form) travels only when every line has one. `frequency`: the corpus whose
    stored file the worker counts the forms in, or None for the CMU unigrams."""
    task = run.task
    corpus = run.frequency_corpus
    code = {label: k for k, label in enumerate(task.labels)}
    partitions: list[str] = []
    classes: list[int] = []
    sentences: list[str] = []
    forms: list[str] = []
    rows = task.instances.order_by("line").values_list("partition", "label", "sentence", "extra")
    lines = list(rows.iterator(chunk_size=5000))
    if run.is_subset:
        lines = probing_sample(lines, run_subset(run))
    for partition, label, sentence, extra in lines:
        partitions.append(partition)
        classes.append(code[label])
        sentences.append(sentence)
        first = extra[0] if isinstance(extra, list) and extra else ""
        forms.append(first if isinstance(first, str) else "")
    return {
        "model": {"source": run.model.source, "revision": run.model.revision},
        "task": {"name": task.name, "type": task.task_type, "content_hash": run.content_hash},
        "pooling": run.pooling,
        "probe": run.probe,
        "seeds": run.seeds,
        "mdl": run.mdl,
        "memory_mb": settings.GYM_PROBING_MEMORY_MB,
        "labels": list(task.labels),
        "partition": partitions,
        "label": classes,
        "sentences": sentences,
        "form": forms if forms and all(forms) else None,
        "frequency": None
        if corpus is None
        else {
            "corpus": corpus.name,
            "key": corpus_in_store(corpus),
            "content_hash": corpus.content_hash,
        },
    }


def probing_sample(
    lines: Sequence[tuple[str, str, str, Any]], subset: Subset | None
) -> list[tuple[str, str, str, Any]]:
    """A task's (partition, label, sentence, extra) lines on a subset: `size` of its te
    lines, and of tr and va the same share, label by label with at least one line of
    each label a partition has (so every label is still learnt and the probe is trained
    on as much less as it is tested on); each line is named by its label, sentence and
    extra fields. The whole task without a subset, or for a size at or above te's."""
    test = [i for i, line in enumerate(lines) if line[0] == "te"]
    keys = [canonical_key([line[1], line[2], line[3]]) for line in lines]
    chosen = sample_indices([keys[i] for i in test], subset)
    if chosen is None or subset is None:
        return list(lines)
    kept = {test[i] for i in chosen}
    fraction = subset.size / len(test)
    for partition in ("tr", "va"):
        positions = [i for i, line in enumerate(lines) if line[0] == partition]
        picked = stratified_indices(
            [lines[i][1] for i in positions], [keys[i] for i in positions], fraction, subset.seed
        )
        kept.update(positions[i] for i in picked)
    return [line for i, line in enumerate(lines) if i in kept]


def _document_problem(results: dict[str, Any]) -> str:
    layers = results.get("layers")
    if not isinstance(layers, list) or not layers:
        return "the worker returned no layers"
    best = results.get("best_layer")
    if not isinstance(best, int) or not 0 <= best < len(layers):
        return f"the worker's best layer {best!r} is not one of its {len(layers)} layers"
    return ""


# What a layer's entry of the document holds beyond its mean accuracies.
LAYER_STATS = ("va_std", "te_std", "seed_va", "seed_te", "control", "selectivity", "mdl")


def _layers_write(run: ProbingRun, layers: list[dict[str, Any]]) -> None:
    ProbingLayerResult.objects.filter(run=run).delete()
    ProbingLayerResult.objects.bulk_create(
        ProbingLayerResult(
            run=run,
            layer=row["layer"],
            va_accuracy=row["va_accuracy"],
            te_accuracy=row["te_accuracy"],
            hyperparameters=row.get("hyperparameters") or {},
            stats={key: row[key] for key in LAYER_STATS if key in row},
        )
        for row in layers
    )


def probing_results_store(*, run_id: int, attempt: int, results: dict[str, Any]) -> bool:
    """Write the layers and the run's summary in one transaction; False (nothing
    written) when the run is finished or the attempt is stale, so a re-delivery
    changes nothing."""
    with transaction.atomic():
        run = (
            ProbingRun.objects.select_for_update().select_related("model").filter(pk=run_id).first()
        )
        if run is None or run.attempt != attempt or run.status not in runs.ALLOWED_FROM[S.DONE]:
            return False
        problem = _document_problem(results)
        if problem:
            runs.run_fail(kind=PROBING_RUNS, run_id=run_id, attempt=attempt, reason=problem)
            return False
        layers = results["layers"]
        _layers_write(run, layers)
        best = layers[results["best_layer"]]
        steps = int(results.get("diagnostics", {}).get("sentences", 0)) + len(layers)
        info = results.get("model") or {}
        runs.run_advance(
            PROBING_RUNS,
            run_id,
            attempt,
            S.DONE,
            best_layer=results["best_layer"],
            best_va=best["va_accuracy"],
            best_te=best["te_accuracy"],
            best_selectivity=best.get("selectivity"),
            baselines=results.get("baselines") or {},
            confusion=results.get("confusion") or {},
            task_info=results.get("task") or {},
            # How the control labels were drawn travels with the diagnostics.
            diagnostics={**(results.get("diagnostics") or {}), "control": results.get("control")},
            model_info=info,
            progress_done=steps,
            progress_total=steps,
            finished_at=timezone.now(),
        )
        learn_model_facts(run.model, info)
    return True


class AnnotationInvalid(ApplicationError):
    """An answer that cannot be kept: a label the task lacks, or a sentence not asked."""


def probing_annotation_save(
    *, task: ProbingTask, instance_id: int, label: str, user: User
) -> ProbingAnnotation:
    """Keep one person's answer for one te sentence of the task's sample; answering again
    replaces the answer."""
    if label not in task.labels:
        raise AnnotationInvalid(f"choose one of the task's labels ({', '.join(task.labels)})")
    if instance_id not in annotation_sample(task):
        raise AnnotationInvalid("that sentence is not one of the task's sentences to label")
    with transaction.atomic():
        answer, _created = ProbingAnnotation.objects.update_or_create(
            instance_id=instance_id, user=user, defaults={"label": label}
        )
    return answer
