from __future__ import annotations

from django.db import models
from django.urls import reverse

from evaluations.language_models.models import LanguageModel
from evaluations.runs.models import Run


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
    out_dir = models.CharField(max_length=500)
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
