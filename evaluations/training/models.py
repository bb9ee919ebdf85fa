from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse

from evaluations.language_models.models import LanguageModel
from evaluations.runs.models import Run
from evaluations.subsets import Subset


class TrainingRun(Run):
    """A language model trained on a corpus: the fourth kind of run. Its `model` is the
    finished model (registered at the request, loadable once the run is done); each
    checkpoint is a LanguageModel of its own (`<name>@<tokens>`), listed in
    `checkpoints`, and evaluated on `suites` through ordinary runs."""

    benchmark_field = "corpus"

    class Kind(models.TextChoices):
        NGRAM = "ngram", "n-gram (interpolated modified Kneser-Ney)"
        CAUSAL = "causal", "causal transformer from scratch"
        MASKED = "masked", "masked transformer from scratch (BERT-style)"

    model = models.ForeignKey(LanguageModel, on_delete=models.CASCADE, related_name="training_runs")
    corpus = models.ForeignKey(
        "suites.Corpus", on_delete=models.PROTECT, related_name="training_runs"
    )
    content_hash = models.CharField(max_length=64)
    # Validation text from this corpus (all of it) instead of the corpus's held-out lines,
    # which are then trained on too.
    validation_corpus = models.ForeignKey(
        "suites.Corpus",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="validation_for_runs",
    )
    # Continued pre-training: the registered causal model trained further.
    base_model = models.ForeignKey(
        LanguageModel,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="continued_by_runs",
    )
    # Training from scratch with this registered model's tokenizer.
    tokenizer_model = models.ForeignKey(
        LanguageModel,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="tokenizer_for_runs",
    )
    training_kind = models.CharField(max_length=10, choices=Kind.choices)
    # n-gram: order, min_count; causal: shape, steps, batch_tokens, learning_rate, ...;
    # masked: those and mask_probability, whole_word_masking
    options = models.JSONField(default=dict)
    # The run's folder in the artifact store (evaluations.training.stored.folder_name):
    # a key, never a machine's path. Each worker trains in a folder of that model's name
    # under its own GYM_TRAINING_DIR.
    store_folder = models.CharField(max_length=300, blank=True)
    # An install from before the store: the web host's folder the run wrote to, read only
    # by `manage.py artifacts_migrate`, which empties it once the run's files are stored.
    legacy_out_dir = models.CharField(max_length=500, blank=True)
    suites = models.ManyToManyField("suites.Suite", blank=True, related_name="training_runs")
    pair_sets = models.ManyToManyField(
        "suites.MinimalPairSet", blank=True, related_name="training_runs"
    )
    probing_tasks = models.ManyToManyField(
        "suites.ProbingTask", blank=True, related_name="training_runs"
    )
    # Age of acquisition: the accuracy a suite must keep from a checkpoint on.
    threshold = models.FloatField(default=0.8)
    # [{step, tokens, loss, lr}, {step, tokens, validation_loss}, ...] as the worker reports
    log = models.JSONField(default=list, blank=True)
    # [{step, tokens, model, train_loss, validation_loss, bytes, scheduled, removed}] in
    # order of tokens; "removed": retention deleted the folder (the model row stays)
    checkpoints = models.JSONField(default=list, blank=True)
    summary = models.JSONField(default=dict, blank=True)

    class Meta:
        app_label = "evaluations"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["model"], name="training_run_unique_model"),
        ]

    def __str__(self) -> str:
        return f"training {self.model} on {self.corpus} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("evaluations:training_run", args=[self.pk])

    def checkpoint_models(self) -> list[tuple[LanguageModel, int | None]]:
        """(model, tokens seen) of each checkpoint, by tokens, for boards of this run; a run
        without checkpoints (an n-gram model) gives its finished model."""
        tokens = {c["model"]: int(c["tokens"]) for c in self.checkpoints}
        if not tokens:
            return [(self.model, None)]
        found = LanguageModel.objects.filter(name__in=list(tokens))
        return sorted(((m, tokens[m.name]) for m in found), key=lambda pair: pair[1] or 0)

    @property
    def disk_bytes(self) -> int:
        """What the checkpoint folders still on disk take."""
        return sum(c.get("bytes") or 0 for c in self.checkpoints if not c.get("removed"))

    @property
    def trains_transformer(self) -> bool:
        """A causal or masked run: steps, a loss curve and checkpoints."""
        return self.training_kind in (self.Kind.CAUSAL, self.Kind.MASKED)

    @property
    def steps(self) -> int:
        return int(self.options.get("steps") or 0)

    @property
    def tokens_per_step(self) -> int:
        return int(self.options.get("tokens_per_step") or 0)

    @property
    def progress_text(self) -> str:
        if self.training_kind == self.Kind.NGRAM:
            return "counting and estimating" if self.status == self.Status.RUNNING else ""
        done = self.progress_done
        return (
            f"step {done:,} of {self.steps:,}, {done * self.tokens_per_step:,} of "
            f"{self.steps * self.tokens_per_step:,} tokens"
        )


def whole_only() -> list[dict[str, int]]:
    """A series' samples until asked otherwise: the whole benchmarks."""
    return [{"size": 0, "seed": 0}]


class ModelSeries(models.Model):
    """Checkpoints of one training, registered as models and read as a learning curve:
    a training run's are made by the run; a series is one made of checkpoints trained
    elsewhere (hub revisions, a folder of Trainer checkpoints, uploaded models). Series
    with the same `group` are seeds of one training, drawn as a mean with a band."""

    class Unit(models.TextChoices):
        TOKENS = "tokens", "tokens seen"
        WORDS = "words", "words seen"
        STEPS = "steps", "training steps"

    name = models.SlugField(max_length=100, unique=True)
    display_name = models.CharField(max_length=200)
    # Where its members came from: a hub id (or a local stand-in laid out like
    # revisions), a folder of checkpoints, or "" (registered models).
    source = models.CharField(max_length=500, blank=True)
    group = models.SlugField(max_length=100, blank=True)
    # What a member's `tokens` counts (steps: nothing known beside the step).
    unit = models.CharField(max_length=10, choices=Unit.choices, default=Unit.TOKENS)
    threshold = models.FloatField(default=0.8)
    # The benchmarks it was evaluated on (what its curves show).
    suites = models.ManyToManyField("suites.Suite", blank=True, related_name="model_series")
    pair_sets = models.ManyToManyField(
        "suites.MinimalPairSet", blank=True, related_name="model_series"
    )
    probing_tasks = models.ManyToManyField(
        "suites.ProbingTask", blank=True, related_name="model_series"
    )
    # The samples its curves show, as evaluate requests asked for them: {"size": 0} the
    # whole benchmarks, {"size": N, "seed": S} a subset (the fast subset for sweeps).
    # A series registered since starts with none (its first request says which); one
    # registered before was evaluated on the whole benchmarks.
    samples = models.JSONField(default=whole_only)
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "evaluations"
        ordering = ["name"]
        verbose_name_plural = "model series"

    def sample_list(self) -> list[Subset | None]:
        """Its curves' samples: None for the whole benchmarks, then each subset."""
        listed: list[Subset | None] = []
        for sample in self.samples or []:
            size = int(sample.get("size") or 0)
            chosen = Subset(size, int(sample.get("seed") or 0)) if size else None
            if chosen not in listed:
                listed.append(chosen)
        return listed or [None]

    def sample_add(self, subset: Subset | None) -> None:
        """Show the curves of `subset` (None: the whole benchmarks) too; saved."""
        entry = subset.as_dict() if subset is not None else {"size": 0, "seed": 0}
        if entry not in (self.samples or []):
            self.samples = [*(self.samples or []), entry]
            self.save(update_fields=["samples"])

    def __str__(self) -> str:
        return self.display_name or self.name

    def get_absolute_url(self) -> str:
        return reverse("evaluations:model_series", args=[self.name])

    def checkpoints(self) -> list[dict[str, Any]]:
        """Its members as a training run's checkpoints read: {step, tokens, model}, in
        order of tokens (of steps where the tokens are not known)."""
        members = self.members.select_related("model").order_by("position")
        return [
            {
                "step": m.step,
                "tokens": m.step if self.unit == self.Unit.STEPS else m.tokens,
                "model": m.model.name,
            }
            for m in members
        ]


class SeriesMember(models.Model):
    """One checkpoint of a series: a registered model, its step and what it had seen."""

    series = models.ForeignKey(ModelSeries, on_delete=models.CASCADE, related_name="members")
    model = models.ForeignKey(LanguageModel, on_delete=models.CASCADE, related_name="series_of")
    step = models.BigIntegerField(null=True, blank=True)
    tokens = models.BigIntegerField(null=True, blank=True)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        app_label = "evaluations"
        ordering = ["series", "position"]
        constraints = [
            models.UniqueConstraint(fields=["series", "model"], name="series_member_unique"),
        ]
