"""Writes for training runs: requesting one, the checkpoints and loss reports its worker
sends while it trains, storing the finished model, and cancelling. The lifecycle
(enqueue, progress, fail, retry, sweep) is `evaluations.runs.lifecycle`'s; this module
registers training as a kind of run.

A training run writes models, never benchmarks: each checkpoint is a LanguageModel of its
own (display name `<name>@<tokens>`, URL name `<name>-<tokens>`), and when the request
names suites, minimal-pair sets or probing tasks, every checkpoint (and the finished
model) is evaluated on them through ordinary runs of those kinds, asked for through the
run core's kinds registry (`RunKind.request_runs`: suite runs, minimal-pair runs, probing
runs with mean pooling and logistic regression), so that training imports no other kind."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.cache import cache
from django.core.exceptions import NON_FIELD_ERRORS
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from evaluations.language_models import registry as model_registry
from evaluations.models import LanguageModel
from evaluations.runs import lifecycle as runs
from evaluations.scoring import sources
from evaluations.training import options as causal_options
from evaluations.training import stored as in_store
from evaluations.training.data import CorpusSource
from evaluations.training.models import TrainingRun
from gym.errors import FieldErrors
from suites.corpora.models import Corpus
from suites.corpora.services import corpus_in_store, corpus_validation_split
from suites.models import MinimalPairSet, ProbingTask, Suite

TRAINING_RUNS = runs.RunKind(
    name="training",
    model="evaluations.TrainingRun",
    payload="evaluations.training.services.training_payload",
    work="evaluations.training.worker.run_training",
    store="evaluations.training.services.training_results_store",
    label="Training",
    api_detail="api-training-run",
    stop="evaluations.training.services.ask_to_stop",
    retry_check="evaluations.training.services.training_retry_problem",
    # Where a trained model comes from: above the other kinds' sections of its page.
    model_section="evaluations.training.reads.model_section",
    section_order=10,
)
runs.register(TRAINING_RUNS)

S = TrainingRun.Status
KINDS = tuple(TrainingRun.Kind.values)
NGRAM_ARPA = "model.arpa"
STOP_FILE = "STOP"
MAX_STEPS = 10_000_000
# Room for "-<tokens>" after the name in a checkpoint's URL name (100 characters).
NAME_MAX_LENGTH = 80
MIB = 2**20
# The largest n-gram memory budget and temporary disk bound, in MB (1 PB).
MAX_MB = 2**30
# Options of masked runs only.
MASKING_OPTIONS = ("mask_probability", "whole_word_masking")
# Every option `training_options` reads, by kind: any other key under options is a 400.
NGRAM_OPTIONS = ("order", "min_count", "memory_mb", "disk_mb")
CAUSAL_OPTIONS = (
    "preset",
    *causal_options.SHAPE_MAXIMA,
    "arch",
    "base_model",
    "tokenizer",
    "tokenizer_model",
    "steps",
    "batch_tokens",
    "micro_batch",
    "learning_rate",
    "warmup_steps",
    "weight_decay",
    "checkpoints",
    "keep_states",
    "seed",
    "save_every",
    "retention",
    "keep_last",
)
OPTIONS_BY_KIND: dict[str, tuple[str, ...]] = {
    TrainingRun.Kind.NGRAM: NGRAM_OPTIONS,
    TrainingRun.Kind.CAUSAL: CAUSAL_OPTIONS,
    TrainingRun.Kind.MASKED: tuple(o for o in CAUSAL_OPTIONS if o != "base_model")
    + MASKING_OPTIONS,
}
ALL_OPTIONS = frozenset(o for names in OPTIONS_BY_KIND.values() for o in names)
# Options of another kind that `training_options` refuses itself, with its own reason.
SAID_WHERE_READ = frozenset({*MASKING_OPTIONS, "base_model", "tokenizer", "tokenizer_model"})


class TrainingRequestInvalid(FieldErrors):
    """A training run that cannot be asked for; `errors` maps the field to the reason."""


class TrainingRunsLimit(TrainingRequestInvalid):
    """The user has as many training runs queued or running as the site allows
    (GYM_TRAINING_MAX_ACTIVE_PER_USER): about the request as a whole, not a field."""

    code = "too_many_runs"

    def __init__(self, message: str) -> None:
        super().__init__({NON_FIELD_ERRORS: message})

    def error_list(self) -> list[dict[str, Any]]:
        return [{"code": self.code, "message": str(self)}]


def _integer(raw: Any, name: str, low: int, high: int, errors: dict[str, str]) -> int:
    try:
        value = int(raw)
        if isinstance(raw, float) and raw != value:
            raise ValueError
    except (TypeError, ValueError):
        errors[name] = f"{name} must be a whole number, not {str(raw)[:40]!r}"
        return low
    if not low <= value <= high:
        errors[name] = f"{name} must be from {low:,} to {high:,}; got {value:,}"
    return value


def _number(raw: Any, name: str, low: float, high: float, errors: dict[str, str]) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        errors[name] = f"{name} must be a number, not {str(raw)[:40]!r}"
        return low
    if not math.isfinite(value) or not low <= value <= high:
        errors[name] = f"{name} must be from {low:g} to {high:g}; got {value:g}"
    return value


def model_to_train_problem(model: LanguageModel, *, purpose: str) -> str:
    """Why `model` cannot give a run its weights (purpose "base") or its tokenizer
    ("tokenizer"); "" when it can. The `train` command asks the same."""
    role = "be trained further" if purpose == "base" else "lend its tokenizer"
    if model.is_imported:
        return (
            f"the model {model.name!r} is registered only for imported results: it has no "
            f"weights or tokenizer, so it cannot {role}"
        )
    if model.weights_removed_at is not None:
        return f"the model {model.name!r} has its weights removed, so it cannot {role}"
    if model.status != LanguageModel.Status.READY:
        return f"the model {model.name!r} has not passed its check (it is {model.status}), so it cannot {role}"
    if model.revision:
        return (
            f"the model {model.name!r} names the hub revision {model.revision!r}; training "
            f"reads a model's files without a revision, so register its folder to {role}"
        )
    if model.kind == LanguageModel.Kind.NGRAM:
        return (
            f"the model {model.name!r} is an n-gram model; only a causal transformer can be "
            "trained further"
            if purpose == "base"
            else f"the model {model.name!r} is an n-gram model; only a transformer can lend "
            "its tokenizer"
        )
    if purpose == "base" and model.kind == LanguageModel.Kind.MASKED:
        return (
            f"the model {model.name!r} is a masked model; only a causal transformer can be "
            "trained further"
        )
    return ""


def _registered(raw: Any, field: str, errors: dict[str, str]) -> LanguageModel | None:
    if raw in (None, ""):
        return None
    name = str(raw)
    model = None if "\x00" in name else LanguageModel.objects.filter(name=name).first()
    if model is None:
        errors[field] = f"no registered model is named {name[:80]!r}"
        return None
    problem = model_to_train_problem(
        model, purpose="base" if field == "base_model" else "tokenizer"
    )
    if problem:
        errors[field] = problem
        return None
    return model


def training_options(
    kind: str, raw: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str], dict[str, LanguageModel]]:
    """The options of a request as stored (defaults filled in), what is wrong, by field,
    and the registered models they name ("base_model", "tokenizer_model"). n-gram:
    order, min_count, memory_mb and disk_mb (None: a quarter of the worker's memory, and
    no bound but the free space). causal: preset (and layers, width, heads, context, vocab, arch to
    change it), or base_model (continued pre-training: the shape and tokenizer are the
    model's; context may shorten it); tokenizer (bpe, unigram, model) and
    tokenizer_model; steps, batch_tokens, micro_batch, learning_rate, warmup_steps,
    weight_decay, checkpoints, save_every, retention, keep_last, keep_states, seed. masked:
    those of causal but base_model, its own presets and tokenizers (bpe, wordpiece, model),
    and mask_probability and whole_word_masking."""
    errors: dict[str, str] = unknown_options(kind, raw)
    if kind != TrainingRun.Kind.MASKED:
        why = f"is an option of masked runs, not of {str(kind)[:40]} runs"
        _refuse_options(raw, MASKING_OPTIONS, why, errors)
    if kind == TrainingRun.Kind.NGRAM:
        why = "is an option of causal runs; an n-gram model counts words"
        _refuse_options(raw, ("base_model", "tokenizer", "tokenizer_model"), why, errors)
        return _ngram_options(raw, errors), errors, {}
    if kind not in (TrainingRun.Kind.CAUSAL, TrainingRun.Kind.MASKED):
        return {}, {"kind": f"kind must be one of {', '.join(KINDS)}, not {str(kind)[:40]!r}"}, {}
    return _transformer_options(kind, raw, errors)


def _refuse_options(
    raw: dict[str, Any], fields: Iterable[str], why: str, errors: dict[str, str]
) -> None:
    """Each of `fields` that `raw` gives is an error: `<field> <why>`."""
    for field in fields:
        if raw.get(field) not in (None, ""):
            errors[field] = f"{field} {why}"


def _ngram_options(raw: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    """order and min_count with their defaults; memory_mb and disk_mb only when given, so
    a run that leaves them out stores (and answers) the options it always did."""
    return {
        "order": _integer(raw.get("order", 3), "order", 2, 6, errors),
        "min_count": _integer(raw.get("min_count", 1), "min_count", 1, 1_000_000, errors),
        **{
            field: _integer(raw[field], field, 1, MAX_MB, errors)
            for field in ("memory_mb", "disk_mb")
            if raw.get(field) not in (None, "")
        },
    }


def _transformer_options(
    kind: str, raw: dict[str, Any], errors: dict[str, str]
) -> tuple[dict[str, Any], dict[str, str], dict[str, LanguageModel]]:
    """`training_options` of a causal or masked run."""
    masked = kind == TrainingRun.Kind.MASKED
    kind_options = causal_options.options_class(kind)
    base = _base_model_option(raw, masked, errors)
    tokenizer, tokenizer_model = _tokenizer_options(kind_options, raw, base, errors)
    named = {"base_model": base} if base is not None else {}
    if tokenizer_model is not None and "tokenizer" not in errors:
        named["tokenizer_model"] = tokenizer_model
    shaped = _shape_option(kind, raw, base, tokenizer_model, errors)
    if shaped is None:
        return {}, errors, named
    shape, preset = shaped
    settings_ = kind_options(
        shape=shape,
        **_loop_options(raw, errors),
        base_model=base.source if base is not None else "",
        tokenizer=tokenizer,
        tokenizer_source=tokenizer_model.source if tokenizer_model is not None else "",
        **(_masking(raw, errors) if masked else {}),
    )
    if not errors:
        errors.update(_causal_problems(settings_))
    return _stored_options(settings_, preset, base, tokenizer_model), errors, named


def _base_model_option(
    raw: dict[str, Any], masked: bool, errors: dict[str, str]
) -> LanguageModel | None:
    """The registered model a causal run trains further, if it names one."""
    if masked and raw.get("base_model") not in (None, ""):
        errors["base_model"] = (
            "base_model is an option of causal runs: continued pre-training trains a causal "
            "model, and a masked run starts afresh"
        )
    return None if masked else _registered(raw.get("base_model"), "base_model", errors)


def _tokenizer_options(
    kind_options: type[causal_options.CausalOptions],
    raw: dict[str, Any],
    base: LanguageModel | None,
    errors: dict[str, str],
) -> tuple[str, LanguageModel | None]:
    """The tokenizer option (a base model's own when there is one) and the registered
    model that lends its tokenizer."""
    tokenizer = str(raw.get("tokenizer") or ("model" if raw.get("tokenizer_model") else "bpe"))
    tokenizer_model = _registered(raw.get("tokenizer_model"), "tokenizer_model", errors)
    if base is not None:
        if raw.get("tokenizer") not in (None, "", "model") or tokenizer_model is not None:
            errors["tokenizer"] = (
                "continued pre-training uses its base model's tokenizer: leave tokenizer "
                "and tokenizer_model out"
            )
        tokenizer = "model"
    elif tokenizer not in kind_options.tokenizers:
        errors["tokenizer"] = (
            f"tokenizer must be one of {', '.join(kind_options.tokenizers)}, not {tokenizer[:40]!r}"
        )
    elif tokenizer == "model" and tokenizer_model is None and "tokenizer_model" not in errors:
        errors["tokenizer_model"] = "tokenizer 'model' needs tokenizer_model: a registered model"
    elif tokenizer != "model" and tokenizer_model is not None:
        errors["tokenizer_model"] = (
            f"tokenizer_model goes with tokenizer 'model', not {tokenizer!r}"
        )
    return tokenizer, tokenizer_model


def _shape_option(
    kind: str,
    raw: dict[str, Any],
    base: LanguageModel | None,
    tokenizer_model: LanguageModel | None,
    errors: dict[str, str],
) -> tuple[causal_options.ModelShape, str] | None:
    """The model's shape and the preset named for it ("" for a base model's shape); None
    when the shape cannot be made (the error is said at the option that shapes it)."""
    masked = kind == TrainingRun.Kind.MASKED
    preset = str(raw.get("preset", "tiny-bert" if masked else "tiny"))
    overrides: dict[str, Any] = {}
    for field, most in causal_options.SHAPE_MAXIMA.items():
        if raw.get(field) not in (None, ""):
            overrides[field] = _integer(raw[field], field, 1, most, errors)
    if raw.get("arch") not in (None, ""):
        overrides["arch"] = str(raw["arch"])
    # Where a problem of the shape is said: the base model, the tokenizer's model, the preset.
    shaping = "base_model" if base is not None else "preset"
    try:
        if base is not None:
            if set(overrides) - {"context"}:
                shaped = ", ".join(sorted(set(overrides) - {"context"}))
                errors["base_model"] = (
                    f"the base model fixes the shape: leave {shaped} out (context may shorten it)"
                )
            return causal_options.base_shape(base.source, overrides.get("context")), ""
        shape = causal_options.shape_for(preset, kind, **overrides)
        if tokenizer_model is not None and "tokenizer" not in errors:
            shaping = "tokenizer_model"
            loaded = causal_options.model_tokenizer(tokenizer_model.source, kind)
            shape = replace(shape, vocab=len(loaded))
    except causal_options.CausalTrainingError as exc:
        errors[shaping] = str(exc)
        return None
    return shape, preset


def _loop_options(raw: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    """The options of the training loop and its checkpoints, checked."""
    retention = str(raw.get("retention", "all"))
    if retention not in causal_options.RETENTIONS:
        errors["retention"] = (
            f"retention must be one of {', '.join(causal_options.RETENTIONS)}, not "
            f"{retention[:40]!r}"
        )
    return {
        "steps": _integer(raw.get("steps", 1000), "steps", 1, MAX_STEPS, errors),
        "batch_tokens": _integer(raw.get("batch_tokens", 0), "batch_tokens", 0, 2**31, errors),
        "micro_batch": _integer(raw.get("micro_batch", 8), "micro_batch", 1, 4096, errors),
        "learning_rate": _number(
            raw.get("learning_rate", 1e-3), "learning_rate", 1e-8, 1.0, errors
        ),
        "warmup_steps": _integer(
            raw.get("warmup_steps", -1), "warmup_steps", -1, MAX_STEPS, errors
        ),
        "weight_decay": _number(raw.get("weight_decay", 0.1), "weight_decay", 0.0, 1.0, errors),
        "checkpoints": _integer(raw.get("checkpoints", 8), "checkpoints", 1, 100, errors),
        "keep_states": _integer(raw.get("keep_states", 0), "keep_states", 0, 100, errors),
        "seed": _integer(raw.get("seed", 0), "seed", 0, 2**31 - 1, errors),
        "save_every": _integer(raw.get("save_every", 0), "save_every", 0, MAX_STEPS, errors),
        "retention": retention,
        "keep_last": _integer(raw.get("keep_last", 0), "keep_last", 0, 10_000, errors),
    }


def _stored_options(
    settings_: causal_options.CausalOptions,
    preset: str,
    base: LanguageModel | None,
    tokenizer_model: LanguageModel | None,
) -> dict[str, Any]:
    """The options as a run keeps them: no device or paths, models by their names."""
    stored = asdict(settings_)
    for private in ("device", "stop_after_step", "base_model", "tokenizer_source"):
        stored.pop(private)
    stored.update(preset=preset, tokens_per_step=settings_.tokens_per_step)
    if base is not None:
        stored["base_model"] = base.name
    if tokenizer_model is not None:
        stored["tokenizer_model"] = tokenizer_model.name
    return stored


def unknown_options(kind: str, raw: dict[str, Any]) -> dict[str, str]:
    """Each key of `raw` that is no option of any kind, at options.<key>, with the kind's
    options named. (An option of another kind is said where its value is read, with the
    kind it belongs to.) A misspelt option would otherwise be dropped and its default
    trained with, silently."""
    own = OPTIONS_BY_KIND.get(kind)
    if own is None:
        return {}
    errors: dict[str, str] = {}
    for key in sorted(str(k) for k in raw)[:20]:
        if key in ALL_OPTIONS:
            if key not in own and key not in SAID_WHERE_READ:
                errors[f"options.{key}"] = (
                    f"{key} is an option of "
                    f"{' and '.join(k for k, names in OPTIONS_BY_KIND.items() if key in names)} "
                    f"runs, not of {kind} runs"
                )
            continue
        shown = key[:40]
        errors[f"options.{shown}"] = (
            f"unknown option {shown!r}: the options of {kind} runs are {', '.join(own)}"
        )
    return errors


def _masking(raw: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    """A masked run's mask_probability (above 0, below 1) and whole_word_masking (true
    or false), their problems into `errors`."""
    given = raw.get("mask_probability", causal_options.MASK_PROBABILITY)
    try:
        probability = float(given)
    except (TypeError, ValueError):
        errors["mask_probability"] = f"mask_probability must be a number, not {str(given)[:40]!r}"
        probability = causal_options.MASK_PROBABILITY
    else:
        if isinstance(given, bool) or not 0.0 < probability < 1.0:
            errors["mask_probability"] = (
                f"mask_probability must be above 0 and below 1 (BERT's is 0.15); got "
                f"{str(given)[:40]}"
            )
    whole = raw.get("whole_word_masking", False)
    if not isinstance(whole, bool):
        errors["whole_word_masking"] = (
            f"whole_word_masking must be true or false, not {str(whole)[:40]!r}"
        )
    return {"mask_probability": probability, "whole_word_masking": whole is True}


def _causal_problems(options: causal_options.CausalOptions) -> dict[str, str]:
    """What is wrong with causal options whose fields are each valid, at "options": what
    CausalOptions.check finds, else what is over the site's caps on a run's size."""
    try:
        options.check()
    except causal_options.CausalTrainingError as exc:
        return {"options": str(exc)}
    problems = [p for p in (_parameters_problem(options), _memory_problem(options)) if p]
    return {"options": "; ".join(problems)} if problems else {}


def _parameters_problem(options: causal_options.CausalOptions) -> str:
    count = causal_options.parameter_count(options.shape)
    cap = settings.GYM_TRAINING_MAX_PARAMETERS
    if count <= cap:
        return ""
    smaller = (
        "train a smaller base model"
        if options.base_model
        else "give fewer layers, a smaller width or a smaller vocabulary"
    )
    return (
        f"the model would have {count:,} parameters; the site's cap is {cap:,} "
        f"(GYM_TRAINING_MAX_PARAMETERS): {smaller}"
    )


def _memory_problem(options: causal_options.CausalOptions) -> str:
    """The estimate of `causal_options.training_memory` against the cap, in MiB (rounded
    up, so that a run over the cap never reads as equal to it)."""
    estimate = causal_options.training_memory(options.shape, options.micro_batch)
    cap = settings.GYM_TRAINING_MAX_MEMORY_MB
    if estimate.total <= cap * MIB:
        return ""

    def mb(size: int) -> str:
        return f"{-(-size // MIB):,} MB"

    return (
        f"training would need about {mb(estimate.total)} of memory on its GPU (weights, "
        f"gradients and optimizer state {mb(estimate.state)}; the activations of a "
        f"micro-batch of {options.micro_batch:,} sequences of {options.shape.context:,} "
        f"tokens {mb(estimate.activations)}); the site's cap is {cap:,} MB "
        "(GYM_TRAINING_MAX_MEMORY_MB): give a smaller micro_batch (batch_tokens keeps the "
        "tokens per step), a shorter context or a smaller model"
    )


def _active_runs_problem(user: User | None, *, retry: bool = False) -> str:
    """Why `user` may not have one more training run queued or running: the site's
    GYM_TRAINING_MAX_ACTIVE_PER_USER ("" when they may). Staff, and runs nobody asked for
    (the command line), are not held to it."""
    if user is None or user.is_staff:
        return ""
    cap = settings.GYM_TRAINING_MAX_ACTIVE_PER_USER
    active = TrainingRun.objects.filter(requested_by=user, status__in=(S.QUEUED, S.RUNNING)).count()
    if active < cap:
        return ""
    again = "retried" if retry else "asked for"
    return (
        f"{user.username} has {active:,} training runs queued or running; the site's cap "
        f"is {cap:,} per user (GYM_TRAINING_MAX_ACTIVE_PER_USER): another can be {again} "
        "once one of them is done, failed or cancelled"
    )


def _check_active_runs(user: User | None) -> None:
    """Inside the transaction that creates the run: the user's row is locked first, so
    that two requests at once count one after the other on PostgreSQL (SQLite's
    transactions take the write lock when they begin, so they do already)."""
    if user is not None and not user.is_staff:
        list(User.objects.select_for_update().filter(pk=user.pk).values_list("pk"))
    problem = _active_runs_problem(user)
    if problem:
        raise TrainingRunsLimit(problem)


def training_retry_problem(run: TrainingRun) -> str:
    """A failed or cancelled run retried is queued again: its requester's cap holds."""
    return _active_runs_problem(run.requested_by, retry=True)


def tagged_suites(tags: list[str]) -> tuple[list[Suite], dict[str, str]]:
    """The suites (not archived) with any of `tags`, and the error of a tag that has none."""
    suites: list[Suite] = []
    errors: dict[str, str] = {}
    for tag in tags:
        tagged = list(Suite.objects.filter(tags__name=tag, archived_at__isnull=True))
        if not tagged:
            errors["tags"] = f"no suite has the tag {tag[:64]!r}"
        suites += tagged
    return suites, errors


def training_request(
    *,
    corpus: Corpus,
    name: str,
    kind: str,
    options: dict[str, Any] | None = None,
    suites: list[Suite] | None = None,
    pair_sets: list[MinimalPairSet] | None = None,
    probing_tasks: list[ProbingTask] | None = None,
    tags: list[str] | None = None,
    threshold: float = 0.8,
    validation_corpus: Corpus | None = None,
    user: User | AnonymousUser | None = None,
) -> TrainingRun:
    """Register the model to be trained and its run in one transaction, and send the run
    to the gpu queue once that commits. `tags`: the suites with any of these tags are
    evaluated too. `validation_corpus`: its text gives the validation loss, and every
    line of `corpus` is trained on. Raises TrainingRequestInvalid (nothing written),
    TrainingRunsLimit when the user has as many runs queued or running as the site allows."""
    stored, errors, named = training_options(kind, options or {})
    if validation_corpus is not None and kind == TrainingRun.Kind.NGRAM:
        errors["validation_corpus"] = (
            "an n-gram run has no validation loss; a validation corpus is for causal runs"
        )
    elif validation_corpus is not None and validation_corpus.content_hash == corpus.content_hash:
        errors["validation_corpus"] = (
            f"the corpus {validation_corpus.name!r} holds the same text as the training "
            "corpus; validate on other text, or leave it out to hold out a share of the lines"
        )
    display = name.strip()
    slug = slugify(display)
    if not slug:
        errors["name"] = "give the model a name of letters, digits and hyphens"
    elif len(slug) > NAME_MAX_LENGTH:
        errors["name"] = f"the name is {len(slug)} characters long; at most {NAME_MAX_LENGTH}"
    elif LanguageModel.objects.filter(name=slug).exists():
        errors["name"] = f"a model named {slug!r} is already registered; choose another name"
    if slug and "name" not in errors and (model_registry.training_dir() / slug).exists():
        errors["name"] = f"a trained model folder named {slug!r} exists; choose another name"
    if not 0.0 < threshold <= 1.0 or not math.isfinite(threshold):
        errors["threshold"] = f"the threshold is an accuracy above 0 and at most 1; got {threshold}"
    tagged, problems = tagged_suites(tags or [])
    suites = [*(suites or []), *tagged]
    errors.update(problems)
    if probing_tasks and kind == TrainingRun.Kind.NGRAM:
        errors["probing_tasks"] = (
            "an n-gram model has no hidden states (no layers) to probe; probe causal runs"
        )
    if errors:
        raise TrainingRequestInvalid(errors)
    requester = user if user is not None and user.is_authenticated else None
    with transaction.atomic():
        _check_active_runs(requester)
        model = LanguageModel.objects.create(
            name=slug,
            display_name=display,
            # Where every machine will find it (the artifact store), set once the run
            # exists: its key names the run (the name is unique, so is this stand-in).
            source=f"training:{slug}",
            kind=kind,
            description=_description(corpus, kind, named.get("base_model")),
            registered_by=requester,
        )
        run = TrainingRun.objects.create(
            model=model,
            corpus=corpus,
            content_hash=corpus.content_hash,
            training_kind=kind,
            options=stored,
            threshold=threshold,
            progress_total=stored.get("steps", 1),
            requested_by=requester,
            validation_corpus=validation_corpus,
            base_model=named.get("base_model"),
            tokenizer_model=named.get("tokenizer_model"),
        )
        run.store_folder = in_store.folder_name(slug, run.pk, run.created_at)
        run.save(update_fields=["store_folder"])
        model.source = model_artifact_source(run)
        model.save(update_fields=["source"])
        if suites:
            run.suites.set(suites)
        if pair_sets:
            run.pair_sets.set(pair_sets)
        if probing_tasks:
            run.probing_tasks.set(probing_tasks)
        runs.runs_enqueue_on_commit(kind=TRAINING_RUNS, runs=[run])
    return run


def store_folder(run: TrainingRun) -> str:
    """The run's folder in the artifact store (evaluations.training.stored)."""
    return run.store_folder


def local_folder(run: TrainingRun) -> Path:
    """The run's folder on this machine: its name under this machine's training folder,
    where this machine's worker trains it (the embedded site's one worker, for one)."""
    return model_registry.training_dir() / in_store.name_of(run.store_folder)


def model_artifact_source(run: TrainingRun) -> str:
    """Where every machine finds the run's finished model: the artifact store."""
    name = NGRAM_ARPA if run.training_kind == TrainingRun.Kind.NGRAM else in_store.MODEL
    return sources.artifact_source(f"{in_store.prefix(store_folder(run))}/{name}")


def _description(corpus: Corpus, kind: str, base: LanguageModel | None) -> str:
    if base is not None:
        return f"{base.display_name} trained further on the corpus {corpus.name}."
    return f"Trained on the corpus {corpus.name} ({TrainingRun.Kind(kind).label})."


def training_payload(run: TrainingRun) -> dict[str, Any]:
    """Everything the GPU worker needs: the corpus file's key in the artifact store, its split (or the
    validation corpus's file), the options with the folders of the models they name,
    and the folder to write to (see evaluations.training.worker)."""
    corpus = run.corpus
    source = CorpusSource(
        path=corpus.path,
        split=corpus_validation_split(corpus),
        normalised=True,
        validation_lines=corpus.validation_lines,
        key=corpus_in_store(corpus),
        sha256=corpus.content_hash,
    )
    if run.validation_corpus is not None:
        other = run.validation_corpus
        source = replace(
            source,
            validation_lines=other.line_count,
            validation_from=CorpusSource(
                path=other.path,
                split=corpus_validation_split(other),
                normalised=True,
                validation_lines=other.line_count,
                key=corpus_in_store(other),
                sha256=other.content_hash,
            ),
        )
    options = dict(run.options)
    if run.base_model is not None:
        options["base_source"] = run.base_model.source
    if run.tokenizer_model is not None:
        options["tokenizer_source"] = run.tokenizer_model.source
    return {
        "run": run.pk,
        "attempt": run.attempt,
        "kind": run.training_kind,
        "name": run.model.name,
        "corpus": source.as_payload(),
        "options": options,
        # The run's folder by name: each worker keeps it under its own training folder,
        # and its checkpoints in the artifact store (evaluations.training.stored).
        "folder": in_store.name_of(run.store_folder),
        "store": store_folder(run),
    }


# --- while the worker trains ---------------------------------------------------------------


def stop_key(run_id: int) -> str:
    return f"training-stop:{run_id}"


def ask_to_stop(run: TrainingRun) -> None:
    """Tell the worker, which reads no database, to stop at its next step: through the
    shared cache and a file in the model folder (whichever it can see)."""
    cache.set(stop_key(run.pk), run.attempt, timeout=7 * 24 * 3600)
    try:
        folder = local_folder(run)
        if run.store_folder and folder.is_dir():
            (folder / STOP_FILE).write_text(f"{run.attempt}\n")
    except OSError:
        pass


def _open_run(run_id: int, attempt: int) -> TrainingRun | None:
    run = TrainingRun.objects.select_for_update().filter(pk=run_id).first()
    if run is None or run.attempt != attempt or run.status not in runs.ALLOWED_FROM[S.DONE]:
        if run is not None and run.status == S.CANCELLED:
            ask_to_stop(run)
        return None
    return run


def _merged_log(run: TrainingRun, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`entries` replace what is stored from their first step on (a worker that resumed
    from a checkpoint reports those steps again), thinned to what the row keeps
    (`thin_log`: about LOG_POINTS entries; the whole log is the folder's loss.jsonl)."""
    if not entries:
        return run.log
    first = min(int(e["step"]) for e in entries)
    merged = [e for e in run.log if int(e["step"]) < first] + entries
    return causal_options.thin_log(merged, int(run.options.get("steps") or 0))


def training_log_append(*, run_id: int, attempt: int, entries: list[dict[str, Any]]) -> bool:
    """Loss reports from the worker (best effort): appended to the run's loss curve."""
    with transaction.atomic():
        run = _open_run(run_id, attempt)
        if run is None:
            return False
        run.log = _merged_log(run, entries)
        TrainingRun.objects.filter(pk=run.pk).update(log=run.log)
    return True


def _is_final(run: TrainingRun, point: dict[str, Any]) -> bool:
    """Whether `point` is the checkpoint of the run's last step, whose weights are the
    finished model's (the schedule always ends on the last step)."""
    return 0 < int(run.options.get("steps") or 0) <= int(point["step"])


def _checkpoint_model(run: TrainingRun, point: dict[str, Any]) -> LanguageModel:
    """The model a checkpoint is registered as: its own, or for the last step's the
    finished model itself (the same weights: evaluated once, as the finished model,
    when the run is done, and read as the curve's last point)."""
    if _is_final(run, point):
        return run.model
    base = run.model
    tokens = int(point["tokens"])
    # Where any worker finds it: the artifact store (a report from a worker before the
    # store named only its folder: where that worker's checkpoint is kept in the store).
    key = point.get("key") or in_store.checkpoint_key(run.store_folder, str(point["folder"]))
    folder = sources.artifact_source(str(key))
    existing = LanguageModel.objects.filter(source=folder, revision="").first()
    if existing is not None:
        return existing
    name = f"{base.name}-{tokens}"
    if LanguageModel.objects.filter(name=name).exists():  # someone registered that name
        name = f"{base.name}-{tokens}-run{run.pk}"
    model, _created = LanguageModel.objects.get_or_create(
        source=folder,
        revision="",
        defaults={
            "name": name,
            "display_name": f"{base.display_name}@{tokens}",
            "kind": run.training_kind,
            "description": f"Checkpoint of {base.display_name} after {tokens:,} tokens "
            f"(step {point['step']}), trained on the corpus {run.corpus.name}.",
            "registered_by": run.requested_by,
        },
    )
    return model


def _evaluate(run: TrainingRun, models: list[LanguageModel]) -> None:
    """Ordinary runs of `models` on the run's suites, minimal-pair sets and probing tasks,
    asked for through the kinds registry."""
    if not models:
        return
    for kind, benchmarks in (
        ("suite", run.suites.all()),
        ("pairs", run.pair_sets.all()),
        ("probing", run.probing_tasks.all()),
    ):
        if listed := list(benchmarks):
            runs.kind_named(kind).request_runs(
                models=models, benchmarks=listed, user=run.requested_by
            )


def _record(point: dict[str, Any], model: LanguageModel) -> dict[str, Any]:
    return {
        "step": int(point["step"]),
        "tokens": int(point["tokens"]),
        "model": model.name,
        "train_loss": point.get("train_loss"),
        "validation_loss": point.get("validation_loss"),
        "bytes": point.get("bytes"),
        "scheduled": bool(point.get("scheduled", True)),
    }


def _weights_removed(checkpoints: list[dict[str, Any]], tokens: set[int]) -> None:
    """Mark the checkpoints of `tokens` as removed by retention: on the run and on their
    models, which keep their results but are never queued again."""
    names = []
    for record in checkpoints:
        if record["tokens"] in tokens:
            record["removed"] = True
            names.append(record["model"])
    LanguageModel.objects.filter(name__in=names, weights_removed_at__isnull=True).update(
        weights_removed_at=timezone.now()
    )


def _folder_tokens(folders: list[Any]) -> set[int]:
    suffixes = (str(f).removeprefix(causal_options.CHECKPOINT_PREFIX) for f in folders)
    return {int(s) for s in suffixes if s.isdigit()}


def training_checkpoint_store(
    *, run_id: int, attempt: int, point: dict[str, Any], entries: list[dict[str, Any]]
) -> bool:
    """A checkpoint is on disk: register it as a model, record it on the run (once, also
    when the message comes twice) and queue its evaluations. False (nothing written) for
    a finished run or a stale attempt."""
    with transaction.atomic():
        run = _open_run(run_id, attempt)
        if run is None:
            return False
        model = _checkpoint_model(run, point)
        record = _record(point, model)
        # The checkpoints whose removal it announces (kept, for reports that come late).
        record["removes"] = sorted(_folder_tokens(point.get("removed") or []))
        checkpoints = [c for c in run.checkpoints if c["tokens"] != record["tokens"]]
        checkpoints = sorted([*checkpoints, record], key=lambda c: c["tokens"])
        _weights_removed(checkpoints, {t for c in checkpoints for t in c.get("removes", [])})
        now = timezone.now()
        TrainingRun.objects.filter(pk=run.pk, status=S.QUEUED).update(
            status=S.RUNNING, started_at=now
        )
        TrainingRun.objects.filter(pk=run.pk).update(
            checkpoints=checkpoints, log=_merged_log(run, entries)
        )
        if not _is_final(run, point):  # the finished model's folder is written after it
            _evaluate(run, [model])
    return True


def _results_problem(results: dict[str, Any]) -> str:
    if results.get("kind") not in KINDS:
        return f"the worker returned an unknown kind {results.get('kind')!r}"
    if not isinstance(results.get("summary"), dict):
        return "the worker returned no summary"
    return ""


def training_results_store(*, run_id: int, attempt: int, results: dict[str, Any]) -> bool:
    """The model is trained: record the summary and the last checkpoints, mark the run
    done, and queue the finished model's evaluations, in one transaction. False
    (nothing written) for a finished run or a stale attempt: a re-delivery changes
    nothing, and the model is registered once."""
    with transaction.atomic():
        run = _open_run(run_id, attempt)
        if run is None:
            return False
        problem = _results_problem(results)
        if problem:
            runs.run_fail(kind=TRAINING_RUNS, run_id=run_id, attempt=attempt, reason=problem)
            return False
        models: list[LanguageModel] = []
        checkpoints = {c["tokens"]: c for c in run.checkpoints}
        points = results.get("checkpoints") or []
        for point in points:
            if int(point["tokens"]) not in checkpoints:  # a report that never arrived
                model = _checkpoint_model(run, point)
                if not point.get("removed") and model != run.model:
                    models.append(model)
                checkpoints[int(point["tokens"])] = _record(point, model)
        removed = {int(p["tokens"]) for p in points if p.get("removed")}
        records = [checkpoints[t] for t in sorted(checkpoints)]
        _weights_removed(records, removed)
        summary = dict(results["summary"])
        steps = int(summary.get("steps_done") or run.progress_total or 1)
        runs.run_advance(
            TRAINING_RUNS,
            run_id,
            attempt,
            S.DONE,
            summary=summary,
            checkpoints=records,
            log=_merged_log(run, results.get("log") or []),
            progress_done=steps,
            progress_total=steps,
            finished_at=timezone.now(),
        )
        parameters = summary.get("parameters")
        if isinstance(parameters, int):
            LanguageModel.objects.filter(pk=run.model_id).update(parameter_count=parameters)
        if results.get("model_key"):
            # The finished model as any worker finds it: in the artifact store.
            run.model.source = sources.artifact_source(str(results["model_key"]))
            LanguageModel.objects.filter(pk=run.model_id).update(source=run.model.source)
        _evaluate(run, [*models, run.model])
    return True
