"""Suite evaluations: one model on one suite, its snapshot and its results."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.urls import reverse

from evaluations.language_models.models import LanguageModel
from evaluations.runs.models import Run, Sampled, run_identity, word_probability_field
from suites.syntaxgym.models import Suite


class Evaluation(Run, Sampled):
    """One model on one suite's content (identified by its content hash)."""

    benchmark_field = "suite"

    model = models.ForeignKey(LanguageModel, on_delete=models.CASCADE, related_name="evaluations")
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="evaluations")
    content_hash = models.CharField(max_length=64)
    metric = models.CharField(max_length=10, default="sum")
    accuracy = models.FloatField(null=True, blank=True)
    # Strict comparisons (< or >) whose two sides were exactly equal: each failed, as in
    # SyntaxGym. n-gram models tie often; the accuracy with ties broken at random says
    # how much they cost.
    ties = models.PositiveIntegerField(default=0)
    accuracy_random_ties = models.FloatField(null=True, blank=True)
    diagnostics = models.JSONField(default=dict, blank=True)
    model_info = models.JSONField(default=dict, blank=True)
    # What a region's `sum` is: "tokens", the sum of its token surprisals (every result
    # before this option, and the only one the leaderboard and the pages that compare
    # models read), or "corrected" for the word boundary (evaluations.scoring.boundary).
    word_probability = word_probability_field()
    # Which delivery of the current attempt is storing the results (a random token; empty
    # when none is). On SQLite a large store is written in several transactions
    # (`services.results_store`): a delivery claims the store with a conditional update,
    # and each of its transactions writes only while its claim holds, so that two
    # deliveries of one attempt never both write and a later one takes over from one
    # that died half way.
    store_claim = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=run_identity("suite", "content_hash", "word_probability"),
                name="evaluation_unique_content",
            ),
        ]
        indexes = [
            models.Index(fields=["status"]),
            # Covers the leaderboard's one query over all evaluations.
            models.Index(
                fields=["status", "suite", "model", "content_hash", "accuracy", "ties"],
                name="evaluation_board",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} on {self.suite} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("evaluations:detail", args=[self.pk])

    @property
    def snapshot(self) -> dict[str, Any]:
        """The suite as it was evaluated (its `EvaluationSnapshot`): one query, unless
        the evaluation was read with `select_related("snapshot_row")`."""
        return self.snapshot_row.content


class EvaluationSnapshot(models.Model):
    """The suite as an evaluation evaluated it, so results of outdated content stay
    readable. A table of its own, not a column of the evaluation: the evaluation's row is
    updated at every progress report, and SQLite reads a row whole to update it (and
    rewrites it whole when its size changes), 36 MB at 100,000 items. Written once, with
    the evaluation (`evaluations.syntaxgym.services.evaluation_create`)."""

    evaluation = models.OneToOneField(
        Evaluation, on_delete=models.CASCADE, primary_key=True, related_name="snapshot_row"
    )
    content = models.JSONField()


class PredictionResult(models.Model):
    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.CASCADE, related_name="prediction_results"
    )
    position = models.PositiveIntegerField()
    formula = models.TextField()
    accuracy = models.FloatField(null=True)
    passed = models.PositiveIntegerField(default=0)
    evaluated = models.PositiveIntegerField(default=0)
    ties = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["evaluation", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "position"], name="prediction_result_unique"
            ),
        ]


# The item rows a reader may show: those of done runs. On SQLite a large store writes its
# rows in several transactions before the run becomes done in the last one
# (`evaluations.syntaxgym.services.results_store`), so a run that is not done may have
# some of its rows (or a retried run some of its old ones) for a while.
ITEM_ROWS_SHOWN = models.Q(evaluation__status="done")


class ItemResult(models.Model):
    """Region values and prediction outcomes of one item (one row per item keeps storing
    a 1,000-item suite at 1,000 rows)."""

    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.CASCADE, related_name="item_results"
    )
    item_number = models.IntegerField()
    position = models.PositiveIntegerField()
    # {condition: {"sum": [v per region], "mean": [...], ...}}; None where a value is missing
    values = models.JSONField()
    # One entry per prediction: True, False, or None (not evaluable: a missing value).
    outcomes = models.JSONField()
    passed = models.BooleanField(null=True)
    # {condition: packed tokens (evaluations.token_data: parallel arrays of token texts,
    # character offsets and surprisals in bits)}; None for evaluations stored before
    # token surprisals were kept.
    tokens = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["evaluation", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "item_number"], name="item_result_unique"
            ),
        ]
