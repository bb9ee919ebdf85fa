"""Probing runs: one model's layers probed on one probing task, and their results."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from evaluations.language_models.models import LanguageModel
from evaluations.runs.models import Run, Sampled, run_identity

# The task, its content and the options that change a probing run's results.
PROBE_IDENTITY = ("task", "content_hash", "pooling", "probe", "seeds", "mdl")


class ProbingRun(Run, Sampled):
    """One model's layers probed on one probing task's content, with one pooling and one
    probe. The per-layer accuracies are `ProbingLayerResult` rows; the best layer (chosen
    on va) and its te confusion matrix are kept here for the leaderboard and pages."""

    benchmark_field = "task"
    # A probing subset counts te sentences; tr and va are sampled at the same rate.
    subset_noun = "te sentences"

    class Pooling(models.TextChoices):
        MEAN = "mean", "mean of the sentence's tokens"
        LAST = "last", "last token (causal models)"

    class Probe(models.TextChoices):
        LOGREG = "logreg", "logistic regression"
        MLP = "mlp", "MLP (one hidden layer)"

    model = models.ForeignKey(LanguageModel, on_delete=models.CASCADE, related_name="probing_runs")
    task = models.ForeignKey("suites.ProbingTask", on_delete=models.CASCADE, related_name="runs")
    content_hash = models.CharField(max_length=64)
    pooling = models.CharField(max_length=10, choices=Pooling.choices, default=Pooling.MEAN)
    probe = models.CharField(max_length=10, choices=Probe.choices, default=Probe.LOGREG)
    # Probes trained per layer, each with its own seed (runs stored before seeds: one).
    seeds = models.PositiveSmallIntegerField(default=1)
    # Whether the online code (MDL) was computed at each layer.
    mdl = models.BooleanField(default=False)
    # The frequency baseline's unigram counts come from this corpus; None: the CMU
    # trigram's unigrams (the default).
    frequency_corpus = models.ForeignKey(
        "suites.Corpus",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="probing_runs",
    )
    best_layer = models.PositiveSmallIntegerField(null=True, blank=True)
    best_va = models.FloatField(null=True, blank=True)
    best_te = models.FloatField(null=True, blank=True)
    # te accuracy minus the control task's, at the best layer (None: no control, or older)
    best_selectivity = models.FloatField(null=True, blank=True)
    # {"majority": {"label", "va_accuracy", "te_accuracy"}, "length": {...},
    #  "frequency": {...}, "chance", "applicable": {...}}
    baselines = models.JSONField(default=dict, blank=True)
    # te at the best layer: {"labels": [...], "matrix": [[...]]} (rows true, columns predicted)
    confusion = models.JSONField(default=dict, blank=True)
    # The task as probed: name, type, labels, counts per partition and label.
    task_info = models.JSONField(default=dict, blank=True)
    diagnostics = models.JSONField(default=dict, blank=True)
    model_info = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # NULLs are distinct in a unique index: a CMU run (no corpus) has its own.
            models.UniqueConstraint(
                fields=run_identity(*PROBE_IDENTITY),
                condition=models.Q(frequency_corpus__isnull=True),
                name="probing_run_unique_options",
            ),
            models.UniqueConstraint(
                fields=run_identity(*PROBE_IDENTITY, "frequency_corpus"),
                condition=models.Q(frequency_corpus__isnull=False),
                name="probing_run_unique_options_corpus",
            ),
        ]
        indexes = [models.Index(fields=["status", "task", "model"], name="probing_run_board")]

    def __str__(self) -> str:
        return f"{self.model} on {self.task} ({self.pooling}, {self.probe}; {self.status})"

    def get_absolute_url(self) -> str:
        return reverse("evaluations:probing_run", args=[self.pk])

    @property
    def frequency_source(self) -> str:
        """Which unigram counts the frequency baseline uses, as pages and exports say it."""
        from evaluations.probing.controls import CMU_SOURCE, corpus_source_name

        corpus = self.frequency_corpus
        if corpus is None:
            return CMU_SOURCE
        return corpus_source_name(corpus.name, corpus.word_count)

    @property
    def progress_text(self) -> str:
        """Where the run is: sentences while vectors are extracted, then layers probed
        (progress counts both, sentences first: see evaluations.probing.worker)."""
        done, total = self.progress_done, self.progress_total
        sentences = self.diagnostics.get("sentences") or self.task.instance_count
        if self.status == self.Status.DONE:
            return f"{sentences:,} sentences, {max(total - sentences, 0)} layers"
        if done < sentences or total <= sentences:
            return f"vectors: {min(done, sentences):,} of {sentences:,} sentences"
        return f"probes: {done - sentences} of {total - sentences} layers"


class ProbingLayerResult(models.Model):
    """One layer's probe: accuracy on va (where hyperparameters are chosen) and on te.
    Layer 0 is the embedding output."""

    run = models.ForeignKey(ProbingRun, on_delete=models.CASCADE, related_name="layers")
    layer = models.PositiveSmallIntegerField()
    va_accuracy = models.FloatField()
    te_accuracy = models.FloatField()
    hyperparameters = models.JSONField(default=dict, blank=True)
    # Seeds' spread, the control task and selectivity, the online code: see
    # evaluations.probing.run (empty for runs stored before them).
    stats = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "layer"]
        constraints = [
            models.UniqueConstraint(fields=["run", "layer"], name="probing_layer_unique"),
        ]


class ProbingAnnotation(models.Model):
    """One person's answer for one te sentence of a probing task, given without seeing
    its label: human accuracy, the reference SentEval's README asks for on tasks such as
    odd_man_out. A replaced task's instances go, and their answers with them."""

    instance = models.ForeignKey(
        "suites.ProbingInstance", on_delete=models.CASCADE, related_name="annotations"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="probing_annotations"
    )
    label = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["instance", "user"], name="probing_annotation_once"),
        ]
